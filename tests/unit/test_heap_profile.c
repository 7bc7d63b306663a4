/*
 * test_heap_profile.c - heap_profile_delta(), the arithmetic of a delta
 * profile (seconds=N): allocations made between two readings of the counts,
 * in-use values as at the second. The rest of heap_profile.c reads the BPF
 * maps and is covered by the integration tests.
 */
#include "check.h"
#include "heap_profile.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* One stack's counts (plain numbers: the delta does not care about the fixed point). */
static struct stack_counts counts(uint64_t id, uint64_t ao, uint64_t ab, int64_t io, int64_t ib)
{
    return (struct stack_counts){
        .stack_id = id,
        .counts = {.alloc_objects = ao, .alloc_bytes = ab, .inuse_objects = io, .inuse_bytes = ib}};
}

/* The entry of `id` in v[0..n), or NULL. */
static const struct stack_counts *find(const struct stack_counts *v, size_t n, uint64_t id)
{
    for (size_t i = 0; i < n; i++)
        if (v[i].stack_id == id)
            return &v[i];
    return NULL;
}

/* Fails unless `got` holds exactly these four values, printing both. */
static void check_counts(const struct stack_counts *got, uint64_t id, uint64_t ao, uint64_t ab,
                         int64_t io, int64_t ib)
{
    if (!got) {
        fprintf(stderr, "%s:%d: stack %llu is missing from the delta\n", __FILE__, __LINE__,
                (unsigned long long)id);
        check_failures++;
        return;
    }
    const struct hp_counts *c = &got->counts;
    if (c->alloc_objects != ao || c->alloc_bytes != ab || c->inuse_objects != io ||
        c->inuse_bytes != ib) {
        fprintf(stderr,
                "%s:%d: stack %llu: expected alloc %llu/%llu inuse %lld/%lld, got alloc "
                "%llu/%llu inuse %lld/%lld\n",
                __FILE__, __LINE__, (unsigned long long)id, (unsigned long long)ao,
                (unsigned long long)ab, (long long)io, (long long)ib,
                (unsigned long long)c->alloc_objects, (unsigned long long)c->alloc_bytes,
                (long long)c->inuse_objects, (long long)c->inuse_bytes);
        check_failures++;
    }
}

/* heap_profile_delta() from `before` to `after`; its count in *n (a failure
 * unless it returns 0). Free the result. */
static struct stack_counts *delta(const struct stack_counts *before, size_t nbefore,
                                  const struct stack_counts *after, size_t nafter, size_t *n)
{
    struct stack_counts *out = NULL;
    *n = 99;
    CHECK_INT_EQ(heap_profile_delta(before, nbefore, after, nafter, &out, n), 0);
    return out;
}

static void allocations_count_from_the_start_and_in_use_is_as_at_the_end(void)
{
    struct stack_counts before[] = {counts(7, 10, 1000, 10, 1000)};
    /* 5 more allocations of 100 bytes; 8 of all 15 freed since. */
    struct stack_counts after[] = {counts(7, 15, 1500, 7, 700)};
    size_t n;
    struct stack_counts *out = delta(before, 1, after, 1, &n);
    CHECK_INT_EQ(n, 1);
    check_counts(find(out, n, 7), 7, 5, 500, 7, 700);
    free(out);
}

static void a_stack_first_seen_in_the_window_counts_whole(void)
{
    struct stack_counts before[] = {counts(1, 3, 30, 3, 30)};
    struct stack_counts after[] = {counts(1, 3, 30, 3, 30), counts(2, 4, 4096, 4, 4096)};
    size_t n;
    struct stack_counts *out = delta(before, 1, after, 2, &n);
    check_counts(find(out, n, 2), 2, 4, 4096, 4, 4096);
    free(out);
}

static void a_stack_idle_in_the_window_shows_only_what_it_still_holds(void)
{
    struct stack_counts before[] = {counts(1, 3, 30, 3, 30), counts(2, 5, 50, 5, 50),
                                    counts(3, 6, 60, 6, 60)};
    struct stack_counts after[] = {
        counts(1, 3, 30, 3, 30),  /* idle, still holding: alloc 0, in-use as is */
        counts(2, 5, 50, 0, 0),   /* idle, all freed in the window: nothing to show */
        counts(3, 6, 60, -1, -10) /* idle, a free seen before its counts: nothing either */
    };
    size_t n;
    struct stack_counts *out = delta(before, 3, after, 3, &n);
    CHECK_INT_EQ(n, 1);
    check_counts(find(out, n, 1), 1, 0, 0, 3, 30);
    CHECK(find(out, n, 2) == NULL);
    CHECK(find(out, n, 3) == NULL);
    free(out);
}

static void a_stack_that_allocated_and_freed_it_all_in_the_window_still_shows(void)
{
    struct stack_counts after[] = {counts(9, 2, 64, 0, 0)};
    size_t n;
    struct stack_counts *out = delta(NULL, 0, after, 1, &n);
    CHECK_INT_EQ(n, 1);
    check_counts(find(out, n, 9), 9, 2, 64, 0, 0);
    free(out);
}

static void stacks_gone_by_the_end_are_left_out(void)
{
    struct stack_counts before[] = {counts(4, 1, 8, 1, 8)};
    size_t n;
    struct stack_counts *out = delta(before, 1, NULL, 0, &n);
    CHECK_INT_EQ(n, 0);
    CHECK(out != NULL); /* an empty array the caller frees like any other */
    free(out);
}

/* A xorshift generator: the same shuffled input on every run. */
static uint64_t next_random(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

static void many_stacks_in_any_order_pair_up_by_stack_id(void)
{
    /* The maps are read in hash order: `before` comes shuffled, with ids
     * spread over 64 bits; every third stack of `after` is new. */
    enum { N = 3000 };
    struct stack_counts *before = calloc(N, sizeof(*before));
    struct stack_counts *after = calloc(N, sizeof(*after));
    struct stack_counts *copy = calloc(N, sizeof(*copy));
    uint64_t seed = 0x9e3779b97f4a7c15ULL;
    size_t nbefore = 0;
    CHECK(before && after && copy);
    if (!before || !after || !copy)
        goto out;
    for (size_t i = 0; i < N; i++) {
        uint64_t id = next_random(&seed) | 1;
        after[i] = counts(id, 100 + i, 1000 * (100 + i), (int64_t)i, 10 * (int64_t)i);
        if (i % 3 != 0)
            before[nbefore++] = counts(id, i, 1000 * i, 0, 0);
    }
    for (size_t i = nbefore; i > 1; i--) { /* Fisher-Yates */
        size_t j = next_random(&seed) % i;
        struct stack_counts t = before[i - 1];
        before[i - 1] = before[j];
        before[j] = t;
    }
    memcpy(copy, before, nbefore * sizeof(*copy));
    size_t n;
    struct stack_counts *out = delta(before, nbefore, after, N, &n);
    CHECK_INT_EQ(n, N);
    CHECK(memcmp(copy, before, nbefore * sizeof(*copy)) == 0); /* `before` is left as it was */
    for (size_t i = 0; i < n && i < N; i++) {
        /* The delta keeps `after`'s order. */
        CHECK_U64_EQ(out[i].stack_id, after[i].stack_id);
        uint64_t ao = i % 3 == 0 ? 100 + i : 100;
        check_counts(&out[i], after[i].stack_id, ao, 1000 * ao, (int64_t)i, 10 * (int64_t)i);
    }
    free(out);
out:
    free(before);
    free(after);
    free(copy);
}

int main(void)
{
    RUN_TEST(allocations_count_from_the_start_and_in_use_is_as_at_the_end);
    RUN_TEST(a_stack_first_seen_in_the_window_counts_whole);
    RUN_TEST(a_stack_idle_in_the_window_shows_only_what_it_still_holds);
    RUN_TEST(a_stack_that_allocated_and_freed_it_all_in_the_window_still_shows);
    RUN_TEST(stacks_gone_by_the_end_are_left_out);
    RUN_TEST(many_stacks_in_any_order_pair_up_by_stack_id);
    return check_exit_code();
}
