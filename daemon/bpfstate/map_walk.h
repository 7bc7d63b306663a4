/*
 * map_walk.h - the one walk over the entries of a BPF hash map, shared by
 * the files of bpfstate/ that read the maps (bpf_maps.c, process_shares.c),
 * and the one batched deletion of keys. Not for other folders: they reach
 * the maps through bpf_state.h.
 */
#ifndef HEAPPROF_MAP_WALK_H
#define HEAPPROF_MAP_WALK_H

#include <stddef.h>

/* The longest key of a map we walk (struct hp_live_key and friends are 16). */
#define WALK_MAX_KEY 64

/* Called with each entry of a walk; nonzero stops the walk and is returned. */
typedef int (*walk_fn)(const void *key, const void *value, void *ctx);

/*
 * Calls fn(key, value, ctx) for every entry of hash map `fd`, whose keys
 * and values are `key_size` and `value_size` bytes: 0, fn's nonzero
 * result, or -errno if the map could not be read. The entries come a few
 * thousand per system call (BPF_MAP_LOOKUP_BATCH, a bucket at a time), so
 * a walk costs about one copy per entry rather than two system calls.
 * Entries changed meanwhile may be seen as they were or as they are, and
 * one added meanwhile may be missed: callers take a walk as a snapshot,
 * not a transaction.
 */
int map_walk(int fd, size_t key_size, size_t value_size, walk_fn fn, void *ctx);

/* Deletes the `n` keys of `key_size` bytes at `keys` from map `fd`, many
 * per system call; keys gone meanwhile are skipped. Returns how many were
 * deleted. */
size_t map_delete_keys(int fd, const void *keys, size_t n, size_t key_size);

#endif
