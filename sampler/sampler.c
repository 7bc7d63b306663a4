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
 * function that may jump to another (realloc to malloc), to count that
 * continuation once, as the BPF side does. */
struct slot {
    long long countdown;
    u64 rng;
    u64 fwd_sp;  /* entry sp of the last realloc/reallocarray call, 0: none */
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
    if (kind == HP_REALLOC || kind == HP_REALLOCARRAY) {
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

/* The function entry E's slots held. */
#define ORIG(E, TYPE) ((TYPE)hp_sampler_config.orig[E])

/*
 * A wrapper of an allocating function NAME(PARAMS) returning a pointer,
 * with SIZE its size in bytes and OLD the block it resizes (realloc and
 * reallocarray; 0 for the others, which the compiler then drops).
 *
 * A call that is not sampled, and resizes no sampled block, jumps to the
 * allocator (a tail call): the wrapper leaves no frame, so the allocator
 * returns straight to its caller, and a debugger stopped in it walks the
 * stack exactly as in a process without the sampler (docs/sampler.md,
 * "Frames other tools can walk"). Only the slow path calls the allocator
 * and comes back: a sampled call, or a resize of a sampled block.
 *
 * A resize that succeeds frees OLD and allocates anew, as the BPF side
 * counts it. A sampled OLD leaves the filter and claims its ring position
 * before the call, which may free it (another thread may be handed that
 * address before we are back); the entry is written after, with 0 if the
 * call failed and OLD is still what it was.
 * The slow path checks what it returns against the filter: a live
 * sample's address given out again was freed where no slot saw it. A
 * call that jumps to the allocator cannot look, so such a sample is taken
 * out when its address is next sampled or freed through a wrapper.
 */
#define WRAP_ALLOC(NAME, ENTRY, KIND, SIZE, OLD, PARAMS, ARGS)                           \
    typedef void *(*NAME##_fn) PARAMS;                                                   \
    static __attribute__((noinline)) void *slow_##NAME(u64 ret, u64 sp, int expired,     \
                                                       _SPLICE PARAMS)                   \
    {                                                                                    \
        u64 size = (SIZE);                                                               \
        int take = expired && countdown_expired(my_slot(), size);                        \
        int took = (OLD) && filter_take((u64)(OLD));                                      \
        u64 at = took ? ring_claim() : ~0ULL;                                            \
        void *p = ORIG(ENTRY, NAME##_fn) ARGS;                                           \
        int freed = took && (p || size == 0);                                            \
        if (took && !freed)                                                              \
            filter_add((u64)(OLD)); /* it failed: OLD is still the live sample */         \
        if (at != ~0ULL)                                                                 \
            ring_publish(at, freed ? (u64)(OLD) : 0);                                    \
        else if (freed)                                                                  \
            hp_report_free((u64)(OLD), ring_full());                                     \
        if (maybe_sampled((u64)p))                                                       \
            reused((u64)p);                                                              \
        if (take)                                                                        \
            sampled((u64)p, size, KIND, ret, sp);                                        \
        return p;                                                                        \
    }                                                                                    \
    HIDDEN void *hp_wrap_##NAME PARAMS                                                   \
    {                                                                                    \
        u64 size = (SIZE);                                                               \
        if (size == ~0ULL)                                                               \
            return ORIG(ENTRY, NAME##_fn) ARGS; /* n * m overflowed: nothing allocated */ \
        int expired = may_sample(KIND, size, CALLER_RET(), CALLER_SP());                 \
        if (unlikely(expired || maybe_sampled((u64)(OLD))))                              \
            return slow_##NAME(CALLER_RET(), CALLER_SP(), expired, _SPLICE ARGS);        \
        return ORIG(ENTRY, NAME##_fn) ARGS;                                              \
    }
#define _SPLICE(...) __VA_ARGS__

WRAP_ALLOC(malloc, HP_E_MALLOC, HP_MALLOC, n, 0, (size_t n), (n))
WRAP_ALLOC(calloc, HP_E_CALLOC, HP_CALLOC, array_size(n, m), 0, (size_t n, size_t m), (n, m))
WRAP_ALLOC(aligned_alloc, HP_E_ALIGNED_ALLOC, HP_ALIGNED_ALLOC, n, 0, (size_t a, size_t n),
           (a, n))
WRAP_ALLOC(memalign, HP_E_MEMALIGN, HP_ALIGNED_ALLOC, n, 0, (size_t a, size_t n), (a, n))
WRAP_ALLOC(valloc, HP_E_VALLOC, HP_VALLOC, n, 0, (size_t n), (n))
WRAP_ALLOC(pvalloc, HP_E_PVALLOC, HP_VALLOC, n, 0, (size_t n), (n))
WRAP_ALLOC(realloc, HP_E_REALLOC, HP_REALLOC, n, old, (void *old, size_t n), (old, n))
WRAP_ALLOC(reallocarray, HP_E_REALLOCARRAY, HP_REALLOCARRAY, array_size(n, m), old,
           (void *old, size_t n, size_t m), (old, n, m))

typedef int (*posix_memalign_fn)(void **out, size_t a, size_t n);
static __attribute__((noinline)) int slow_posix_memalign(u64 ret, u64 sp, void **out, size_t a,
                                                         size_t n)
{
    int take = countdown_expired(my_slot(), n);
    int rc = ORIG(HP_E_POSIX_MEMALIGN, posix_memalign_fn)(out, a, n);
    if (rc == 0 && maybe_sampled((u64)*out))
        reused((u64)*out);
    if (rc == 0 && take)
        sampled((u64)*out, n, HP_POSIX_MEMALIGN, ret, sp);
    return rc;
}
HIDDEN int hp_wrap_posix_memalign(void **out, size_t a, size_t n)
{
    if (unlikely(may_sample(HP_POSIX_MEMALIGN, n, CALLER_RET(), CALLER_SP())))
        return slow_posix_memalign(CALLER_RET(), CALLER_SP(), out, a, n);
    return ORIG(HP_E_POSIX_MEMALIGN, posix_memalign_fn)(out, a, n);
}

/* Frees: a sampled pointer is reported before the memory goes back, so
 * that another thread's next sample at that address is not taken out. */
#define WRAP_FREE(NAME, ENTRY, PARAMS, ARGS)                                             \
    typedef void (*NAME##_fn) PARAMS;                                                    \
    HIDDEN void hp_wrap_##NAME PARAMS                                                    \
    {                                                                                    \
        if (unlikely(maybe_sampled((u64)p)))                                             \
            free_sampled((u64)p);                                                        \
        ORIG(ENTRY, NAME##_fn) ARGS;                                                     \
    }

WRAP_FREE(free, HP_E_FREE, (void *p), (p))
WRAP_FREE(free_sized, HP_E_FREE_SIZED, (void *p, size_t n), (p, n))
WRAP_FREE(free_aligned_sized, HP_E_FREE_ALIGNED_SIZED, (void *p, size_t a, size_t n), (p, a, n))
