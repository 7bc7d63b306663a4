/*
 * search.h - the daemon's one binary search: the partition point of a
 * sorted array, for the lookups that find the last entry at or below a
 * value (mappings by address, symbols by address or name, unwind rows by
 * pc, CIEs by offset). Inline, so that each caller's predicate is inlined
 * into its loop: the unwind table build runs it once per FDE.
 */
#ifndef HEAPPROF_SEARCH_H
#define HEAPPROF_SEARCH_H

#include <stdbool.h>
#include <stddef.h>

/* Whether entry `i` of the caller's array lies before what is sought. */
typedef bool (*search_before_fn)(const void *ctx, size_t i);

/*
 * The first index in [first, n) for which before(ctx, i) is false, where
 * it is true for a prefix of those indices and false for the rest (n if it
 * is true for all): the number of entries before what is sought.
 */
static inline size_t search_partition(size_t first, size_t n, search_before_fn before,
                                      const void *ctx)
{
    size_t lo = first, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (before(ctx, mid))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

#endif
