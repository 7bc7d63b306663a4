/*
 * map_walk.c - walks a BPF hash map's entries in batches, and deletes keys
 * in batches (see map_walk.h).
 *
 * Why batches: the walk it replaces asked for each key with
 * BPF_MAP_GET_NEXT_KEY and then for its value with a lookup, two system
 * calls per entry. A daemon profiling a fleet holds 100,000 count rows,
 * and every profile, total and prune read them all: 264 ms per scrape of
 * one process beside 100 others (issue 36). BPF_MAP_LOOKUP_BATCH (Linux
 * 5.6, so every kernel we load on) copies whole buckets per call.
 */
#include "map_walk.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>

/* The buffer of one batch: entries times key and value, at most this many
 * bytes (stacks are 1 KiB each), and at least WALK_MIN_BATCH entries. */
#define WALK_BATCH_BYTES (1u << 20)
#define WALK_MAX_BATCH 8192u
#define WALK_MIN_BATCH 64u

/* Deletions per BPF_MAP_DELETE_BATCH call. */
#define DELETE_BATCH 4096u

/* The entries per batch for this entry size. */
static uint32_t batch_for(size_t entry_size)
{
    size_t n = WALK_BATCH_BYTES / (entry_size ? entry_size : 1);
    if (n > WALK_MAX_BATCH)
        n = WALK_MAX_BATCH;
    return (uint32_t)(n < WALK_MIN_BATCH ? WALK_MIN_BATCH : n);
}

int map_walk(int fd, size_t key_size, size_t value_size, walk_fn fn, void *ctx)
{
    if (key_size > WALK_MAX_KEY)
        return -EINVAL;
    uint32_t cap = batch_for(key_size + value_size);
    uint8_t *keys = malloc((size_t)cap * key_size);
    uint8_t *values = malloc((size_t)cap * (value_size ? value_size : 1));
    /* The kernel's place in the map between calls: opaque, a bucket. */
    uint8_t token[2][WALK_MAX_KEY];
    int e = keys && values ? 0 : -ENOMEM, which = 0;
    bool first = true, last = false;
    while (e == 0 && !last) {
        uint32_t count = cap;
        LIBBPF_OPTS(bpf_map_batch_opts, opts);
        int r = bpf_map_lookup_batch(fd, first ? NULL : token[which], token[!which], keys, values,
                                     &count, &opts);
        if (r != 0 && errno == ENOSPC && cap < (1u << 24) && count == 0) {
            /* One bucket holds more than a batch: read it with a larger one. */
            uint32_t more = cap * 2;
            uint8_t *nk = realloc(keys, (size_t)more * key_size);
            if (nk)
                keys = nk;
            uint8_t *nv = nk ? realloc(values, (size_t)more * (value_size ? value_size : 1)) : NULL;
            if (nv)
                values = nv;
            e = nk && nv ? 0 : -ENOMEM;
            cap = more;
            continue;
        }
        if (r != 0 && errno != ENOENT) {
            e = -errno;
            break;
        }
        last = r != 0; /* ENOENT: these are the last */
        first = false;
        which = !which;
        for (uint32_t i = 0; i < count && e == 0; i++)
            e = fn(keys + (size_t)i * key_size, values + (size_t)i * value_size, ctx);
    }
    free(keys);
    free(values);
    return e;
}

size_t map_delete_keys(int fd, const void *keys, size_t n, size_t key_size)
{
    const uint8_t *k = keys;
    size_t deleted = 0;
    while (n > 0) {
        uint32_t count = (uint32_t)(n < DELETE_BATCH ? n : DELETE_BATCH);
        LIBBPF_OPTS(bpf_map_batch_opts, opts);
        int r = bpf_map_delete_batch(fd, k, &count, &opts);
        deleted += count;
        size_t step = count;
        if (r != 0 && count < n) {
            /* The kernel stops at a key it could not delete, having
             * deleted the `count` before it: most likely that one went
             * meanwhile; it is tried alone and passed over. */
            deleted += bpf_map_delete_elem(fd, k + (size_t)count * key_size) == 0;
            step++;
        }
        count = (uint32_t)step;
        k += (size_t)count * key_size;
        n -= count;
    }
    return deleted;
}
