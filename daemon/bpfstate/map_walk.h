/*
 * map_walk.h - the one walk over the keys of a BPF hash map, shared by the
 * files of bpfstate/ that read the maps (bpf_maps.c, process_shares.c).
 * Not for other folders: they reach the maps through bpf_state.h.
 */
#ifndef HEAPPROF_MAP_WALK_H
#define HEAPPROF_MAP_WALK_H

#include <stddef.h>

/* The longest key of a map we walk (struct hp_live_key and friends are 16). */
#define WALK_MAX_KEY 64

/* Called with each key of a walk; nonzero stops the walk and is returned. */
typedef int (*walk_fn)(int fd, const void *key, void *ctx);

/*
 * Calls fn(fd, key, ctx) for every key of hash map `fd`: 0, fn's nonzero
 * result, or -errno if the map could not be walked. When the key a walk
 * stands on is deleted meanwhile, the kernel goes on from the next bucket
 * or restarts, so a key may be seen twice, or missed if it moved: callers
 * take a walk as a snapshot, not a transaction.
 */
int map_walk_keys(int fd, size_t key_size, walk_fn fn, void *ctx);

#endif
