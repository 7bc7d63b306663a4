// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * heapprof.bpf.c - the kernel side of heapprofd: probes on the allocator of
 * each profiled process that sample allocations by bytes (a Poisson
 * process), capture the stack of each sample, and keep per-stack counts and
 * the sampled pointers still alive.
 *
 * Per call, on the unsampled path, an allocation entry reads its return
 * address and tests a per-CPU countdown; a free does one hash lookup. All
 * else (stack walk, map updates) happens only for sampled calls.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "heapprof.h"
#include "sampling_math.h"
#include "unwind_row.h"

/* From errno.h, which BPF programs cannot include. */
#define EEXIST 17

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by the daemon before load. */
const volatile __u64 sample_interval = 524288;
const volatile __u32 log2_table[HP_LOG2_TABLE_LEN];
const volatile __u64 weight_table[HP_WEIGHT_TABLE_LEN];

/* This CPU's sampling countdown, and the last allocation entry seen on it
 * (to recognise an allocator function that tail-calls another). */
struct cpu_state {
    __u64 countdown;
    __u64 last_pid_tgid;
    __u64 last_sp;
    __u64 last_ret;
    __u32 last_kind;
    __u32 initialized;
};

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct cpu_state);
} cpu_states SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, HP_STAT_COUNT);
    __type(key, __u32);
    __type(value, __u64);
} stats SEC(".maps");

/* Where a stack is built before it is stored. */
struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct hp_stack);
} stack_scratch SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, HP_MAX_STACKS);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __type(key, __u64);
    __type(value, struct hp_stack);
} stacks SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, HP_MAX_COUNTS);
    __type(key, struct hp_count_key);
    __type(value, struct hp_counts);
} counts SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, HP_MAX_LIVE);
    __type(key, struct hp_live_key);
    __type(value, struct hp_live);
} live SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, HP_MAX_PENDING);
    __type(key, struct hp_pending_key);
    __type(value, struct hp_pending);
} pending SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, HP_MAX_IMAGES);
    __type(key, __u32);
    __type(value, struct hp_image);
} images SEC(".maps");

/* Userspace only, pinned: what the other pinned maps were made with, and
 * the processes to attach again after a restart. */
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, struct hp_meta);
} meta SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, HP_MAX_TARGETS);
    __type(key, __u32);
    __type(value, struct hp_persisted_target);
} persisted_targets SEC(".maps");

/* The rows of every loaded unwind table, each table a contiguous range. */
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, HP_MAX_UNWIND_ROWS);
    __type(key, __u32);
    __type(value, struct hp_unwind_row);
} unwind_rows SEC(".maps");

/* Per process: its executable mappings that have tables. */
struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, HP_MAX_TARGETS);
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __type(key, __u32);
    __type(value, struct hp_unwind_proc);
} unwind_procs SEC(".maps");

static __always_inline void count_stat(__u32 stat)
{
    __u64 *v = bpf_map_lookup_elem(&stats, &stat);
    if (v)
        *v += 1;
}

/* Whether the call into `kind` continues a call into `prev` that jumped to
 * it (glibc's realloc(NULL, n) jumps to malloc, reallocarray to realloc). */
static __always_inline bool forwards(__u32 prev, __u32 kind)
{
    return (prev == HP_REALLOC && kind == HP_MALLOC) ||
           (prev == HP_REALLOCARRAY && (kind == HP_REALLOC || kind == HP_MALLOC));
}

/* Whether `addr` is the uretprobe trampoline of this process: a return
 * probe on a function that tail-called another put it where the return
 * address was. */
static __always_inline bool is_uretprobe_trampoline(__u64 addr)
{
    struct task_struct *task = (struct task_struct *)bpf_get_current_task();
    struct xol_area *area = BPF_CORE_READ(task, mm, uprobes_state.xol_area);
    return area && BPF_CORE_READ(area, vaddr) == addr;
}

/* Whether the return address `ret` lies in one of the probed functions of
 * the allocator: then this call is the allocator calling itself. */
static __always_inline bool called_from_allocator(__u64 cookie, __u64 ret)
{
    __u32 slot = HP_COOKIE_IMAGE(cookie);
    struct hp_image *img = bpf_map_lookup_elem(&images, &slot);
    if (!img)
        return false;
    __u64 call = ret - 1;
    if (call < img->lo || call >= img->hi)
        return false; /* the usual case: called from the program, not the allocator */
    for (__u32 i = 0; i < HP_MAX_FUNCS; i++) {
        if (i >= img->nfuncs)
            break;
        if (call >= img->start[i] && call < img->end[i])
            return true;
    }
    return false;
}

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
 * place for it. */
static __always_inline __u64 store_stack(const struct hp_stack *st)
{
    __u64 id = hash_stack(st);
    for (__u32 probe = 0; probe < HP_STACK_PROBES; probe++, id++) {
        if (id == 0)
            id = 1;
        struct hp_stack *old = bpf_map_lookup_elem(&stacks, &id);
        if (!old) {
            long err = bpf_map_update_elem(&stacks, &id, st, BPF_NOEXIST);
            if (err == 0)
                return id;
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

static __always_inline __u64 capture_stack(struct pt_regs *ctx, __u64 ret, __u64 sp)
{
    __u32 zero = 0;
    struct hp_stack *st = bpf_map_lookup_elem(&stack_scratch, &zero);
    if (!st)
        return 0;
    __u32 tgid = bpf_get_current_pid_tgid() >> 32;
    struct hp_unwind_proc *proc = bpf_map_lookup_elem(&unwind_procs, &tgid);
    if (proc)
        walk_with_tables(st, proc, ret, sp, PT_REGS_FP(ctx));
    else
        walk_frame_pointers(st, ret, sp, PT_REGS_FP(ctx));
    return store_stack(st);
}

/* Takes a sampled pointer out of the live set and its weight out of in-use;
 * exactly once, whoever deletes the entry. */
static __always_inline void untrack(__u32 tgid, __u64 ptr)
{
    struct hp_live_key key = {.tgid = tgid, .ptr = ptr};
    struct hp_live *l = bpf_map_lookup_elem(&live, &key);
    if (!l)
        return;
    struct hp_live gone = *l;
    if (bpf_map_delete_elem(&live, &key) != 0)
        return;
    struct hp_count_key ck = {.tgid = tgid, .stack_id = gone.stack_id};
    struct hp_counts *c = bpf_map_lookup_elem(&counts, &ck);
    if (c) {
        __sync_fetch_and_sub(&c->inuse_objects, gone.w_objects);
        __sync_fetch_and_sub(&c->inuse_bytes, gone.w_bytes);
    }
    count_stat(HP_STAT_FREES_MATCHED);
}

/* Adds a sampled allocation of `size` bytes at `ptr` to its stack's counts
 * and to the live set. */
static __always_inline void record(__u32 tgid, __u64 ptr, __u64 size, __u64 stack_id)
{
    __u64 w_objects = hp_weight_objects(size, sample_interval, weight_table);
    __u64 w_bytes = hp_weight_bytes(size, w_objects);

    struct hp_count_key ck = {.tgid = tgid, .stack_id = stack_id};
    struct hp_counts *c = bpf_map_lookup_elem(&counts, &ck);
    if (!c) {
        struct hp_counts zero = {};
        bpf_map_update_elem(&counts, &ck, &zero, BPF_NOEXIST);
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
    untrack(tgid, ptr);
    struct hp_live_key lk = {.tgid = tgid, .ptr = ptr};
    struct hp_live l = {
        .stack_id = stack_id,
        .size = size,
        .w_objects = w_objects,
        .w_bytes = w_bytes,
        .time_ns = bpf_ktime_get_ns(),
    };
    __sync_fetch_and_add(&c->inuse_objects, w_objects);
    __sync_fetch_and_add(&c->inuse_bytes, w_bytes);
    if (bpf_map_update_elem(&live, &lk, &l, BPF_ANY) != 0) {
        __sync_fetch_and_sub(&c->inuse_objects, w_objects);
        __sync_fetch_and_sub(&c->inuse_bytes, w_bytes);
        count_stat(HP_STAT_LIVE_FULL);
    }
    count_stat(HP_STAT_SAMPLES);
}

/*
 * The entry of every allocating function: decides whether this call counts
 * (not nested in another allocator call) and whether it is sampled, and if
 * the return probe has work, leaves it a pending record. Returns 0 when the
 * return probe is needed, 1 when it is not (what a uprobe session wants).
 */
/* Whether a function of this kind may call another probed one inside it
 * (glibc's realloc calls malloc and free, and jumps to malloc for
 * realloc(NULL, n); reallocarray jumps to realloc). malloc and free do not. */
static __always_inline bool may_call_allocator(__u32 kind)
{
    return kind != HP_MALLOC && kind != HP_FREE;
}

static __always_inline int on_alloc_entry(struct pt_regs *ctx, __u64 cookie, __u32 kind,
                                          __u64 size, __u64 old_ptr, __u64 out_ptr)
{
    __u64 sp = PT_REGS_SP(ctx);
    __u32 zero = 0;
    struct cpu_state *cs = bpf_map_lookup_elem(&cpu_states, &zero);
    if (!cs)
        return 1;
    __u64 ret = 0;
    __u64 pid_tgid = 0;

    /*
     * A call inside another allocator call is counted at the outer one.
     * That can only happen right after an entry of a kind that calls others
     * (or in one), so a malloc after a malloc, the common case, skips the
     * checks and their user-memory read. The record is per CPU: an inner
     * call that runs on another CPU than its outer one, or after another
     * process's entry on this CPU, is missed and counted twice; both need
     * a context switch inside the outer call, which is rare.
     */
    if (may_call_allocator(cs->last_kind) || may_call_allocator(kind)) {
        if (bpf_probe_read_user(&ret, sizeof(ret), (void *)sp))
            return 1;
        pid_tgid = bpf_get_current_pid_tgid();
        if (cs->last_pid_tgid == pid_tgid && cs->last_sp == sp && forwards(cs->last_kind, kind) &&
            (cs->last_ret == ret || is_uretprobe_trampoline(ret))) {
            /* The chain may go on: reallocarray -> realloc -> malloc. */
            cs->last_kind = kind;
            count_stat(HP_STAT_NESTED);
            return 1;
        }
        if (called_from_allocator(cookie, ret)) {
            count_stat(HP_STAT_NESTED);
            return 1;
        }
        cs->last_pid_tgid = pid_tgid;
        cs->last_sp = sp;
        cs->last_ret = ret;
    }
    cs->last_kind = kind;

    __u32 old_live = 0;
    if (old_ptr) {
        if (!pid_tgid)
            pid_tgid = bpf_get_current_pid_tgid();
        struct hp_live_key lk = {.tgid = pid_tgid >> 32, .ptr = old_ptr};
        old_live = bpf_map_lookup_elem(&live, &lk) != NULL;
    }
    bool sampled = take_sample(cs, size);
    if (!sampled && !old_live)
        return 1;

    struct hp_pending p = {
        .size = size,
        .old_ptr = old_ptr,
        .out_ptr = out_ptr,
        .kind = kind,
        .old_live = old_live,
    };
    if (sampled) {
        /* Read only now on the fast path: the caller is the leaf. */
        if (!ret && bpf_probe_read_user(&ret, sizeof(ret), (void *)sp))
            return 1;
        p.stack_id = capture_stack(ctx, ret, sp);
    }
    if (!p.stack_id && !old_live)
        return 1;
    if (!pid_tgid)
        pid_tgid = bpf_get_current_pid_tgid();
    struct hp_pending_key pk = {.pid_tgid = pid_tgid, .sp = sp};
    if (bpf_map_update_elem(&pending, &pk, &p, BPF_ANY) != 0) {
        count_stat(HP_STAT_PENDING_FULL);
        return 1;
    }
    return 0;
}

/* n * m, or ~0 when it overflows (no allocation can be that large). */
static __always_inline __u64 array_size(__u64 n, __u64 m)
{
    __u64 limit = m ? ~0ULL / m : ~0ULL;
    /* Keeps clang from turning the test into a 128-bit multiply, which BPF lacks. */
    asm volatile("" : "+r"(limit));
    if (n > limit)
        return ~0ULL;
    return n * m;
}

/*
 * Any probed function's entry, told apart by the kind in the attach
 * cookie, its arguments read per kind. Returns 0 when the return probe is
 * needed, 1 when it is not.
 */
static __always_inline int on_entry(struct pt_regs *ctx)
{
    __u64 cookie = bpf_get_attach_cookie(ctx);
    __u32 kind = HP_COOKIE_KIND(cookie);
    __u64 a = PT_REGS_PARM1(ctx), b = PT_REGS_PARM2(ctx), c = PT_REGS_PARM3(ctx);
    __u64 size = a, old_ptr = 0, out_ptr = 0;

    /* Only the arguments differ by kind: one call below keeps the verifier
     * from exploring the whole entry path once per kind. */
    switch (kind) {
    case HP_MALLOC:
    case HP_VALLOC:
        break;
    case HP_CALLOC:
        size = array_size(a, b);
        break;
    case HP_REALLOC:
        size = b;
        old_ptr = a;
        break;
    case HP_REALLOCARRAY:
        size = array_size(b, c);
        old_ptr = a;
        break;
    case HP_POSIX_MEMALIGN:
        size = c;
        out_ptr = a;
        break;
    case HP_ALIGNED_ALLOC:
        size = b;
        break;
    case HP_FREE:
        if (a)
            untrack(bpf_get_current_pid_tgid() >> 32, a);
        return 1;
    default:
        return 1;
    }
    if (size == ~0ULL)
        return 1; /* n * m overflowed: the call fails, nothing is allocated */
    return on_alloc_entry(ctx, cookie, kind, size, old_ptr, out_ptr);
}

/* The return of an allocating function: finishes what its entry left. */
static __always_inline void on_return(struct pt_regs *ctx)
{
    /* The return has popped the return address: sp is 8 above the entry's. */
    struct hp_pending_key pk = {.pid_tgid = bpf_get_current_pid_tgid(),
                                .sp = PT_REGS_SP(ctx) - 8};
    struct hp_pending *pp = bpf_map_lookup_elem(&pending, &pk);
    if (!pp)
        return;
    struct hp_pending p = *pp;
    bpf_map_delete_elem(&pending, &pk);
    __u32 tgid = pk.pid_tgid >> 32;

    __u64 rc = PT_REGS_RC(ctx);
    __u64 ptr = rc;
    if (p.kind == HP_POSIX_MEMALIGN) {
        ptr = 0;
        if ((int)rc == 0 && bpf_probe_read_user(&ptr, sizeof(ptr), (void *)p.out_ptr))
            ptr = 0;
    }
    /* A realloc that returned memory, or was asked for 0 bytes, freed the old block. */
    if (p.old_live && (ptr || p.size == 0))
        untrack(tgid, p.old_ptr);
    if (p.stack_id && ptr)
        record(tgid, ptr, p.size, p.stack_id);
}

/* Entry probe of the classic and uprobe_multi layouts. Returns 0: for a
 * perf-event uprobe a non-zero value would ask for a perf sample. */
SEC("uprobe")
int hp_entry(struct pt_regs *ctx)
{
    on_entry(ctx);
    return 0;
}

/* Return probe of the classic and uprobe_multi layouts. */
SEC("uretprobe")
int hp_return(struct pt_regs *ctx)
{
    on_return(ctx);
    return 0;
}

extern bool bpf_session_is_return(void) __ksym __weak;

/*
 * Entry and return in one program (a uprobe session, Linux 6.13+): the
 * entry returns non-zero for calls with nothing left to do, so that their
 * return, which costs as much as the entry, never traps.
 */
SEC("uprobe")
int hp_session(struct pt_regs *ctx)
{
    if (bpf_session_is_return()) {
        on_return(ctx);
        return 0;
    }
    return on_entry(ctx);
}
