// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * stack_store.bpf.h - stacks by identity: a sampled call's stack is walked
 * into a per-CPU scratch buffer, hashed, and stored once in the stacks map
 * under its hash, with collisions probed past and counted, never merged.
 * Included by heapprof.bpf.c and inprocess.bpf.h.
 */
#ifndef HEAPPROF_STACK_STORE_BPF_H
#define HEAPPROF_STACK_STORE_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "heapprof.h"
#include "heapprof_maps.bpf.h"
#include "hidden_returns.bpf.h"
#include "hp_errno.bpf.h"
#include "process_share.bpf.h"
#include "unwind.bpf.h"

/* A 64-bit hash of the stack's frames; never 0, which means "no stack". */
static __always_inline __u64 hash_stack(const struct hp_stack *st)
{
    __u64 h = 0xcbf29ce484222325ULL ^ st->len;
    for (__u32 i = 0; i < HP_MAX_FRAMES; i++) {
        if (i >= st->len)
            break;
        h = (h ^ st->frames[i]) * 0x100000001b3ULL;
        h ^= h >> 29;
    }
    return h ? h : 1;
}

static __always_inline bool same_stack(const struct hp_stack *a, const struct hp_stack *b)
{
    if (a->len != b->len)
        return false;
    for (__u32 i = 0; i < HP_MAX_FRAMES; i++) {
        if (i >= a->len)
            break;
        if (a->frames[i] != b->frames[i])
            return false;
    }
    return true;
}

/* Stores the stack in `st` under its hash, probing on to the next ids when
 * another stack holds one; returns its id, or 0 (counted) when there is no
 * place for it. A stack not stored yet is added only within the share of
 * the process `share` belongs to (NULL: none could be made). */
static __always_inline __u64 store_stack(const struct hp_stack *st, struct hp_share *share)
{
    __u64 id = hash_stack(st);
    for (__u32 probe = 0; probe < HP_STACK_PROBES; probe++, id++) {
        if (id == 0)
            id = 1;
        struct hp_stack *old = bpf_map_lookup_elem(&stacks, &id);
        if (!old) {
            if (!share || share_refuses(share->stacks, stack_share, HP_STAT_SHARE_STACKS)) {
                if (!share)
                    count_stat(HP_STAT_SHARE_STACKS);
                return 0;
            }
            struct hp_share *owner = owner_of(share);
            if (owner && share_refuses(owner->stacks, stack_owner_share, HP_STAT_OWNER_STACKS))
                return 0;
            long err = bpf_map_update_elem(&stacks, &id, st, BPF_NOEXIST);
            if (err == 0) {
                share_add(&share->stacks, 1);
                if (owner)
                    share_add(&owner->stacks, 1);
                return id;
            }
            if (err != -EEXIST)
                break; /* full */
            old = bpf_map_lookup_elem(&stacks, &id); /* another CPU won the race */
            if (!old)
                continue;
        }
        if (same_stack(old, st))
            return id;
        count_stat(HP_STAT_STACK_COLLISION);
    }
    count_stat(HP_STAT_STACK_DROPPED);
    return 0;
}

/* Walks and stores the stack of a call whose caller returns to `ret` (its
 * real address: see hidden_returns.bpf.h) from the slot at `sp`; returns
 * its id, or 0. */
static __always_inline __u64 capture_stack(struct pt_regs *ctx, __u64 ret, __u64 sp,
                                           struct hidden_returns *hidden)
{
    __u32 zero = 0;
    struct hp_stack *st = bpf_map_lookup_elem(&stack_scratch, &zero);
    if (!st)
        return 0;
    __u32 tgid = bpf_get_current_pid_tgid() >> 32;
    struct hp_unwind_proc *proc = bpf_map_lookup_elem(&unwind_procs, &tgid);
    if (proc)
        walk_with_tables(st, proc, ret, sp, PT_REGS_FP(ctx), hidden);
    else
        walk_frame_pointers(st, ret, sp, PT_REGS_FP(ctx), hidden);
    return store_stack(st, share_of(tgid));
}

#endif
