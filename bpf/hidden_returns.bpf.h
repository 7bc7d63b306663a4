// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * hidden_returns.bpf.h - return addresses that a pending return probe has
 * hidden. A uretprobe takes over its function's return slot: at the entry
 * the kernel saves the return address and writes there the address of its
 * uretprobe trampoline (the start of the [uprobes] mapping, 0x7fffffffe000
 * on x86-64). Until that function returns, whatever reads the slot sees
 * the trampoline: the entry of an allocator function that another probed
 * one jumped to (glibc's reallocarray to realloc, realloc(NULL, n) to
 * malloc), and any stack walk past a function with a uretprobe (ours, or
 * another tool's further up the stack).
 *
 * The kernel keeps the saved addresses per thread, in
 * task->utask->return_instances: innermost first, each with the slot it
 * took over (`stack`), the probed function (`func`) and the saved address
 * (`orig_ret_vaddr`; a chained instance, whose function was jumped to from
 * another probed one, shares the slot and copies the address). Read with
 * CO-RE, on the sampled path only. The kernel's own user stack traces
 * (perf, bpf_get_stack) do the same on recent kernels; a read of the slot
 * with bpf_probe_read_user cannot.
 *
 * These are kernel internals, not ABI (the list changed in 6.12-6.14): a
 * kernel without one of the fields loses only this, never the load. The
 * checks below are constants once libbpf has relocated them, so the
 * verifier drops the reads that could not be relocated; each sampled call
 * that could not look is counted (HP_STAT_RETURNS_UNCHECKED).
 */
#ifndef HEAPPROF_HIDDEN_RETURNS_BPF_H
#define HEAPPROF_HIDDEN_RETURNS_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "heapprof.h"
#include "heapprof_maps.bpf.h"

/* The current thread's pending return probes, as a walk up its stack
 * meets their slots. Plain numbers, so that a global function may take it. */
struct hidden_returns {
    __u64 trampoline; /* the trampoline's address; 0: nothing is hidden */
    __u64 ri;         /* the innermost struct return_instance not yet below the walk */
};

/* Whether this kernel has every field read here (a constant after load). */
#define HIDDEN_RETURNS_READABLE()                                                \
    (bpf_core_field_exists(struct uprobe_task, return_instances) &&              \
     bpf_core_field_exists(struct return_instance, stack) &&                     \
     bpf_core_field_exists(struct return_instance, next) &&                      \
     bpf_core_field_exists(struct return_instance, orig_ret_vaddr) &&            \
     bpf_core_field_exists(struct xol_area, vaddr))

/* Reads the current thread's pending return probes: two kernel reads when
 * there are none, the usual case. */
static __always_inline void hidden_returns_init(struct hidden_returns *h)
{
    if (!HIDDEN_RETURNS_READABLE()) {
        h->ri = 0;
        h->trampoline = 0; /* nothing is unhidden */
        count_stat(HP_STAT_RETURNS_UNCHECKED);
        return;
    }
    struct task_struct *task = (struct task_struct *)bpf_get_current_task();
    h->ri = (__u64)BPF_CORE_READ(task, utask, return_instances);
    h->trampoline = h->ri ? BPF_CORE_READ(task, mm, uprobes_state.xol_area, vaddr) : 0;
}

/*
 * The address of the pending return probe (struct return_instance) that
 * took over the return slot at address `slot`, or 0. Instances below
 * `slot` are passed for good (a walk's slots only go up, and instances
 * left by a longjmp lie below the stack pointer), so a whole walk reads
 * each instance once. A global function: the verifier checks its loop
 * once, not once per frame of the walks that call it.
 */
__noinline __u64 hp_hidden_return_at(struct hidden_returns *h, __u64 slot)
{
    /* A global function is verified even where no call reaches it (6.1). */
    if (!h || !HIDDEN_RETURNS_READABLE())
        return 0;
    for (__u32 i = 0; i < HP_MAX_HIDDEN_RETURNS; i++) {
        struct return_instance *ri = (struct return_instance *)h->ri;
        if (!ri)
            return 0;
        __u64 stack = BPF_CORE_READ(ri, stack);
        if (stack == slot)
            return (__u64)ri;
        if (stack > slot)
            return 0;
        h->ri = (__u64)BPF_CORE_READ(ri, next);
    }
    return 0;
}

/* The return address `value` read from the slot at `slot`, or, when it is
 * the trampoline, the one a return probe saved from there. */
static __always_inline __u64 unhide_return(struct hidden_returns *h, __u64 slot, __u64 value)
{
    if (!HIDDEN_RETURNS_READABLE() || !h->trampoline || value != h->trampoline)
        return value;
    struct return_instance *ri = (struct return_instance *)hp_hidden_return_at(h, slot);
    if (!ri) {
        count_stat(HP_STAT_STACK_READ_ERROR); /* the kernel would not find it either */
        return value;
    }
    count_stat(HP_STAT_RETURNS_UNHIDDEN);
    return BPF_CORE_READ(ri, orig_ret_vaddr);
}

#endif
