// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * process_share.bpf.h - what each process holds of the maps that all
 * profiled processes share, and the bound on it (hp_process_share in
 * hp_limits.h): a process that adds stacks, (process, stack) rows or live
 * entries beyond its share is refused, counted per CPU. A process decides
 * what the unwinder reads (its stack memory) and, on the in-process
 * sampler, what the report functions are told, so the bound is per
 * process, whatever it does. The counts are kept with atomic adds and
 * tested before them, so concurrent calls of one process may pass the
 * bound by at most one entry per CPU.
 *
 * What a process holds is also counted in its owner's record (its real
 * uid at its first sample, bpf_get_current_uid_gid: the probes run in the
 * process), bounded by hp_owner_share, so that many processes of one user
 * cannot fill the maps either. Root's processes have no owner record.
 *
 * The daemon deletes a process's entry, and takes its counts out of its
 * owner's, when it forgets the process's counts, and counts the entries
 * again from the pinned maps at load.
 * Included by stack_store.bpf.h and sample_store.bpf.h.
 */
#ifndef HEAPPROF_PROCESS_SHARE_BPF_H
#define HEAPPROF_PROCESS_SHARE_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>

#include "heapprof.h"
#include "heapprof_maps.bpf.h"
#include "hp_limits.h"

/* Set by the daemon before load, from the sizes the maps got
 * (hp_process_share; 0: no bound). */
const volatile __u32 stack_share = HP_MAX_STACKS / HP_SHARE_DIVISOR;
const volatile __u32 row_share = HP_MAX_COUNTS / HP_SHARE_DIVISOR;
const volatile __u32 live_share = HP_MAX_LIVE / HP_SHARE_DIVISOR;
/* The same for an owner's processes together (hp_owner_share). */
const volatile __u32 stack_owner_share = HP_MAX_STACKS / HP_OWNER_SHARE_DIVISOR;
const volatile __u32 row_owner_share = HP_MAX_COUNTS / HP_OWNER_SHARE_DIVISOR;
const volatile __u32 live_owner_share = HP_MAX_LIVE / HP_OWNER_SHARE_DIVISOR;

/* The share record of process `tgid`, made on its first use; NULL when
 * the shares map is full (the caller refuses what it would add). */
static __always_inline struct hp_share *share_of(__u32 tgid)
{
    struct hp_share *s = bpf_map_lookup_elem(&shares, &tgid);
    if (s)
        return s;
    struct hp_share zero = {.uid = (__u32)bpf_get_current_uid_gid()};
    bpf_map_update_elem(&shares, &tgid, &zero, BPF_NOEXIST);
    return bpf_map_lookup_elem(&shares, &tgid);
}

/* The record of the owner of the process whose share record is `s`, made
 * on its first use; NULL for root, whose processes have only their own
 * bound: root's processes are the operator's, and a bound on them all
 * would let one root service starve the others. NULL also if the owners
 * map were full, which it cannot be while it has an entry per share. */
static __always_inline struct hp_share *owner_of(const struct hp_share *s)
{
    __u32 uid = s->uid;
    if (uid == 0)
        return NULL;
    struct hp_share *o = bpf_map_lookup_elem(&owner_shares, &uid);
    if (o)
        return o;
    struct hp_share zero = {.uid = uid};
    bpf_map_update_elem(&owner_shares, &uid, &zero, BPF_NOEXIST);
    return bpf_map_lookup_elem(&owner_shares, &uid);
}

/* Whether a process that holds `held` entries of a map whose share is
 * `share` (0: no bound) is refused one more; counts the refusal as `stat`. */
static __always_inline bool share_refuses(__s32 held, __u32 share, __u32 stat)
{
    if (share == 0 || held < (__s32)share)
        return false;
    count_stat(stat);
    return true;
}

/* Adds `n` (1 or -1) to one count of a share record. */
static __always_inline void share_add(__s32 *count, __s32 n)
{
    __sync_fetch_and_add(count, n);
}

#endif
