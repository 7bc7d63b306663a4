/*
 * test_unwind_manager.c - the allocator of the shared unwind rows array
 * (unwind_manager_rows_alloc/free): first fit, free ranges merged again, no
 * row handed out twice, every row back once all is freed. Tables themselves
 * are built from real files in test_unwind_table.c; loading them into the
 * BPF maps is covered by the integration tests.
 */
#include "check.h"
#include "unwind_manager.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

/* A manager without BPF maps: the row allocator needs none. */
static struct unwind_manager *new_manager(void)
{
    struct unwind_manager *m = calloc(1, sizeof(*m));
    if (!m || unwind_manager_init(m, NULL) != 0) {
        fprintf(stderr, "%s:%d: unwind_manager_init failed\n", __FILE__, __LINE__);
        check_failures++;
        free(m);
        return NULL;
    }
    return m;
}

static void free_manager(struct unwind_manager *m)
{
    unwind_manager_destroy(m);
    free(m);
}

/* `n` rows; their first, or UINT32_MAX (and a failure) if there was no room. */
static uint32_t take(struct unwind_manager *m, uint32_t n)
{
    uint32_t first = UINT32_MAX;
    int e = unwind_manager_rows_alloc(m, n, &first);
    if (e) {
        fprintf(stderr, "%s:%d: %u rows: error %d with %zu rows in use\n", __FILE__, __LINE__, n, e,
                m->stats.rows_used);
        check_failures++;
        return UINT32_MAX;
    }
    return first;
}

/*
 * Fails unless the free ranges are sorted, apart (two that touch would have
 * been merged) and inside the array, and free plus used rows are all rows.
 */
static void check_free_ranges(const struct unwind_manager *m, const char *when)
{
    uint64_t free_rows = 0;
    for (size_t i = 0; i < m->nfree; i++) {
        const struct row_range *r = &m->free_ranges[i];
        int bad = r->len == 0 || (uint64_t)r->start + r->len > HP_MAX_UNWIND_ROWS ||
                  (i > 0 && m->free_ranges[i - 1].start + m->free_ranges[i - 1].len >= r->start);
        if (bad) {
            fprintf(stderr, "%s:%d: %s: free range %zu is [%u, +%u) after [%u, +%u)\n", __FILE__,
                    __LINE__, when, i, r->start, r->len, i ? m->free_ranges[i - 1].start : 0,
                    i ? m->free_ranges[i - 1].len : 0);
            check_failures++;
        }
        free_rows += r->len;
    }
    if (free_rows + m->stats.rows_used != HP_MAX_UNWIND_ROWS) {
        fprintf(stderr, "%s:%d: %s: %llu rows free + %zu in use != %u\n", __FILE__, __LINE__, when,
                (unsigned long long)free_rows, m->stats.rows_used, HP_MAX_UNWIND_ROWS);
        check_failures++;
    }
}

/* Fails unless every row is free again, in one range. */
static void check_all_free(const struct unwind_manager *m, const char *when)
{
    check_free_ranges(m, when);
    if (m->nfree != 1 || m->free_ranges[0].start != 0 ||
        m->free_ranges[0].len != HP_MAX_UNWIND_ROWS || m->stats.rows_used != 0) {
        fprintf(stderr, "%s:%d: %s: %zu free ranges, the first [%u, +%u), %zu rows in use\n",
                __FILE__, __LINE__, when, m->nfree, m->free_ranges[0].start, m->free_ranges[0].len,
                m->stats.rows_used);
        check_failures++;
    }
}

static void tables_are_placed_one_after_another(void)
{
    struct unwind_manager *m = new_manager();
    if (!m)
        return;
    CHECK_INT_EQ(take(m, 10), 0);
    CHECK_INT_EQ(take(m, 20), 10);
    CHECK_INT_EQ(take(m, 1), 30);
    CHECK_INT_EQ(m->stats.rows_used, 31);
    check_free_ranges(m, "after three tables");
    free_manager(m);
}

static void a_freed_hole_is_reused_by_the_first_table_that_fits(void)
{
    struct unwind_manager *m = new_manager();
    if (!m)
        return;
    uint32_t a = take(m, 10), b = take(m, 20), c = take(m, 30);
    unwind_manager_rows_free(m, b, 20); /* a hole of 20 at 10 */
    check_free_ranges(m, "after freeing the middle table");
    CHECK_INT_EQ(m->nfree, 2);
    CHECK_INT_EQ(take(m, 15), 10); /* fits the hole: first fit */
    CHECK_INT_EQ(take(m, 10), 60); /* the 5 rows left of the hole are too few */
    CHECK_INT_EQ(take(m, 5), 25);  /* ... but not for this one */
    CHECK_INT_EQ(m->nfree, 1);
    check_free_ranges(m, "after filling the hole");
    (void)a;
    (void)c;
    free_manager(m);
}

static void freeing_in_any_order_merges_back_into_one_range(void)
{
    /* Each order of freeing three neighbours: merged with the range before,
     * after, both or neither at each step. */
    static const int orders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                     {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    static const uint32_t sizes[3] = {7, 1, 300};
    for (int o = 0; o < 6; o++) {
        struct unwind_manager *m = new_manager();
        if (!m)
            return;
        uint32_t first[3];
        for (int k = 0; k < 3; k++)
            first[k] = take(m, sizes[k]);
        for (int k = 0; k < 3; k++) {
            int which = orders[o][k];
            unwind_manager_rows_free(m, first[which], sizes[which]);
            check_free_ranges(m, "while freeing");
        }
        char when[64];
        snprintf(when, sizeof(when), "freed in the order %d %d %d", orders[o][0], orders[o][1],
                 orders[o][2]);
        check_all_free(m, when);
        free_manager(m);
    }
}

static void a_table_larger_than_any_free_range_is_enospc(void)
{
    struct unwind_manager *m = new_manager();
    if (!m)
        return;
    uint32_t first = 12345;
    CHECK_INT_EQ(unwind_manager_rows_alloc(m, HP_MAX_UNWIND_ROWS + 1, &first), -ENOSPC);
    CHECK_INT_EQ(first, 12345);
    CHECK_INT_EQ(take(m, HP_MAX_UNWIND_ROWS), 0); /* the whole array */
    CHECK_INT_EQ(m->nfree, 0);
    CHECK_INT_EQ(unwind_manager_rows_alloc(m, 1, &first), -ENOSPC);
    unwind_manager_rows_free(m, 0, HP_MAX_UNWIND_ROWS);
    check_all_free(m, "after the whole array came back");
    /* Two halves with a hole of 100 between: 101 rows do not fit anywhere. */
    CHECK_INT_EQ(take(m, HP_MAX_UNWIND_ROWS / 2), 0);
    CHECK_INT_EQ(take(m, 100), HP_MAX_UNWIND_ROWS / 2);
    CHECK_INT_EQ(take(m, HP_MAX_UNWIND_ROWS / 2 - 100), HP_MAX_UNWIND_ROWS / 2 + 100);
    unwind_manager_rows_free(m, HP_MAX_UNWIND_ROWS / 2, 100);
    CHECK_INT_EQ(unwind_manager_rows_alloc(m, 101, &first), -ENOSPC);
    CHECK_INT_EQ(take(m, 100), HP_MAX_UNWIND_ROWS / 2);
    free_manager(m);
}

static void many_holes_outgrow_the_first_free_list(void)
{
    /* 200 tables of 3 rows, every other one freed: 100 holes, more than the
     * 16 free ranges the manager starts with room for. */
    struct unwind_manager *m = new_manager();
    if (!m)
        return;
    uint32_t first[200];
    for (int i = 0; i < 200; i++)
        first[i] = take(m, 3);
    for (int i = 0; i < 200; i += 2)
        unwind_manager_rows_free(m, first[i], 3);
    CHECK_INT_EQ(m->nfree, 101);
    check_free_ranges(m, "with 100 holes");
    for (int i = 1; i < 200; i += 2)
        unwind_manager_rows_free(m, first[i], 3);
    check_all_free(m, "after all 200 tables");
    free_manager(m);
}

/* A xorshift generator: the same sequence on every run. */
static uint32_t next_random(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return (uint32_t)(*state >> 32);
}

static void random_tables_never_share_a_row(void)
{
    /* Tables of 1 to 5000 rows come and go at random, as files are mapped
     * and unmapped; an owner per row catches any row handed out twice. */
    enum { LIVE = 64, STEPS = 20000 };
    struct unwind_manager *m = new_manager();
    uint8_t *owner = calloc(HP_MAX_UNWIND_ROWS, 1);
    struct {
        uint32_t first, n;
    } live[LIVE] = {{0}};
    uint64_t seed = 0x2545f4914f6cdd1dULL;
    if (!m || !owner)
        goto out;
    for (int step = 0; step < STEPS && check_failures == 0; step++) {
        int slot = (int)(next_random(&seed) % LIVE);
        if (live[slot].n) {
            for (uint32_t r = live[slot].first; r < live[slot].first + live[slot].n; r++)
                owner[r] = 0;
            unwind_manager_rows_free(m, live[slot].first, live[slot].n);
            live[slot].n = 0;
            continue;
        }
        /* At most 64 x 5000 rows live, a sixth of the array: with the same
         * seed every run, this sequence always finds room. */
        uint32_t n = 1 + next_random(&seed) % 5000, first = take(m, n);
        if (first == UINT32_MAX)
            break;
        for (uint32_t r = first; r < first + n; r++) {
            if (owner[r]) {
                fprintf(stderr, "%s:%d: step %d: row %u handed out to slot %d and slot %d\n",
                        __FILE__, __LINE__, step, r, owner[r] - 1, slot);
                check_failures++;
                break;
            }
            owner[r] = (uint8_t)(slot + 1);
        }
        live[slot].first = first;
        live[slot].n = n;
        check_free_ranges(m, "during the random run");
    }
    for (int slot = 0; slot < LIVE; slot++)
        if (live[slot].n)
            unwind_manager_rows_free(m, live[slot].first, live[slot].n);
    check_all_free(m, "after the random run");
out:
    free(owner);
    if (m)
        free_manager(m);
}

int main(void)
{
    RUN_TEST(tables_are_placed_one_after_another);
    RUN_TEST(a_freed_hole_is_reused_by_the_first_table_that_fits);
    RUN_TEST(freeing_in_any_order_merges_back_into_one_range);
    RUN_TEST(a_table_larger_than_any_free_range_is_enospc);
    RUN_TEST(many_holes_outgrow_the_first_free_list);
    RUN_TEST(random_tables_never_share_a_row);
    return check_exit_code();
}
