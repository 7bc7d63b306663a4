/*
 * sampler.c - the in-process sampler: wrappers that the relocation slots of
 * a process's allocator functions point at (slots.c takes them). They run
 * the Poisson byte countdown of bpf/heapprof.bpf.c inside the process, so
 * that only sampled allocations, and frees of sampled pointers, call a
 * report function (report.S) that carries a uprobe; every other call costs
 * a few ns more than the allocator itself.
 *
 * Built without libc, position independent, with -ffixed-rbp so that %rbp
 * at a report function is still the allocator's caller's (the BPF unwinder
 * starts from it) and with .eh_frame. A wrapper must never fault or block:
 * no system call, no lock, no allocation. The daemon writes
 * hp_sampler_config before any slot points here; a wrapper calls the
 * function its slot held through hp_sampler_config.orig.
 */
#define __always_inline inline __attribute__((always_inline))
#include "hp_sampler.h"

typedef __u64 u64;
typedef __u32 u32;
typedef unsigned long size_t;
#define NULL ((void *)0)
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define HIDDEN __attribute__((visibility("hidden")))

HIDDEN struct hp_sampler_config hp_sampler_config;

/* One thread's (or a few threads') countdown, and the last entry of a
 * function that may jump to another (realloc to malloc, operator new[] to
 * operator new), to count that continuation once, as the BPF side does:
 * the wrappers of operator new jump to the real function, which may jump
 * through a slot to another wrapper with its caller's return address. */
struct slot {
    long long countdown;
    u64 rng;
    u64 fwd_sp;  /* entry sp of the last call that may jump to another entry, 0: none */
    u64 fwd_ret;
    u32 fwd_kind;
    u32 initialized;
} __attribute__((aligned(64)));

HIDDEN struct slot hp_sampler_slots[HP_SAMPLER_SLOTS];
HIDDEN u64 hp_sampler_filter[HP_FILTER_BUCKETS][HP_FILTER_WAYS] __attribute__((aligned(64)));
HIDDEN unsigned char hp_sampler_filter_counts[HP_FILTER_BUCKETS] __attribute__((aligned(64)));

HIDDEN struct hp_free_ring hp_free_ring __attribute__((aligned(64)));
HIDDEN struct hp_fork_page hp_fork_page __attribute__((aligned(4096)));

/* report.S: empty functions (a 1-byte nop and a return; the _opt one a
 * 5-byte nop and a return); the daemon's uprobes on them see the
 * arguments. `pos` is the ring's producer read after the allocation. */
void hp_report_alloc(u64 ptr, u64 size, u64 kind, u64 ret, u64 sp, u64 pos) HIDDEN;
void hp_report_alloc_opt(u64 ptr, u64 size, u64 kind, u64 ret, u64 sp, u64 pos) HIDDEN;
void hp_report_free(u64 ptr, u64 reason) HIDDEN;

static __always_inline struct slot *my_slot(void)
{
    u64 tp;
    __asm__("mov %%fs:0, %0" : "=r"(tp));
    return &hp_sampler_slots[(tp * 0x9e3779b97f4a7c15ULL) >> (64 - HP_SAMPLER_SLOTS_LOG2)];
}

/* Whether a call returning to `ret` is the allocator calling itself (or
 * our own slow path calling the original function). */
static __always_inline int nested(u64 ret)
{
    const struct hp_sampler_config *c = &hp_sampler_config;
    u64 call = ret - 1;
    if (call - c->self_lo < c->self_hi - c->self_lo)
        return 1;
    if (likely(call < c->alloc_lo || call >= c->alloc_hi))
        return 0;
    for (u32 i = 0; i < c->nranges && i < HP_MAX_FUNCS; i++)
        if (call >= c->range_lo[i] && call < c->range_hi[i])
            return 1;
    return 0;
}

static u32 next_random(struct slot *s)
{
    u64 x = s->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    s->rng = x;
    return (u32)((x * 0x2545f4914f6cdd1dULL) >> 32);
}

/* The countdown has run out, or was never set: draws the next wait.
 * Returns 1 when this call is sampled (as take_sample() in BPF). */
static __attribute__((noinline)) int countdown_expired(struct slot *s, u64 size)
{
    u64 interval = hp_sampler_config.sample_interval;
    if (interval <= 1)
        return 1;
    if (!s->initialized) {
        u32 lo, hi;
        __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
        s->rng = (((u64)hi << 32) | lo) ^ (u64)s ^ 0x9e3779b97f4a7c15ULL;
        if (!s->rng)
            s->rng = 1;
        s->countdown = (long long)hp_exp_wait(next_random(s), interval, hp_sampler_config.log2_table);
        s->initialized = 1;
        if ((u64)s->countdown > size) {
            s->countdown -= (long long)size;
            return 0;
        }
    }
    s->countdown = (long long)hp_exp_wait(next_random(s), interval, hp_sampler_config.log2_table);
    return 1;
}

/* Decides, before the call, whether this call of `kind` for `size` bytes
 * may be sampled: not nested, not the continuation of a call already
 * counted, and the countdown ran out. Returns 0 (not sampled: the wrapper
 * tail-jumps to the allocator) or 1 (the slow path draws the next wait
 * with countdown_expired(), which says whether it is). Makes no call, so
 * that a wrapper whose call is not sampled needs no frame of its own. */
static __always_inline int may_sample(u32 kind, u64 size, u64 ret, u64 sp)
{
    if (unlikely(!hp_sampler_config.enabled) || nested(ret))
        return 0;
    struct slot *s = my_slot();
    if (unlikely(s->fwd_sp)) {
        if (s->fwd_sp == sp && s->fwd_ret == ret && hp_forwards(s->fwd_kind, kind)) {
            s->fwd_kind = kind; /* the chain may go on */
            return 0;
        }
        s->fwd_sp = 0;
    }
    if (kind == HP_REALLOC || kind == HP_REALLOCARRAY || kind == HP_NEW || kind == HP_NEW_ARRAY) {
        s->fwd_sp = sp;
        s->fwd_ret = ret;
        s->fwd_kind = kind;
    }
    if (likely((u64)s->countdown > size)) {
        s->countdown -= (long long)size;
        return 0;
    }
    return 1;
}

static __always_inline u32 bucket_of(u64 ptr)
{
    return (u32)(((ptr >> 4) * 0x9e3779b97f4a7c15ULL) >> (64 - HP_FILTER_BUCKETS_LOG2));
}

/* Remembers a sampled pointer, or saturates its bucket when it is full. */
static void filter_add(u64 ptr)
{
    u32 b = bucket_of(ptr);
    unsigned char *cnt = &hp_sampler_filter_counts[b];
    if (__atomic_load_n(cnt, __ATOMIC_RELAXED) == HP_FILTER_SATURATED)
        return;
    for (u32 w = 0; w < HP_FILTER_WAYS; w++) {
        u64 expected = 0;
        if (__atomic_compare_exchange_n(&hp_sampler_filter[b][w], &expected, ptr, 0,
                                        __ATOMIC_RELEASE, __ATOMIC_RELAXED)) {
            unsigned char c = __atomic_load_n(cnt, __ATOMIC_RELAXED);
            while (c != HP_FILTER_SATURATED &&
                   !__atomic_compare_exchange_n(cnt, &c, (unsigned char)(c + 1), 0,
                                                __ATOMIC_RELEASE, __ATOMIC_RELAXED))
                ;
            return;
        }
    }
    __atomic_store_n(cnt, HP_FILTER_SATURATED, __ATOMIC_RELEASE);
}

/* Forgets `ptr` if it was sampled; returns whether it may have been (then
 * the BPF side is told). */
static int filter_take(u64 ptr)
{
    u32 b = bucket_of(ptr);
    unsigned char *cnt = &hp_sampler_filter_counts[b];
    unsigned char c = __atomic_load_n(cnt, __ATOMIC_ACQUIRE);
    if (c == HP_FILTER_SATURATED)
        return 1;
    for (u32 w = 0; w < HP_FILTER_WAYS; w++) {
        u64 expected = ptr;
        if (__atomic_load_n(&hp_sampler_filter[b][w], __ATOMIC_RELAXED) == ptr &&
            __atomic_compare_exchange_n(&hp_sampler_filter[b][w], &expected, 0, 0,
                                        __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
            c = __atomic_load_n(cnt, __ATOMIC_RELAXED);
            while (c != HP_FILTER_SATURATED && c != 0 &&
                   !__atomic_compare_exchange_n(cnt, &c, (unsigned char)(c - 1), 0,
                                                __ATOMIC_RELEASE, __ATOMIC_RELAXED))
                ;
            return 1;
        }
    }
    return 0;
}

/* Whether `ptr` may be a sampled pointer: one byte load for the rest. */
static __always_inline int maybe_sampled(u64 ptr)
{
    return ptr && __atomic_load_n(&hp_sampler_filter_counts[bucket_of(ptr)], __ATOMIC_ACQUIRE);
}

/* An allocation returned `ptr` while the filter still held it as a live
 * sample: its free went through no slot of ours (a pointer to free taken
 * before the attach and kept), so that sample is freed first. */
static __attribute__((noinline)) void reused(u64 ptr)
{
    if (filter_take(ptr))
        hp_report_free(ptr, HP_FREED_UNSEEN);
}

/* A sampled allocation returned `ptr`: remember it and tell BPF, with the
 * ring's producer as it is now that the allocator has returned: every
 * ring free of an earlier life of this address was claimed before it. The
 * optimized report function only where the daemon has said it is safe in
 * this very process (a forked child reads 0 until then). */
static void sampled(u64 ptr, u64 size, u32 kind, u64 ret, u64 sp)
{
    if (!ptr)
        return;
    filter_add(ptr);
    u64 pos = __atomic_load_n(&hp_free_ring.producer, __ATOMIC_ACQUIRE);
    if (__atomic_load_n(&hp_fork_page.opt_report, __ATOMIC_RELAXED))
        hp_report_alloc_opt(ptr, size, kind, ret, sp, pos);
    else
        hp_report_alloc(ptr, size, kind, ret, sp, pos);
}

/* Claims the next position of the ring of frees, if it has room and the
 * daemon drains it; the caller writes it with ring_publish(). Returns the
 * position, or ~0 (then the free is reported through the trap). */
static u64 ring_claim(void)
{
    struct hp_free_ring *r = &hp_free_ring;
    if (!__atomic_load_n(&hp_fork_page.ring_on, __ATOMIC_RELAXED) ||
        !__atomic_load_n(&hp_sampler_config.free_ring, __ATOMIC_RELAXED))
        return ~0ULL;
    u64 p = __atomic_load_n(&r->producer, __ATOMIC_RELAXED);
    do {
        /* The consumer is the daemon's to write; anything odd there only
         * makes the ring look full. */
        u64 c = __atomic_load_n(&r->consumer, __ATOMIC_ACQUIRE);
        if (p - c >= HP_FREE_RING_SIZE) {
            __atomic_fetch_add(&r->full, 1, __ATOMIC_RELAXED);
            return ~0ULL;
        }
    } while (!__atomic_compare_exchange_n(&r->producer, &p, p + 1, 1, __ATOMIC_ACQ_REL,
                                          __ATOMIC_RELAXED));
    return p;
}

/* Why a free that could not claim a position is reported: a full ring, or
 * no ring in use. */
static __always_inline u64 ring_full(void)
{
    return __atomic_load_n(&hp_fork_page.ring_on, __ATOMIC_RELAXED) &&
                   __atomic_load_n(&hp_sampler_config.free_ring, __ATOMIC_RELAXED)
               ? HP_FREED_RING_FULL
               : HP_FREED;
}

/* Writes `ptr` (0: nothing was freed) at the claimed position `p`: the
 * pointer first, then the position that says it is there. */
static void ring_publish(u64 p, u64 ptr)
{
    u32 i = (u32)(p & (HP_FREE_RING_SIZE - 1));
    __atomic_store_n(&hp_free_ring.ptr[i], ptr, __ATOMIC_RELAXED);
    __atomic_store_n(&hp_free_ring.pos[i], p + 1, __ATOMIC_RELEASE);
}

/* A sampled pointer is about to be freed: into the ring (before the real
 * free, so that its position is claimed before the memory can be handed
 * out again), or reported through the trap when the ring is full. */
static __attribute__((noinline)) void free_sampled(u64 ptr)
{
    if (!filter_take(ptr))
        return;
    u64 p = ring_claim();
    if (p != ~0ULL)
        ring_publish(p, ptr);
    else
        hp_report_free(ptr, ring_full());
}

/* The caller's return address and its stack pointer at the allocator's
 * entry: the slot's call landed here, so the CFA is that sp + 8. */
#define CALLER_RET() ((u64)__builtin_return_address(0))
#define CALLER_SP() ((u64)__builtin_dwarf_cfa() - 8)

/* n * m, or ~0 when it overflows (the call fails and allocates nothing). */
static __always_inline u64 array_size(u64 n, u64 m)
{
    u64 r;
    return __builtin_mul_overflow(n, m, &r) ? ~0ULL : r;
}

/* The function entry E's slots held. Every entry takes at most four
 * integer arguments and returns one integer or pointer (or nothing): the
 * wrappers pass all four registers through, the unused ones unread. */
typedef u64 (*entry_fn)(u64 a, u64 b, u64 c, u64 d);
#define ORIG(E) ((entry_fn)hp_sampler_config.orig[E])

/* The size in bytes a call of `kind` asks for; a constant kind folds it. */
static __always_inline u64 size_of_call(u32 kind, u64 a, u64 b, u64 c)
{
    switch (kind) {
    case HP_CALLOC:
        return array_size(a, b);
    case HP_REALLOC:
    case HP_ALIGNED_ALLOC:
    case HP_XALLOCX:
        return b;
    case HP_REALLOCARRAY:
        return array_size(b, c);
    case HP_POSIX_MEMALIGN:
        return c;
    default:
        return a;
    }
}

/* The block a call of `kind` resizes, or 0. */
static __always_inline u64 old_of_call(u32 kind, u64 a)
{
    return kind == HP_REALLOC || kind == HP_REALLOCARRAY ? a : 0;
}

/*
 * The slow path of an allocating call: its countdown ran out (`expired`:
 * countdown_expired() draws the next wait and says whether it is sampled),
 * or it resizes a sampled block. A resize that succeeds frees OLD and
 * allocates anew, as the BPF side counts it. A sampled OLD leaves the filter and claims its ring
 * position before the call, which may free it (another thread may be
 * handed that address before we are back); the entry is written after,
 * with 0 if the call failed and OLD is still what it was.
 */
static __attribute__((noinline)) u64 slow_alloc(u32 entry, u32 kind, u64 ret, u64 sp, u64 size,
                                                int expired, u64 a, u64 b, u64 c, u64 d)
{
    int take = expired && countdown_expired(my_slot(), size);
    u64 old = old_of_call(kind, a);
    int took = old && filter_take(old);
    u64 at = took ? ring_claim() : ~0ULL;
    u64 p = ORIG(entry)(a, b, c, d);
    int freed = took && (p || size == 0);
    if (took && !freed)
        filter_add(old); /* it failed: OLD is still the live sample */
    if (at != ~0ULL)
        ring_publish(at, freed ? old : 0);
    else if (freed)
        hp_report_free(old, ring_full());
    if (maybe_sampled(p))
        reused(p);
    if (take)
        sampled(p, size, kind, ret, sp);
    return p;
}

/*
 * A wrapper of an allocating entry of `kind` returning a pointer.
 *
 * A call that is not sampled, and resizes no sampled block, jumps to the
 * allocator (a tail call): the wrapper leaves no frame, so the allocator
 * returns straight to its caller, and a debugger stopped in it walks the
 * stack exactly as in a process without the sampler (docs/sampler.md,
 * "Frames other tools can walk"). Only the slow path calls the allocator
 * and comes back.
 *
 * The slow path checks what it returns against the filter: a live
 * sample's address given out again was freed where no slot saw it. A
 * call that jumps to the allocator cannot look, so such a sample is taken
 * out when its address is next sampled or freed through a wrapper.
 */
#define WRAP_ALLOC(NAME, KIND)                                                           \
    HIDDEN u64 hp_wrap_##NAME(u64 a, u64 b, u64 c, u64 d)                                \
    {                                                                                    \
        u64 size = size_of_call(KIND, a, b, c);                                          \
        if (size == ~0ULL)                                                               \
            return ORIG(HP_E_##NAME)(a, b, c, d); /* n * m overflowed: nothing allocated */ \
        int expired = may_sample(KIND, size, CALLER_RET(), CALLER_SP());                 \
        if (unlikely(expired || maybe_sampled(old_of_call(KIND, a))))                   \
            return slow_alloc(HP_E_##NAME, KIND, CALLER_RET(), CALLER_SP(), size, expired, \
                              a, b, c, d);                                               \
        return ORIG(HP_E_##NAME)(a, b, c, d);                                            \
    }
#define WRAP_HP_MALLOC(NAME) WRAP_ALLOC(NAME, HP_MALLOC)
#define WRAP_HP_CALLOC(NAME) WRAP_ALLOC(NAME, HP_CALLOC)
#define WRAP_HP_REALLOC(NAME) WRAP_ALLOC(NAME, HP_REALLOC)
#define WRAP_HP_REALLOCARRAY(NAME) WRAP_ALLOC(NAME, HP_REALLOCARRAY)
#define WRAP_HP_ALIGNED_ALLOC(NAME) WRAP_ALLOC(NAME, HP_ALIGNED_ALLOC)
#define WRAP_HP_VALLOC(NAME) WRAP_ALLOC(NAME, HP_VALLOC)

/* posix_memalign(&p, align, size): the pointer is written, 0 returned. */
static __attribute__((noinline)) u64 slow_posix_memalign(u32 entry, u64 ret, u64 sp, u64 a,
                                                         u64 b, u64 c, u64 d)
{
    int take = countdown_expired(my_slot(), c);
    int rc = (int)ORIG(entry)(a, b, c, d);
    u64 p = rc == 0 ? *(u64 *)a : 0;
    if (maybe_sampled(p))
        reused(p);
    if (take)
        sampled(p, c, HP_POSIX_MEMALIGN, ret, sp);
    return (u64)(unsigned)rc;
}
#define WRAP_HP_POSIX_MEMALIGN(NAME)                                                     \
    HIDDEN u64 hp_wrap_##NAME(u64 a, u64 b, u64 c, u64 d)                                \
    {                                                                                    \
        if (unlikely(may_sample(HP_POSIX_MEMALIGN, c, CALLER_RET(), CALLER_SP())))        \
            return slow_posix_memalign(HP_E_##NAME, CALLER_RET(), CALLER_SP(), a, b, c, d); \
        return ORIG(HP_E_##NAME)(a, b, c, d);                                            \
    }

/*
 * xallocx(p, size, extra, flags) resizes p in place and returns its size,
 * at least `size` when it did (or p was that large already): the BPF side
 * counts that as p freed and allocated again at `size`. The old life
 * goes out through the ring (or the trap) before the new one is reported,
 * so that its ring position is below the new one's.
 */
static __attribute__((noinline)) u64 slow_xallocx(u32 entry, u64 ret, u64 sp, int expired,
                                                  u64 a, u64 b, u64 c, u64 d)
{
    int take = expired && countdown_expired(my_slot(), b);
    u64 r = ORIG(entry)(a, b, c, d);
    if (r < b)
        return r;
    if (maybe_sampled(a))
        free_sampled(a);
    if (take)
        sampled(a, b, HP_XALLOCX, ret, sp);
    return r;
}
#define WRAP_HP_XALLOCX(NAME)                                                            \
    HIDDEN u64 hp_wrap_##NAME(u64 a, u64 b, u64 c, u64 d)                                \
    {                                                                                    \
        int expired = may_sample(HP_XALLOCX, b, CALLER_RET(), CALLER_SP());              \
        if (likely(!expired && !maybe_sampled(a)))                                       \
            return ORIG(HP_E_##NAME)(a, b, c, d);                                        \
        return slow_xallocx(HP_E_##NAME, CALLER_RET(), CALLER_SP(), expired, a, b, c, d); \
    }

/*
 * operator new may throw (std::bad_alloc, or whatever a new_handler
 * throws), and the unwinder cannot walk a frame of ours: no loader list
 * names this code, so its FDEs are never found and the throw would end
 * in std::terminate. So a call not sampled jumps to the real function
 * (no frame of ours left), and a sampled one calls the nothrow form of
 * the same operator, which catches inside its own frame; a null result
 * from it then jumps to the throwing one, to throw from where the program
 * expects. The nothrow form of each throwing operator (0: it is one):
 */
static __always_inline u32 nothrow_of(u32 e)
{
    switch (e) {
    case HP_E__Znwm: return HP_E__ZnwmRKSt9nothrow_t;
    case HP_E__Znam: return HP_E__ZnamRKSt9nothrow_t;
    case HP_E__ZnwmSt11align_val_t: return HP_E__ZnwmSt11align_val_tRKSt9nothrow_t;
    case HP_E__ZnamSt11align_val_t: return HP_E__ZnamSt11align_val_tRKSt9nothrow_t;
    case HP_E_tc_new: return HP_E_tc_new_nothrow;
    case HP_E_tc_newarray: return HP_E_tc_newarray_nothrow;
    case HP_E_tc_new_aligned: return HP_E_tc_new_aligned_nothrow;
    case HP_E_tc_newarray_aligned: return HP_E_tc_newarray_aligned_nothrow;
    default: return 0;
    }
}

/* Whether a throwing operator new's form takes an alignment (its nothrow
 * form then wants the std::nothrow_t reference third, not second). */
static __always_inline int aligned_new(u32 e)
{
    return e == HP_E__ZnwmSt11align_val_t || e == HP_E__ZnamSt11align_val_t ||
           e == HP_E_tc_new_aligned || e == HP_E_tc_newarray_aligned;
}

/* A std::nothrow_t to refer to: an empty struct, only its address is passed. */
static const char nothrow_tag;

/* The call of an operator new whose countdown ran out: 0 if it must be
 * made by the throwing form (not sampled after all, the nothrow one
 * failed, or it is not bound). */
static __attribute__((noinline)) u64 slow_new(u32 entry, u32 kind, u64 ret, u64 sp, u64 a, u64 b,
                                              u64 c, u64 d)
{
    if (!countdown_expired(my_slot(), a))
        return 0;
    u32 nt = nothrow_of(entry);
    u64 p;
    if (!nt)
        p = ORIG(entry)(a, b, c, d);
    else if (!hp_sampler_config.orig[nt])
        return 0;
    else if (aligned_new(entry))
        p = ORIG(nt)(a, b, (u64)&nothrow_tag, d);
    else
        p = ORIG(nt)(a, (u64)&nothrow_tag, c, d);
    if (maybe_sampled(p))
        reused(p);
    sampled(p, a, kind, ret, sp);
    return p;
}
#define WRAP_NEW(NAME, KIND)                                                             \
    HIDDEN u64 hp_wrap_##NAME(u64 a, u64 b, u64 c, u64 d)                                \
    {                                                                                    \
        if (likely(!may_sample(KIND, a, CALLER_RET(), CALLER_SP())))                     \
            return ORIG(HP_E_##NAME)(a, b, c, d);                                        \
        u64 p = slow_new(HP_E_##NAME, KIND, CALLER_RET(), CALLER_SP(), a, b, c, d);      \
        if (p)                                                                           \
            return p;                                                                    \
        return ORIG(HP_E_##NAME)(a, b, c, d);                                            \
    }
#define WRAP_HP_NEW(NAME) WRAP_NEW(NAME, HP_NEW)
#define WRAP_HP_NEW_ARRAY(NAME) WRAP_NEW(NAME, HP_NEW_ARRAY)
#define WRAP_HP_NEW_TARGET(NAME) WRAP_NEW(NAME, HP_NEW_TARGET)

/* Frees: a sampled pointer is reported before the memory goes back, so
 * that another thread's next sample at that address is not taken out.
 * The call to the real function is a jump: no frame of ours stays. */
#define WRAP_HP_FREE(NAME)                                                               \
    HIDDEN u64 hp_wrap_##NAME(u64 a, u64 b, u64 c, u64 d)                                \
    {                                                                                    \
        if (unlikely(maybe_sampled(a)))                                                  \
            free_sampled(a);                                                             \
        return ORIG(HP_E_##NAME)(a, b, c, d);                                            \
    }

/* dlopen and dlmopen are wrapped in report.S. */
#define WRAP_HP_LOADER(NAME)

/* One wrapper per row of alloc_entries.h, as its kind says. */
#define WRAP_ROW(sym, kind, family) WRAP_##kind(sym)
HP_ALLOC_ENTRIES(WRAP_ROW)
