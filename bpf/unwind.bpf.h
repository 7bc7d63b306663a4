// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * unwind.bpf.h - the user-stack walk of a sampled call: with the process's
 * unwind tables (rows built in userspace from .eh_frame/.debug_frame, see
 * daemon/unwind/) in a bpf_loop, or by frame pointers where a process has
 * no tables. Runs for sampled calls only. Included by stack_store.bpf.h.
 */
#ifndef HEAPPROF_UNWIND_BPF_H
#define HEAPPROF_UNWIND_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>

#include "heapprof.h"
#include "heapprof_maps.bpf.h"
#include "hidden_returns.bpf.h"
#include "hp_errno.bpf.h"
#include "unwind_row.h"

/* Frame pointers are 8-byte aligned (the psABI aligns frames to 16). */
#define HP_FP_ALIGN 8
_Static_assert(HP_IS_POW2(HP_FP_ALIGN) && HP_IS_POW2(HP_PLT_STUB_BYTES),
               "an offset within either is taken with a mask of its size - 1");

/*
 * Walks the user stack by frame pointers into `st`. At an allocator's entry
 * the return address to its caller is at [sp] and %rbp is still the
 * caller's frame, so the caller is the leaf and the frame chain gives its
 * callers. A caller without a frame pointer costs us its own caller.
 */
static __always_inline void walk_frame_pointers(struct hp_stack *st, __u64 ret, __u64 sp, __u64 fp,
                                                struct hidden_returns *hidden)
{
    st->frames[0] = ret;
    __u32 n = 1;
    __u64 prev = sp;
    for (__u32 i = 1; i < HP_MAX_FRAMES; i++) {
        if (fp == 0 || (fp & (HP_FP_ALIGN - 1)) || fp < prev)
            break;
        __u64 frame[2]; /* saved %rbp, return address */
        if (bpf_probe_read_user(frame, sizeof(frame), (void *)fp)) {
            count_stat(HP_STAT_STACK_READ_ERROR);
            break;
        }
        frame[1] = unhide_return(hidden, fp + 8, frame[1]);
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

/* Where the walk is: one frame's registers, and what the frame-pointer
 * fallback has learnt of the address space (looked up once it needs it). */
struct walk_state {
    __u64 pc;   /* a return address, or an interrupted pc after a signal frame */
    __u64 sp;
    __u64 fp;
    __u64 stack_end;              /* end of the mapping holding the thread's stack; 0: not known */
    __u64 code_start, code_end;   /* the last executable mapping found (empty at first) */
    __u32 exact_pc; /* pc is not a return address (after a signal frame) */
    __u32 fp_unknown; /* fp was not recovered by the last CFI step */
    __u32 n;        /* frames stored so far */
    __u32 complete; /* the walk reached the outermost frame */
    struct hp_stack *st;
    struct hp_unwind_proc *proc;
    struct hidden_returns hidden; /* return addresses pending uretprobes hid */
};

/*
 * The index of the table mapping holding `pc` in the process, or -1
 * (binary search). A global function, so that the verifier checks it once
 * and sees an unknown index at its callers: inlined, every path through
 * the search is a state of its own (a constant offset into proc->m), and
 * the walk after it is checked once per path.
 */
__noinline int hp_find_mapping(const struct hp_unwind_proc *proc, __u64 pc)
{
    if (!proc)
        return -1;
    __u32 lo = 0, hi = proc->n;
    if (hi > HP_MAX_UNWIND_MAPPINGS)
        hi = HP_MAX_UNWIND_MAPPINGS;
    /* n entries take floor(log2(n)) + 1 halvings to narrow to none. */
    for (int i = 0; i <= HP_MAX_UNWIND_MAPPINGS_LOG2 && lo < hi; i++) {
        __u32 mid = (lo + hi) / 2;
        const struct hp_unwind_mapping *m = &proc->m[mid & (HP_MAX_UNWIND_MAPPINGS - 1)];
        if (pc < m->start)
            hi = mid;
        else if (pc >= m->end)
            lo = mid + 1;
        else
            return (int)(mid & (HP_MAX_UNWIND_MAPPINGS - 1));
    }
    return -1;
}

/* The table mapping of `pc` in the process, or NULL. */
static __always_inline struct hp_unwind_mapping *find_mapping(struct hp_unwind_proc *proc,
                                                               __u64 pc)
{
    int i = hp_find_mapping(proc, pc);
    struct hp_unwind_mapping *m = NULL;
    if (i >= 0)
        m = &proc->m[i & (HP_MAX_UNWIND_MAPPINGS - 1)];
    /* Makes the callers test the pointer, not `i < 0` again: clang merges
     * the two tests, and the verifier of Linux 6.1 cannot tell that a
     * sign-extended negative `i` fails the second one, so it walked on
     * with a NULL `m` and refused the program ("invalid mem access"). */
    asm volatile("" : "+r"(m));
    return m;
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

/* What a step tells the walk. */
enum step_result {
    STEP_ON = 0,   /* one more frame: u->pc is its return address */
    STEP_END = 1,  /* the outermost frame: a clean end */
    STEP_STOP = 2, /* stopped early, and counted why */
};

/* From the kernel's mm.h: the mapping may be executed. */
#define HP_VM_EXEC 0x4

/* A mapping's range and flags, as bpf_find_vma found it. */
struct vma_seen {
    __u64 start, end, flags;
};

static long note_vma(struct task_struct *task, struct vm_area_struct *vma, void *ctx)
{
    struct vma_seen *v = ctx;
    (void)task;
    v->start = vma->vm_start;
    v->end = vma->vm_end;
    v->flags = vma->vm_flags;
    return 0;
}

/*
 * The mapping holding `addr` in the current process: 0, -ENOENT for none,
 * or -EBUSY when the address space is being changed (the kernel only
 * try-locks it here). Live, unlike /proc/PID/maps read by the daemon: JIT
 * compilers map code between two scans.
 */
static __always_inline long find_vma(__u64 addr, struct vma_seen *v)
{
    /* Kernels before 5.17 lack the helper (resolved at load, the other
     * branch dropped): then any address is taken as stack and code, as
     * frame-pointer walkers without this check do. */
    if (!bpf_core_enum_value_exists(enum bpf_func_id, BPF_FUNC_find_vma)) {
        v->start = 0;
        v->end = ~0ULL;
        v->flags = HP_VM_EXEC;
        return 0;
    }
    return bpf_find_vma(bpf_get_current_task_btf(), addr, note_vma, v, 0);
}

/* Whether the call before return address `ra` lies in executable code:
 * a file with a table, the last mapping found, or one looked up now. */
static __always_inline enum step_result check_code(struct walk_state *u, __u64 ra)
{
    __u64 call = ra - 1;
    if (call >= u->code_start && call < u->code_end)
        return STEP_ON;
    if (find_mapping(u->proc, call))
        return STEP_ON;
    struct vma_seen v = {};
    long e = find_vma(call, &v);
    if (e == -EBUSY) {
        count_stat(HP_STAT_UNWIND_MM_BUSY);
        return STEP_STOP;
    }
    if (e || !(v.flags & HP_VM_EXEC)) {
        count_stat(HP_STAT_UNWIND_NOT_CODE);
        return STEP_STOP;
    }
    u->code_start = v.start;
    u->code_end = v.end;
    return STEP_ON;
}

/*
 * Whether a frame whose stack pointer is `sp` can only be the C runtime's
 * start code: the main thread's stack begins (argc) at mm->start_stack,
 * and _start and the libc frames it calls before main fit in
 * HP_START_CODE_BYTES above main's caller. musl has no CFI for them and
 * uses %rbp as a general register there (libc_start_main_stage2 keeps argc
 * in it), so neither a table nor the frame pointer can say the stack ends.
 */
static __always_inline bool at_start_of_main_stack(__u64 sp)
{
    struct task_struct *task = (struct task_struct *)bpf_get_current_task();
    __u64 top = BPF_CORE_READ(task, mm, start_stack);
    return top >= sp && top - sp <= HP_START_CODE_BYTES;
}

/*
 * One step by the frame pointer, where no CFI row covers the pc (code
 * without a table, a gap in one, JIT code). Validated, so that a %rbp used
 * as a general register does not invent frames: the frame must lie in the
 * thread's stack above the current stack pointer (so the walk only moves
 * up), and the return address it holds must be in executable code. A zero
 * %rbp is the outermost frame: the psABI asks code to mark the deepest
 * frame so (glibc's and musl's _start and clone do).
 */
static __always_inline enum step_result step_by_frame_pointer(struct walk_state *u)
{
    __u64 frame[2]; /* saved %rbp, return address */
    count_stat(HP_STAT_UNWIND_FP_FRAMES);
    if (u->fp == 0 && !u->fp_unknown)
        return STEP_END;
    if (u->fp_unknown || (u->fp & (HP_FP_ALIGN - 1)) || u->fp < u->sp) {
        if (at_start_of_main_stack(u->sp))
            return STEP_END;
        count_stat(HP_STAT_UNWIND_BAD_FP);
        return STEP_STOP;
    }
    if (!u->stack_end) {
        struct vma_seen v = {};
        long e = find_vma(u->sp, &v);
        if (e) {
            count_stat(e == -EBUSY ? HP_STAT_UNWIND_MM_BUSY : HP_STAT_UNWIND_BAD_FP);
            return STEP_STOP;
        }
        u->stack_end = v.end;
    }
    if (u->fp + sizeof(frame) > u->stack_end) {
        if (at_start_of_main_stack(u->sp))
            return STEP_END;
        count_stat(HP_STAT_UNWIND_BAD_FP);
        return STEP_STOP;
    }
    if (bpf_probe_read_user(frame, sizeof(frame), (void *)u->fp)) {
        count_stat(HP_STAT_STACK_READ_ERROR);
        return STEP_STOP;
    }
    frame[1] = unhide_return(&u->hidden, u->fp + 8, frame[1]);
    if (frame[1] == 0)
        return STEP_END;
    enum step_result r = check_code(u, frame[1]);
    if (r != STEP_ON)
        return r;
    u->sp = u->fp + 16;
    u->pc = frame[1];
    u->fp = frame[0];
    u->exact_pc = 0;
    return STEP_ON;
}

/* Offsets in the ucontext that a signal trampoline's frame points at
 * (x86_64 struct ucontext: flags, link, stack_t, then the registers); the
 * user ABI, which the kernel's own struct spells out. */
#define UC_RBP 120
#define UC_RSP 160
#define UC_RIP 168
#define UC_REG(r) (__builtin_offsetof(struct ucontext, uc_mcontext) + \
                   __builtin_offsetof(struct sigcontext_64, r))
_Static_assert(UC_RBP == UC_REG(bp) && UC_RSP == UC_REG(sp) && UC_RIP == UC_REG(ip),
               "the ucontext offsets are the kernel's");

/* One step by the table row for the current pc. */
static __always_inline enum step_result step_by_row(struct walk_state *u,
                                                    const struct hp_unwind_row *r)
{
    __u64 cfa;
    switch (r->cfa_type) {
    case HP_CFA_RSP:
        cfa = u->sp + (__s64)r->cfa_offset;
        break;
    case HP_CFA_RBP:
        if (u->fp_unknown) {
            count_stat(HP_STAT_UNWIND_BAD_FP);
            return STEP_STOP;
        }
        cfa = u->fp + (__s64)r->cfa_offset;
        break;
    case HP_CFA_PLT:
        /* 8 more once the stub's push has run: at or past cfa_offset in the stub. */
        cfa = u->sp + 8 +
              ((u->pc & (HP_PLT_STUB_BYTES - 1)) >= (__u64)r->cfa_offset ? 8 : 0);
        break;
    case HP_CFA_SIGNAL: {
        __u64 regs[3];
        if (bpf_probe_read_user(&regs[0], 8, (void *)(u->sp + UC_RBP)) ||
            bpf_probe_read_user(&regs[1], 8, (void *)(u->sp + UC_RSP)) ||
            bpf_probe_read_user(&regs[2], 8, (void *)(u->sp + UC_RIP))) {
            count_stat(HP_STAT_STACK_READ_ERROR);
            return STEP_STOP;
        }
        u->fp = regs[0];
        u->sp = regs[1];
        u->pc = regs[2];
        u->exact_pc = 1;
        u->fp_unknown = 0;
        u->stack_end = 0; /* the handler may have run on an alternate stack */
        return STEP_ON;
    }
    case HP_CFA_END:
        return STEP_END;
    default:
        count_stat(HP_STAT_UNWIND_UNSUPPORTED);
        return STEP_STOP;
    }
    if (cfa <= u->sp) {
        count_stat(HP_STAT_UNWIND_BAD_FRAME);
        return STEP_STOP;
    }
    __u64 ra, fp = u->fp;
    if (bpf_probe_read_user(&ra, sizeof(ra), (void *)(cfa - 8))) {
        count_stat(HP_STAT_STACK_READ_ERROR);
        return STEP_STOP;
    }
    ra = unhide_return(&u->hidden, cfa - 8, ra);
    if (r->rbp_type == HP_RBP_OFFSET &&
        bpf_probe_read_user(&fp, sizeof(fp), (void *)(cfa + (__s64)r->rbp_offset))) {
        count_stat(HP_STAT_STACK_READ_ERROR);
        return STEP_STOP;
    }
    /* A rule we do not model leaves the caller's %rbp unknown: a later
     * frame-pointer step or %rbp-based CFA must not trust it. */
    if (r->rbp_type == HP_RBP_UNSUPPORTED)
        u->fp_unknown = 1;
    else if (r->rbp_type == HP_RBP_OFFSET)
        u->fp_unknown = 0;
    u->pc = ra;
    u->sp = cfa;
    u->fp = fp;
    u->exact_pc = 0;
    return ra ? STEP_ON : STEP_END; /* a zero return address ends the chain */
}

/*
 * bpf_loop callback: unwinds one frame and stores its caller's pc. Step
 * `index` stores frame index + 1 (frame 0 is the leaf, known before the
 * walk); the slot comes from the loop's index, never from a count kept in
 * `u`, so that the verifier sees one state per step whatever the count.
 */
static long unwind_step(__u32 index, void *data)
{
    struct walk_state *u = data;
    __u32 n = index + 1;
    if (n >= HP_MAX_FRAMES) {
        count_stat(HP_STAT_STACK_TRUNCATED);
        return 1;
    }
    /* A return address is just past its call: look up the call itself. */
    __u64 lookup = u->exact_pc ? u->pc : u->pc - 1;
    struct hp_unwind_mapping *m = find_mapping(u->proc, lookup);
    struct hp_unwind_row *r = m ? find_row(m, lookup - m->bias) : NULL;
    /* No row in any table (code without one, a gap in one, JIT code): frame pointers. */
    enum step_result res = r && r->cfa_type != HP_CFA_NONE ? step_by_row(u, r)
                                                           : step_by_frame_pointer(u);
    if (res == STEP_END)
        u->complete = 1;
    if (res != STEP_ON)
        return 1;
    /* Checked again next to the store: the one above is on a copy that
     * the verifier cannot tie to the slot after a spill. */
    __u64 slot = n;
    asm volatile("" : "+r"(slot));
    if (slot >= HP_MAX_FRAMES)
        return 1;
    u->st->frames[slot] = u->pc;
    u->n = slot + 1;
    return 0;
}

/*
 * Walks the user stack with the process's unwind tables, and frame
 * pointers where no table has a row for the pc. At the allocator's entry
 * the caller's frame is pc = [sp], sp + 8, and the caller's %rbp. Each
 * walk is counted once by how it ended: complete, truncated, or stopped
 * for a reason of its own.
 */
static __always_inline void walk_with_tables(struct hp_stack *st, struct hp_unwind_proc *proc,
                                              __u64 ret, __u64 sp, __u64 fp,
                                              const struct hidden_returns *hidden)
{
    struct walk_state u = {.pc = ret, .sp = sp + 8, .fp = fp, .n = 1, .st = st, .proc = proc,
                           .hidden = *hidden};
    st->frames[0] = ret;
    bpf_loop(HP_MAX_FRAMES, unwind_step, &u, 0);
    st->len = u.n;
    count_stat(HP_STAT_UNWIND_CFI_STACKS);
    if (u.complete)
        count_stat(HP_STAT_UNWIND_COMPLETE);
}

#endif
