// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * nested_calls.bpf.h - which allocator entries are part of a call already
 * counted at another entry, so that each call the program makes is counted
 * once, at its caller:
 *  - nested calls: the allocator calling itself (glibc's realloc calls
 *    malloc), told by a return address inside a probed function;
 *  - continuations: a probed function that jumps to another (glibc's
 *    reallocarray to realloc, realloc(NULL, n) to malloc) enters it with
 *    the same stack pointer and return address, or with the uretprobe
 *    trampoline there when the first function's return probe is pending.
 * Included once, by heapprof.bpf.c.
 */
#ifndef HEAPPROF_NESTED_CALLS_BPF_H
#define HEAPPROF_NESTED_CALLS_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "heapprof.h"
#include "heapprof_maps.bpf.h"
#include "hidden_returns.bpf.h"

/* Whether a function of this kind may call another probed one inside it
 * (glibc's realloc calls malloc and free, and jumps to malloc for
 * realloc(NULL, n); reallocarray jumps to realloc). malloc and free do not. */
static __always_inline bool may_call_allocator(__u32 kind)
{
    return kind != HP_MALLOC && kind != HP_FREE;
}

/* Whether `addr` is the uretprobe trampoline of this process. */
static __always_inline bool is_uretprobe_trampoline(__u64 addr)
{
    struct task_struct *task = (struct task_struct *)bpf_get_current_task();
    struct xol_area *area = BPF_CORE_READ(task, mm, uprobes_state.xol_area);
    return area && BPF_CORE_READ(area, vaddr) == addr;
}

/* Whether `addr` lies in one of the probed functions of the allocator
 * image this probe belongs to. */
static __always_inline bool in_probed_function(__u64 cookie, __u64 addr)
{
    __u32 slot = HP_COOKIE_IMAGE(cookie);
    struct hp_image *img = bpf_map_lookup_elem(&images, &slot);
    if (!img)
        return false;
    if (addr < img->lo || addr >= img->hi)
        return false; /* the usual case: called from the program, not the allocator */
    for (__u32 i = 0; i < HP_MAX_FUNCS; i++) {
        if (i >= img->nfuncs)
            break;
        if (addr >= img->start[i] && addr < img->end[i])
            return true;
    }
    return false;
}

/* Whether the return address `ret` lies in one of the probed functions:
 * then this call is the allocator calling itself. */
static __always_inline bool called_from_allocator(__u64 cookie, __u64 ret)
{
    return in_probed_function(cookie, ret - 1);
}

/* The slot of this thread's last call of a function that may jump. */
static __always_inline struct thread_call *thread_call_of(__u64 pid_tgid)
{
    __u32 slot = (__u32)pid_tgid & (HP_THREAD_SLOTS - 1);
    return bpf_map_lookup_elem(&thread_calls, &slot);
}

/*
 * Whether this entry (of `kind`, at `sp`, returning to `ret`) continues
 * the thread's last call: a forwarding pair of kinds, the same stack
 * pointer, and the same return address or the trampoline that the first
 * function's return probe put there (looked up last: three kernel reads).
 * The chain may go on (reallocarray -> realloc -> malloc): the record
 * takes the new kind.
 */
static __always_inline bool continues_call(struct thread_call *tc, __u64 pid_tgid, __u64 sp,
                                           __u64 ret, __u32 kind)
{
    if (!tc || tc->pid_tgid != pid_tgid || tc->sp != sp || !hp_forwards(tc->kind, kind))
        return false;
    if (tc->ret != ret && !is_uretprobe_trampoline(ret))
        return false;
    tc->kind = kind;
    return true;
}

/* Remembers this entry as the thread's last call. */
static __always_inline void note_call(struct thread_call *tc, __u64 pid_tgid, __u64 sp, __u64 ret,
                                      __u32 kind)
{
    if (!tc)
        return;
    tc->pid_tgid = pid_tgid;
    tc->sp = sp;
    tc->ret = ret;
    tc->kind = kind;
}

/*
 * The checks of a sampled call that its entry may have skipped (the
 * per-CPU hint in on_alloc_entry is lost when a thread is switched out
 * mid-call), and the one that needs the kernel's uretprobe state: a
 * return address that is the trampoline. If a probed allocator function
 * of this image took over the slot at `sp`, it jumped here and its entry
 * counted the call; else (another tool's return probe on a function that
 * jumped to the allocator) the real return address replaces *ret.
 * `checked`: the entry already ran the per-thread and nested checks.
 */
static __always_inline bool counted_elsewhere(__u64 cookie, __u32 kind, __u64 sp, __u64 pid_tgid,
                                              __u64 *ret, bool checked,
                                              struct hidden_returns *hidden)
{
    if (!checked && continues_call(thread_call_of(pid_tgid), pid_tgid, sp, *ret, kind))
        return true;
    if (hidden->trampoline && *ret == hidden->trampoline) {
        struct return_instance *ri = (struct return_instance *)hp_hidden_return_at(hidden, sp);
        if (ri && in_probed_function(cookie, BPF_CORE_READ(ri, func)))
            return true;
        *ret = unhide_return(hidden, sp, *ret);
        checked = false; /* the nested check saw the trampoline, not the caller */
    }
    return !checked && called_from_allocator(cookie, *ret);
}

#endif
