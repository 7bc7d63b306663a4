/*
 * test_holders.c - the set of reasons a process is profiled (holders.h):
 * which hold is in force when, when a target is let go, what a child
 * inherits, and what the index and /metrics are told.
 */
#include <math.h>
#include <string.h>

#include "check.h"
#include "holders.h"

/* One second, in the monotonic nanoseconds holders count in. */
#define S 1000000000ull

static void nothing_holds_an_empty_set(void)
{
    struct holders h = {{0}, {0}};
    CHECK(!holders_held(&h, 0));
    CHECK_U64_EQ(holders_until(&h, 0), 0);
    char buf[32];
    CHECK_INT_EQ(holders_describe(&h, 0, buf, sizeof(buf)), 0);
    CHECK_STR_EQ(buf, "");
}

static void a_request_holds_until_its_deadline_and_a_later_one_extends_it(void)
{
    struct holders h = {{0}, {0}};
    holders_add(&h, HOLD_REQUEST, 100 * S);
    CHECK(holders_held(&h, 99 * S));
    CHECK(!holders_held(&h, 100 * S));
    holders_add(&h, HOLD_REQUEST, 160 * S);
    CHECK(holders_held(&h, 150 * S));
    CHECK_U64_EQ(holders_until(&h, 150 * S), 160 * S);
    /* An earlier end does not shorten it. */
    holders_add(&h, HOLD_REQUEST, 120 * S);
    CHECK_U64_EQ(holders_until(&h, 150 * S), 160 * S);
    CHECK_INT_EQ(h.count[HOLD_REQUEST], 1);
}

static void pid_and_rule_holds_never_end(void)
{
    struct holders h = {{0}, {0}};
    holders_add(&h, HOLD_RULE, HOLD_FOREVER);
    holders_add(&h, HOLD_REQUEST, 10 * S);
    CHECK(holders_held(&h, 1000000 * S));
    CHECK_U64_EQ(holders_until(&h, 5 * S), HOLD_FOREVER);
    char buf[32];
    holders_describe(&h, 5 * S, buf, sizeof(buf));
    CHECK_STR_EQ(buf, "rule,request");
    holders_describe(&h, 50 * S, buf, sizeof(buf));
    CHECK_STR_EQ(buf, "rule");
}

static void windows_overlap_and_hold_until_the_last_is_dropped_even_past_their_end(void)
{
    struct holders h = {{0}, {0}};
    holders_add(&h, HOLD_WINDOW, 10 * S);
    holders_add(&h, HOLD_WINDOW, 30 * S);
    CHECK_INT_EQ(h.count[HOLD_WINDOW], 2);
    CHECK_U64_EQ(holders_until(&h, 5 * S), 30 * S);
    holders_drop(&h, HOLD_WINDOW);
    /* A slow build must not lose the counts it reads at the end. */
    CHECK(holders_held(&h, 40 * S));
    holders_drop(&h, HOLD_WINDOW);
    CHECK(!holders_held(&h, 5 * S));
    holders_drop(&h, HOLD_WINDOW); /* one drop too many changes nothing */
    CHECK_INT_EQ(h.count[HOLD_WINDOW], 0);
}

static void a_window_leaves_a_request_hold_as_it_was(void)
{
    struct holders h = {{0}, {0}};
    holders_add(&h, HOLD_REQUEST, 100 * S);
    holders_add(&h, HOLD_WINDOW, 20 * S);
    holders_drop(&h, HOLD_WINDOW);
    CHECK(holders_held(&h, 50 * S));
    CHECK_U64_EQ(holders_until(&h, 50 * S), 100 * S);
}

static void a_child_is_held_as_long_as_its_parent_was_at_the_fork(void)
{
    struct holders parent = {{0}, {0}};
    holders_add(&parent, HOLD_REQUEST, 100 * S);
    struct holders child = holders_for_child(&parent, 10 * S);
    CHECK_INT_EQ(child.count[HOLD_FORK], 1);
    CHECK_INT_EQ(child.count[HOLD_REQUEST], 0);
    CHECK_U64_EQ(holders_until(&child, 10 * S), 100 * S);

    holders_add(&parent, HOLD_PID, HOLD_FOREVER);
    child = holders_for_child(&parent, 10 * S);
    CHECK_U64_EQ(holders_until(&child, 10 * S), HOLD_FOREVER);

    struct holders idle = {{0}, {0}};
    holders_add(&idle, HOLD_REQUEST, 5 * S);
    child = holders_for_child(&idle, 10 * S); /* its parent is let go already */
    CHECK(!holders_held(&child, 10 * S));
}

static void an_exec_drops_a_fork_hold(void)
{
    struct holders h = {{0}, {0}};
    holders_add(&h, HOLD_FORK, HOLD_FOREVER);
    holders_add(&h, HOLD_REQUEST, 100 * S);
    holders_drop(&h, HOLD_FORK);
    CHECK(!holders_holds(&h, HOLD_FORK, 0));
    CHECK(holders_holds(&h, HOLD_REQUEST, 0));
}

static void merging_keeps_every_hold_and_the_later_ends(void)
{
    struct holders a = {{0}, {0}}, b = {{0}, {0}};
    holders_add(&a, HOLD_REQUEST, 50 * S);
    holders_add(&b, HOLD_REQUEST, 80 * S);
    holders_add(&b, HOLD_WINDOW, 20 * S);
    holders_add(&b, HOLD_WINDOW, 20 * S);
    holders_merge(&a, &b);
    CHECK_U64_EQ(a.until_ns[HOLD_REQUEST], 80 * S);
    CHECK_INT_EQ(a.count[HOLD_WINDOW], 2);
}

static void a_description_that_does_not_fit_is_cut_and_says_its_length(void)
{
    struct holders h = {{0}, {0}};
    for (int k = 0; k < HOLD_KINDS; k++)
        holders_add(&h, (enum hold_kind)k, HOLD_FOREVER);
    char small[8];
    int n = holders_describe(&h, 0, small, sizeof(small));
    CHECK_INT_EQ(n, (int)strlen("pid,rule,fork,request,window"));
    CHECK_STR_EQ(small, "pid,rul");
    CHECK_STR_EQ(hold_kind_name(HOLD_KINDS), "?");
}

static void seconds_left_are_infinite_without_an_end_and_never_negative(void)
{
    struct holders h = {{0}, {0}};
    CHECK(holders_seconds_left(&h, 5 * S) == 0.0);
    holders_add(&h, HOLD_REQUEST, 160 * S);
    CHECK(holders_seconds_left(&h, 150 * S) == 10.0);
    struct holders w = {{0}, {0}};
    holders_add(&w, HOLD_WINDOW, 10 * S); /* held past its end until dropped */
    CHECK(holders_seconds_left(&w, 40 * S) == 0.0);
    holders_add(&h, HOLD_RULE, HOLD_FOREVER);
    CHECK(isinf(holders_seconds_left(&h, 150 * S)));
}

int main(void)
{
    RUN_TEST(nothing_holds_an_empty_set);
    RUN_TEST(a_request_holds_until_its_deadline_and_a_later_one_extends_it);
    RUN_TEST(pid_and_rule_holds_never_end);
    RUN_TEST(windows_overlap_and_hold_until_the_last_is_dropped_even_past_their_end);
    RUN_TEST(a_window_leaves_a_request_hold_as_it_was);
    RUN_TEST(a_child_is_held_as_long_as_its_parent_was_at_the_fork);
    RUN_TEST(an_exec_drops_a_fork_hold);
    RUN_TEST(merging_keeps_every_hold_and_the_later_ends);
    RUN_TEST(a_description_that_does_not_fit_is_cut_and_says_its_length);
    RUN_TEST(seconds_left_are_infinite_without_an_end_and_never_negative);
    return check_exit_code();
}
