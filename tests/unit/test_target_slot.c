/*
 * test_target_slot.c - a target's lifecycle state as the target table
 * sees it (daemon/attach/target_slot.h): only live targets are walked,
 * listed and found by pid, and a function that says it runs under the
 * table's lock aborts when called without it (in checks builds, which
 * this file turns on for itself).
 */
#define HEAPPROF_CHECKS 1

#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "target_slot.h"
#include "targets.h"

/* Puts a bare target for `pid` in `state` into slot `i` of `t`. */
static struct target *put(struct targets *t, size_t i, pid_t pid, enum target_state state)
{
    struct target *tg = calloc(1, sizeof(*tg));
    tg->pid = pid;
    tg->state = state;
    t->slot[i] = tg;
    return tg;
}

/* A table with one target in each state but ENDED (which never sits in a
 * slot), and two live ones: pid 10 in slot 1, pid 7 in slot 5 (pid 7 is
 * also the pid of a detaching target in slot 0, the process it was). */
static void fill(struct targets *t)
{
    targets_init(t, NULL, NULL, 0);
    put(t, 0, 7, TARGET_DETACHING);
    put(t, 1, 10, TARGET_LIVE);
    put(t, 3, 11, TARGET_ATTACHING);
    put(t, 5, 7, TARGET_LIVE);
}

/* Empties the table filled by fill(). */
static void empty(struct targets *t)
{
    for (size_t i = 0; i < HP_MAX_TARGETS; i++) {
        free(t->slot[i]);
        t->slot[i] = NULL;
    }
    pthread_cond_destroy(&t->changed);
    pthread_mutex_destroy(&t->lock);
}

static void only_live_targets_are_walked_in_slot_order(void)
{
    struct targets t;
    fill(&t);
    size_t seen[HP_MAX_TARGETS], n = 0;
    struct target *tg;
    targets_lock(&t);
    for_each_live_target(&t, i, tg)
        seen[n++] = i;
    targets_unlock(&t);
    CHECK_INT_EQ(n, 2);
    CHECK_INT_EQ(seen[0], 1);
    CHECK_INT_EQ(seen[1], 5);
    CHECK(!target_live(NULL));
    CHECK(!target_live(t.slot[3]));
    empty(&t);
}

static void break_ends_the_walk_at_the_first_match(void)
{
    struct targets t;
    fill(&t);
    size_t n = 0;
    struct target *tg;
    targets_lock(&t);
    for_each_live_target(&t, i, tg) {
        n++;
        break;
    }
    targets_unlock(&t);
    CHECK_INT_EQ(n, 1);
    empty(&t);
}

static void a_pid_finds_its_live_target_not_the_one_going(void)
{
    struct targets t;
    fill(&t);
    size_t slot = 99;
    targets_lock(&t);
    struct target *found = target_find_live(&t, 7, &slot);
    CHECK(found == t.slot[5]);
    CHECK_INT_EQ(slot, 5);
    CHECK(target_find_live(&t, 11, &slot) == NULL); /* still attaching */
    CHECK(target_find_live(&t, 12, &slot) == NULL);
    targets_unlock(&t);
    empty(&t);
}

static void the_list_counts_live_targets_only(void)
{
    struct targets t;
    fill(&t);
    CHECK_INT_EQ(targets_list(&t, NULL, 0), 2);
    empty(&t);
}

/* Runs `fn` on a filled table in a child; returns the signal that ended
 * the child (0: it exited normally). */
static int signal_of_child(void (*fn)(struct targets *t))
{
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        struct targets t;
        fill(&t);
        fn(&t);
        _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFSIGNALED(status) ? WTERMSIG(status) : 0;
}

/* Looks a pid up without the lock, which the contract forbids. */
static void find_without_the_lock(struct targets *t)
{
    size_t slot;
    (void)target_find_live(t, 7, &slot);
}

/* Looks a pid up holding the lock, as the contract says. */
static void find_with_the_lock(struct targets *t)
{
    size_t slot;
    targets_lock(t);
    (void)target_find_live(t, 7, &slot);
    targets_unlock(t);
}

static void a_lookup_without_the_lock_aborts_and_one_with_it_does_not(void)
{
    CHECK_INT_EQ(signal_of_child(find_without_the_lock), SIGABRT);
    CHECK_INT_EQ(signal_of_child(find_with_the_lock), 0);
}

int main(void)
{
    RUN_TEST(only_live_targets_are_walked_in_slot_order);
    RUN_TEST(break_ends_the_walk_at_the_first_match);
    RUN_TEST(a_pid_finds_its_live_target_not_the_one_going);
    RUN_TEST(the_list_counts_live_targets_only);
    RUN_TEST(a_lookup_without_the_lock_aborts_and_one_with_it_does_not);
    return check_exit_code();
}
