// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * heapprof.bpf.c - the kernel side of heapprofd: probes on the allocator of
 * each profiled process that sample allocations by bytes (a Poisson
 * process), capture the stack of each sample, and keep per-stack counts and
 * the sampled pointers still alive.
 *
 * Per call, on the unsampled path, an allocation entry reads its return
 * address and tests a per-CPU countdown; a free does one hash lookup; every
 * probe run adds one to its target's per-CPU hit counter (the cost
 * estimate). All else (stack walk, map updates) happens only for sampled
 * calls.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "heapprof.h"

#include "heapprof_maps.bpf.h"
#include "hidden_returns.bpf.h"
#include "inprocess.bpf.h"
#include "nested_calls.bpf.h"
#include "sample_store.bpf.h"
#include "stack_store.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* An operator new of at least this many bytes cannot succeed here (set by
 * the daemon, daemon/bpfstate/new_fail_size.h): it is not sampled, so that
 * no return probe hides the return address of a frame that std::bad_alloc
 * is thrown through (no unwinder can walk the trampoline). */
const volatile __u64 new_fail_size = ~0ULL;

/*
 * The entry of every allocating function: decides whether this call counts
 * (not nested in another allocator call, not the continuation of one) and
 * whether it is sampled, and if the return probe has work, leaves it a
 * pending record. Returns 0 when the return probe is needed, 1 when it is
 * not (what a uprobe session wants).
 */
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
    bool checked = false;

    /*
     * A call inside another allocator call is counted at the outer one.
     * That can only happen right after an entry of a kind that calls others
     * (or in one), so a malloc after a malloc on this CPU, the common case,
     * skips the checks and their user-memory read. That hint is per CPU: a
     * thread switched out or moved mid-call defeats it, and the call is
     * then counted down here (bytes the countdown runs over twice, which
     * leaves the sampling of the others unbiased: waits are memoryless)
     * and caught if it is sampled, by counted_elsewhere().
     */
    if (may_call_allocator(cs->last_kind) || may_call_allocator(kind)) {
        if (bpf_probe_read_user(&ret, sizeof(ret), (void *)sp))
            return 1;
        pid_tgid = bpf_get_current_pid_tgid();
        struct thread_call *tc = thread_call_of(pid_tgid);
        if (continues_call(tc, pid_tgid, sp, ret, kind)) {
            cs->last_kind = kind; /* the chain may go on: reallocarray -> realloc -> malloc */
            count_stat(HP_STAT_NESTED);
            return 1;
        }
        if (called_from_allocator(cookie, ret)) {
            count_stat(HP_STAT_NESTED);
            return 1;
        }
        note_call(tc, pid_tgid, sp, ret, kind);
        checked = true;
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
    if (!pid_tgid)
        pid_tgid = bpf_get_current_pid_tgid();
    if (sampled) {
        /* Read only now on the fast path: the caller is the leaf. */
        if (!ret && bpf_probe_read_user(&ret, sizeof(ret), (void *)sp))
            return 1;
        struct hidden_returns hidden;
        hidden_returns_init(&hidden);
        if (counted_elsewhere(cookie, kind, sp, pid_tgid, &ret, checked, &hidden)) {
            count_stat(HP_STAT_NESTED);
            return 1; /* its outer call has the realloc's old pointer too */
        }
        p.stack_id = capture_stack(ctx, ret, sp, &hidden);
    }
    if (!p.stack_id && !old_live)
        return 1;
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
    count_hit(cookie);
    __u64 a = PT_REGS_PARM1(ctx), b = PT_REGS_PARM2(ctx), c = PT_REGS_PARM3(ctx);
    __u64 size = a, old_ptr = 0, out_ptr = 0;

    /* Only the arguments differ by kind: one call below keeps the verifier
     * from exploring the whole entry path once per kind. */
    switch (kind) {
    case HP_MALLOC:
    case HP_VALLOC:
        break;
    case HP_NEW:
    case HP_NEW_ARRAY:
    case HP_NEW_TARGET:
        if (a >= new_fail_size)
            return 1;
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
    case HP_XALLOCX:
        size = b;
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
            untrack(bpf_get_current_pid_tgid() >> 32, a, ~0ULL);
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
    count_hit(bpf_get_attach_cookie(ctx));
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
    /* xallocx returns the block's size: at least the size asked for when it
     * resized in place, which frees the old life and starts a new one. */
    if (p.kind == HP_XALLOCX)
        ptr = rc >= p.size ? p.old_ptr : 0;
    /* A realloc that returned memory, or was asked for 0 bytes, freed the old block. */
    if (p.old_live && (ptr || p.size == 0))
        untrack(tgid, p.old_ptr, ~0ULL);
    if (p.stack_id && ptr)
        record(tgid, ptr, p.size, p.stack_id, 0);
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
