// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * unwind.bpf.h - the user-stack walk of a sampled call: with the process's
 * unwind tables (rows built in userspace from .eh_frame/.debug_frame, see
 * daemon/unwind/) in a bpf_loop, or by frame pointers where a process has
 * no tables. Runs for sampled calls only. Included once, by heapprof.bpf.c.
 */
#ifndef HEAPPROF_UNWIND_BPF_H
#define HEAPPROF_UNWIND_BPF_H

#include "heapprof_maps.bpf.h"

/*
 * Walks the user stack by frame pointers into `st`. At an allocator's entry
 * the return address to its caller is at [sp] and %rbp is still the
 * caller's frame, so the caller is the leaf and the frame chain gives its
 * callers. A caller without a frame pointer costs us its own caller.
 */
static __always_inline void walk_frame_pointers(struct hp_stack *st, __u64 ret, __u64 sp, __u64 fp)
{
    st->frames[0] = ret;
    __u32 n = 1;
    __u64 prev = sp;
    for (__u32 i = 1; i < HP_MAX_FRAMES; i++) {
        if (fp == 0 || (fp & 7) || fp < prev)
            break;
        __u64 frame[2]; /* saved %rbp, return address */
        if (bpf_probe_read_user(frame, sizeof(frame), (void *)fp)) {
            count_stat(HP_STAT_STACK_READ_ERROR);
            break;
        }
        if (frame[1] == 0)
            break;
        st->frames[i] = frame[1];
        n = i + 1;
        prev = fp + 16;
        fp = frame[0];
        if (i == HP_MAX_FRAMES - 1 && fp > prev)
            count_stat(HP_STAT_STACK_TRUNCATED);
    }
    st->len = n;
}

/* Where the walk is: one frame's registers. */
struct walk_state {
    __u64 pc;   /* a return address, or an interrupted pc after a signal frame */
    __u64 sp;
    __u64 fp;
    __u32 exact_pc; /* pc is not a return address (after a signal frame) */
    __u32 n;        /* frames stored so far */
    struct hp_stack *st;
    struct hp_unwind_proc *proc;
};

/* The table mapping of `pc` in the process, or NULL (binary search). */
static __always_inline struct hp_unwind_mapping *find_mapping(struct hp_unwind_proc *proc,
                                                               __u64 pc)
{
    __u32 lo = 0, hi = proc->n;
    if (hi > HP_MAX_UNWIND_MAPPINGS)
        hi = HP_MAX_UNWIND_MAPPINGS;
    for (int i = 0; i < 9 && lo < hi; i++) { /* 2^8 = HP_MAX_UNWIND_MAPPINGS */
        __u32 mid = (lo + hi) / 2;
        struct hp_unwind_mapping *m = &proc->m[mid & (HP_MAX_UNWIND_MAPPINGS - 1)];
        if (pc < m->start)
            hi = mid;
        else if (pc >= m->end)
            lo = mid + 1;
        else
            return m;
    }
    return NULL;
}

/* The row of the table that covers `tpc`, or NULL (binary search). */
static __always_inline struct hp_unwind_row *find_row(const struct hp_unwind_mapping *m, __u64 tpc)
{
    if (m->nrows == 0 || tpc > 0xffffffffULL)
        return NULL;
    __u32 lo = m->first_row, hi = m->first_row + m->nrows;
    for (int i = 0; i < HP_UNWIND_SEARCH_STEPS && lo + 1 < hi; i++) {
        __u32 mid = lo + (hi - lo) / 2;
        struct hp_unwind_row *r = bpf_map_lookup_elem(&unwind_rows, &mid);
        if (!r)
            return NULL;
        if (r->pc <= (__u32)tpc)
            lo = mid;
        else
            hi = mid;
    }
    struct hp_unwind_row *r = bpf_map_lookup_elem(&unwind_rows, &lo);
    return r && r->pc <= (__u32)tpc ? r : NULL;
}

/* One step by the frame pointer, for code without a table. */
static __always_inline int step_by_frame_pointer(struct walk_state *u)
{
    __u64 frame[2]; /* saved %rbp, return address */
    if (u->fp == 0 || (u->fp & 7) || u->fp < u->sp)
        return 1;
    if (bpf_probe_read_user(frame, sizeof(frame), (void *)u->fp)) {
        count_stat(HP_STAT_STACK_READ_ERROR);
        return 1;
    }
    u->sp = u->fp + 16;
    u->pc = frame[1];
    u->fp = frame[0];
    u->exact_pc = 0;
    return 0;
}

/* Offsets in the ucontext that a signal trampoline's frame points at
 * (x86_64 struct ucontext: flags, link, stack_t, then the registers). */
#define UC_RBP 120
#define UC_RSP 160
#define UC_RIP 168

/* One step by the table row for the current pc; 1 ends the walk. */
static __always_inline int step_by_row(struct walk_state *u, const struct hp_unwind_row *r)
{
    __u64 cfa;
    switch (r->cfa_type) {
    case HP_CFA_RSP:
        cfa = u->sp + (__s64)r->cfa_offset;
        break;
    case HP_CFA_RBP:
        cfa = u->fp + (__s64)r->cfa_offset;
        break;
    case HP_CFA_PLT:
        cfa = u->sp + 8 + ((u->pc & 15) >= (__u64)r->cfa_offset ? 8 : 0);
        break;
    case HP_CFA_SIGNAL: {
        __u64 regs[3];
        if (bpf_probe_read_user(&regs[0], 8, (void *)(u->sp + UC_RBP)) ||
            bpf_probe_read_user(&regs[1], 8, (void *)(u->sp + UC_RSP)) ||
            bpf_probe_read_user(&regs[2], 8, (void *)(u->sp + UC_RIP))) {
            count_stat(HP_STAT_STACK_READ_ERROR);
            return 1;
        }
        u->fp = regs[0];
        u->sp = regs[1];
        u->pc = regs[2];
        u->exact_pc = 1;
        return 0;
    }
    case HP_CFA_END:
        return 1; /* the outermost frame: a clean end */
    case HP_CFA_NONE:
        count_stat(HP_STAT_UNWIND_NO_ROW);
        return 1;
    default:
        count_stat(HP_STAT_UNWIND_UNSUPPORTED);
        return 1;
    }
    if (cfa <= u->sp) {
        count_stat(HP_STAT_UNWIND_BAD_FRAME);
        return 1;
    }
    __u64 ra, fp = u->fp;
    if (bpf_probe_read_user(&ra, sizeof(ra), (void *)(cfa - 8))) {
        count_stat(HP_STAT_STACK_READ_ERROR);
        return 1;
    }
    if (r->rbp_type == HP_RBP_OFFSET &&
        bpf_probe_read_user(&fp, sizeof(fp), (void *)(cfa + (__s64)r->rbp_offset))) {
        count_stat(HP_STAT_STACK_READ_ERROR);
        return 1;
    }
    if (r->rbp_type == HP_RBP_UNSUPPORTED)
        fp = 0; /* unknown: a later frame-pointer step must not trust it */
    u->pc = ra;
    u->sp = cfa;
    u->fp = fp;
    u->exact_pc = 0;
    return 0;
}

/* bpf_loop callback: unwinds one frame and stores its caller's pc. */
static long unwind_step(__u32 index, void *data)
{
    struct walk_state *u = data;
    (void)index;
    __u32 n = u->n;
    if (n >= HP_MAX_FRAMES) {
        count_stat(HP_STAT_STACK_TRUNCATED);
        return 1;
    }
    /* A return address is just past its call: look up the call itself. */
    __u64 lookup = u->exact_pc ? u->pc : u->pc - 1;
    struct hp_unwind_mapping *m = find_mapping(u->proc, lookup);
    int stop;
    if (!m) {
        count_stat(HP_STAT_UNWIND_NO_TABLE);
        stop = step_by_frame_pointer(u);
    } else {
        struct hp_unwind_row *r = find_row(m, lookup - m->bias);
        if (!r) {
            count_stat(HP_STAT_UNWIND_NO_ROW);
            return 1;
        }
        stop = step_by_row(u, r);
    }
    if (stop || u->pc == 0)
        return 1;
    u->st->frames[n] = u->pc;
    u->n = n + 1;
    return 0;
}

/*
 * Walks the user stack with the process's unwind tables (frame pointers
 * where a mapping has none). At the allocator's entry the caller's frame is
 * pc = [sp], sp + 8, and the caller's %rbp.
 */
static __always_inline void walk_with_tables(struct hp_stack *st, struct hp_unwind_proc *proc,
                                              __u64 ret, __u64 sp, __u64 fp)
{
    struct walk_state u = {.pc = ret, .sp = sp + 8, .fp = fp, .n = 1, .st = st, .proc = proc};
    st->frames[0] = ret;
    bpf_loop(HP_MAX_FRAMES, unwind_step, &u, 0);
    st->len = u.n;
    count_stat(HP_STAT_UNWIND_CFI_STACKS);
}

#endif
