// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * inprocess.bpf.h - the probe of the in-process sampler (sampler/): one
 * program on its two report functions, which only sampled allocations and
 * frees of sampled pointers call. The sampler has made the sampling
 * decision; here the stack is walked from the allocator's caller (the
 * return address and stack pointer at the allocator's entry are arguments,
 * %rbp is still the caller's) and counted as the uprobe sampler counts it,
 * with the same weights, through the same sample store. Included once, by
 * heapprof.bpf.c.
 */
#ifndef HEAPPROF_INPROCESS_BPF_H
#define HEAPPROF_INPROCESS_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "heapprof.h"
#include "hidden_returns.bpf.h"
#include "sample_store.bpf.h"
#include "stack_store.bpf.h"

/*
 * hp_report_alloc(ptr, size, kind, ret, sp, ring_pos) and
 * hp_report_alloc_opt (the same, cookie HP_REPORT_ALLOC) and
 * hp_report_free(ptr, reason) (cookie HP_REPORT_FREE; reason as
 * enum hp_free_reason of sampler/hp_sampler.h: 1 for a free no slot saw).
 */
SEC("uprobe")
int hp_report(struct pt_regs *ctx)
{
    __u32 tgid = bpf_get_current_pid_tgid() >> 32;
    __u64 ptr = PT_REGS_PARM1(ctx);
    if (!bpf_map_lookup_elem(&reporting, &tgid)) {
        count_stat(HP_STAT_REPORTS_DROPPED);
        return 0; /* not attached (yet, or any more): see the map */
    }
    if (bpf_get_attach_cookie(ctx) == HP_REPORT_FREE) {
        if (PT_REGS_PARM2(ctx) == 1 /* HP_FREED_UNSEEN */)
            count_stat(HP_STAT_FREES_UNSEEN);
        else if (PT_REGS_PARM2(ctx) == 2 /* HP_FREED_RING_FULL */)
            count_stat(HP_STAT_FREE_RING_FULL);
        untrack(tgid, ptr, ~0ULL);
        return 0;
    }
    if (!ptr)
        return 0; /* a failed allocation: nothing to record, no stack to store */
    __u64 size = PT_REGS_PARM2(ctx);
    __u64 sp = PT_REGS_PARM5(ctx);
    __u64 ring_pos = ctx->r9; /* the sixth argument */
    /* Another tool's return probe on a function that jumped to the
     * allocator may have hidden the caller's return address. */
    struct hidden_returns hidden;
    hidden_returns_init(&hidden);
    __u64 ret = unhide_return(&hidden, sp, PT_REGS_PARM4(ctx));
    __u64 stack_id = capture_stack(ctx, ret, sp, &hidden);
    if (stack_id)
        record(tgid, ptr, size, stack_id, ring_pos);
    return 0;
}

/* What one drain's loop reads (never writes: a callback that changed its
 * caller's stack would have the verifier walk every count it could reach). */
struct drain_loop {
    __u32 tgid;
    __u64 first_pos;
    __u64 ptrs;
};

/* One pointer of the ring, at position first_pos + i: looked up, never
 * followed; a free of an earlier life than the one recorded is skipped. */
static long drain_one(__u32 i, void *arg)
{
    const struct drain_loop *d = arg;
    __u64 ptr = 0;
    if (bpf_copy_from_user(&ptr, sizeof(ptr), (void *)(d->ptrs + (__u64)i * 8)) != 0)
        return 1;
    if (!ptr)
        return 0; /* a realloc that failed: nothing was freed */
    int r = untrack(d->tgid, ptr, d->first_pos + i);
    if (r > 0)
        count_stat_n(HP_STAT_FREES_RING, 1);
    else if (r < 0)
        count_stat_n(HP_STAT_FREES_RING_LATER, 1);
    return 0;
}

/*
 * The frees the daemon read from a process's ring (daemon/inject/free_ring.c),
 * applied with the same atomics as the report probe's, through the
 * same untrack(): run with BPF_PROG_TEST_RUN, never attached. Returns the
 * entries looked at.
 */
SEC("syscall")
int hp_drain_frees(struct hp_drain_args *a)
{
    struct drain_loop d = {.tgid = a->tgid, .first_pos = a->first_pos, .ptrs = a->ptrs};
    __u32 n = a->n;
    if (n > HP_DRAIN_BATCH)
        return -1;
    return bpf_loop(n, drain_one, &d, 0);
}

#endif
