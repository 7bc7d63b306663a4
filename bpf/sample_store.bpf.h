// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * sample_store.bpf.h - the sampled allocations, as both samplers store
 * them: the Poisson countdown that decides which calls are sampled
 * (take_sample, the uprobe sampler's; the in-process sampler decides in
 * the process), the weighted counts of each (process, stack) and the set
 * of sampled pointers still alive (record), and a free taken out of both
 * (untrack), each process within its share of the maps
 * (process_share.bpf.h). Included by heapprof.bpf.c and inprocess.bpf.h.
 */
#ifndef HEAPPROF_SAMPLE_STORE_BPF_H
#define HEAPPROF_SAMPLE_STORE_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "heapprof.h"
#include "heapprof_maps.bpf.h"
#include "process_share.bpf.h"
#include "sampling_math.h"

/* Set by the daemon before load: the mean bytes between samples, and the
 * tables of sampling_math.h (filled by daemon/bpfstate/sampling_tables.c). */
const volatile __u64 sample_interval = 524288;
const volatile __u32 log2_table[HP_LOG2_TABLE_LEN];
const volatile __u64 weight_table[HP_WEIGHT_TABLE_LEN];

/* Runs the Poisson countdown over `size` bytes; true if this call is sampled. */
static __always_inline bool take_sample(struct cpu_state *cs, __u64 size)
{
    __u64 interval = sample_interval;
    if (interval <= 1)
        return true;
    if (!cs->initialized) {
        cs->countdown = hp_exp_wait(bpf_get_prandom_u32(), interval, log2_table);
        cs->initialized = 1;
    }
    if (cs->countdown > size) {
        cs->countdown -= size;
        return false;
    }
    /* Waits are memoryless, so the next one may start at this allocation's end. */
    cs->countdown = hp_exp_wait(bpf_get_prandom_u32(), interval, log2_table);
    return true;
}

/*
 * Takes a sampled pointer out of the live set and its weight out of in-use,
 * if it was recorded at a ring position <= `max_pos` (~0: whatever its
 * position; a ring free at position p passes p). Exactly once, whoever
 * removes it: a remover first claims the entry (its time_ns, unique per
 * life, swapped for 0), and only the one that claimed it deletes it.
 * Since record() inserts with BPF_NOEXIST, the key deleted is still that
 * entry: nothing can have replaced it meanwhile. Returns 1 if this call
 * took it out, -1 if a later life holds the address, 0 otherwise.
 */
static __always_inline int untrack(__u32 tgid, __u64 ptr, __u64 max_pos)
{
    struct hp_live_key key = {.tgid = tgid, .ptr = ptr};
    struct hp_live *l = bpf_map_lookup_elem(&live, &key);
    if (!l)
        return 0;
    struct hp_live gone = *l;
    if (gone.time_ns == 0)
        return 0; /* another remover has it */
    if (gone.ring_pos > max_pos)
        return -1;
    if (__sync_val_compare_and_swap(&l->time_ns, gone.time_ns, 0) != gone.time_ns)
        return 0;
    bpf_map_delete_elem(&live, &key);
    struct hp_share *s = bpf_map_lookup_elem(&shares, &tgid);
    if (s) {
        share_add(&s->live, -1);
        __u32 uid = s->uid; /* looked up only: the drain runs as the daemon */
        struct hp_share *o = uid ? bpf_map_lookup_elem(&owner_shares, &uid) : NULL;
        if (o)
            share_add(&o->live, -1);
    }
    struct hp_count_key ck = {.tgid = tgid, .stack_id = gone.stack_id};
    struct hp_counts *c = bpf_map_lookup_elem(&counts, &ck);
    if (c) {
        __sync_fetch_and_sub(&c->inuse_objects, gone.w_objects);
        __sync_fetch_and_sub(&c->inuse_bytes, gone.w_bytes);
    }
    count_stat(HP_STAT_FREES_MATCHED);
    return 1;
}

/* How often record() tries to insert a live entry while another remover
 * is deleting the earlier one at that address (between its claim and its
 * delete: a few instructions). */
#define HP_INSERT_TRIES 4

/* Adds a sampled allocation of `size` bytes at `ptr` to its stack's counts
 * and to the live set; `ring_pos` as hp_live's (0: the uprobe sampler). */
static __always_inline void record(__u32 tgid, __u64 ptr, __u64 size, __u64 stack_id,
                                   __u64 ring_pos)
{
    __u64 w_objects = hp_weight_objects(size, sample_interval, weight_table);
    __u64 w_bytes = hp_weight_bytes(size, w_objects);

    struct hp_share *s = share_of(tgid);
    if (!s) {
        count_stat(HP_STAT_SHARE_STACKS);
        return;
    }
    struct hp_share *o = owner_of(s);
    struct hp_count_key ck = {.tgid = tgid, .stack_id = stack_id};
    struct hp_counts *c = bpf_map_lookup_elem(&counts, &ck);
    if (!c) {
        if (share_refuses(s->rows, row_share, HP_STAT_SHARE_STACKS) ||
            (o && share_refuses(o->rows, row_owner_share, HP_STAT_OWNER_STACKS)))
            return;
        struct hp_counts zero = {};
        if (bpf_map_update_elem(&counts, &ck, &zero, BPF_NOEXIST) == 0) {
            share_add(&s->rows, 1);
            if (o)
                share_add(&o->rows, 1);
        }
        c = bpf_map_lookup_elem(&counts, &ck);
        if (!c) {
            count_stat(HP_STAT_COUNTS_FULL);
            return;
        }
    }
    __sync_fetch_and_add(&c->alloc_objects, w_objects);
    __sync_fetch_and_add(&c->alloc_bytes, w_bytes);

    /* A pointer still in the live set was freed without our seeing it
     * (before we attached, or by a path we do not probe). */
    untrack(tgid, ptr, ~0ULL);
    if (share_refuses(s->live, live_share, HP_STAT_SHARE_LIVE) ||
        (o && share_refuses(o->live, live_owner_share, HP_STAT_OWNER_LIVE))) {
        count_stat(HP_STAT_SAMPLES); /* counted, as with a full live map, but not in use */
        return;
    }
    struct hp_live_key lk = {.tgid = tgid, .ptr = ptr};
    struct hp_live l = {
        .stack_id = stack_id,
        .size = size,
        .w_objects = w_objects,
        .w_bytes = w_bytes,
        .time_ns = bpf_ktime_get_ns() | 1,
        .ring_pos = ring_pos,
    };
    __sync_fetch_and_add(&c->inuse_objects, w_objects);
    __sync_fetch_and_add(&c->inuse_bytes, w_bytes);
    int e = -1;
    for (int i = 0; i < HP_INSERT_TRIES && e != 0; i++) {
        e = bpf_map_update_elem(&live, &lk, &l, BPF_NOEXIST);
        if (e != 0)
            untrack(tgid, ptr, ~0ULL); /* a life that was recorded meanwhile */
    }
    if (e != 0) {
        __sync_fetch_and_sub(&c->inuse_objects, w_objects);
        __sync_fetch_and_sub(&c->inuse_bytes, w_bytes);
        count_stat(HP_STAT_LIVE_FULL);
    } else {
        share_add(&s->live, 1);
        if (o)
            share_add(&o->live, 1);
    }
    count_stat(HP_STAT_SAMPLES);
}

#endif
