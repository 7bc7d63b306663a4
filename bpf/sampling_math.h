/*
 * sampling_math.h - the integer arithmetic of Poisson sampling by bytes,
 * shared by the BPF programs (which have no floating point) and the unit
 * tests that check it against libm.
 *
 * Two things are computed:
 *  - the exponential wait before the next sample, R * -ln(U), from a 32-bit
 *    random number, through a table of log2 on [1, 2];
 *  - the weight of a sample of s bytes, 1 / (1 - exp(-s/R)) objects, from
 *    the Laurent series for s < R and a table with linear interpolation for
 *    R <= s < 24R; beyond that the weight is 1 (exp(-24) < 4e-11).
 * Tables are filled in userspace (daemon/bpfstate/sampling_tables.c) and passed to
 * the BPF side as read-only data. Both approximations err by less than
 * 1e-5 relative (see tests/unit/test_sampling_math.c), far below sampling
 * noise, so the estimates stay unbiased for practical purposes.
 */
#ifndef HEAPPROF_SAMPLING_MATH_H
#define HEAPPROF_SAMPLING_MATH_H

#include "heapprof.h"

/* log2(1 + i/2^HP_LOG2_STEP_BITS) for i = 0..2^HP_LOG2_STEP_BITS, in
 * units of 2^-HP_LOG2_FIX_BITS; between two entries the next
 * HP_LOG2_INTERP_BITS bits of the mantissa interpolate. The length is a
 * power of two so that a masked index is in bounds for the BPF verifier. */
#define HP_LOG2_STEP_BITS 8
#define HP_LOG2_INTERP_BITS 16
#define HP_LOG2_FIX_BITS 24
#define HP_LOG2_TABLE_LEN 512
_Static_assert(HP_IS_POW2(HP_LOG2_TABLE_LEN) && HP_LOG2_TABLE_LEN > (1 << HP_LOG2_STEP_BITS),
               "hp_exp_wait() masks indices up to 2^HP_LOG2_STEP_BITS with HP_LOG2_TABLE_LEN - 1");
_Static_assert(HP_LOG2_STEP_BITS + HP_LOG2_INTERP_BITS <= 64, "the mantissa has 64 bits");

/* 1/(1 - exp(-x)) for x = i/2^HP_WEIGHT_STEP_BITS, i = 0..HP_WEIGHT_TABLE_MAX,
 * in units of 2^-HP_OBJ_SHIFT; x itself is computed in units of
 * 2^-HP_X_FRAC_BITS. */
#define HP_X_FRAC_BITS 16
#define HP_WEIGHT_STEP_BITS 8
#define HP_WEIGHT_X_MAX 24
#define HP_WEIGHT_TABLE_MAX (HP_WEIGHT_X_MAX << HP_WEIGHT_STEP_BITS)
#define HP_WEIGHT_TABLE_LEN 8192
_Static_assert(HP_IS_POW2(HP_WEIGHT_TABLE_LEN) && HP_WEIGHT_TABLE_LEN > HP_WEIGHT_TABLE_MAX,
               "hp_weight_objects() masks indices up to HP_WEIGHT_TABLE_MAX with "
               "HP_WEIGHT_TABLE_LEN - 1");
_Static_assert(HP_X_FRAC_BITS == HP_OBJ_SHIFT,
               "the series adds terms in x's units to a weight in HP_OBJ_SHIFT units");
_Static_assert(HP_X_FRAC_BITS > HP_WEIGHT_STEP_BITS, "x has bits below a table step");

/* The largest sampling interval: keeps every product below 2^64. */
#define HP_MAX_INTERVAL (1ULL << 32)
/* Sizes are clamped here before weighting; no allocation is that large. */
#define HP_MAX_SIZE (1ULL << 47)

/* ln(2) in units of 2^-32. */
#define HP_LN2_FIX32 2977044472ULL

/* Position of the highest set bit of a non-zero value below 2^34. */
static __always_inline __u32 hp_msb34(__u64 v)
{
    __u32 e = 0;
    if (v >= (1ULL << 32)) {
        v >>= 32;
        e += 32;
    }
    if (v >= (1ULL << 16)) {
        v >>= 16;
        e += 16;
    }
    if (v >= (1ULL << 8)) {
        v >>= 8;
        e += 8;
    }
    if (v >= (1ULL << 4)) {
        v >>= 4;
        e += 4;
    }
    if (v >= (1ULL << 2)) {
        v >>= 2;
        e += 2;
    }
    if (v >= (1ULL << 1))
        e += 1;
    return e;
}

/*
 * The bytes until the next sample: interval * -ln(U) with U = (rnd + 0.5) / 2^32,
 * an exponential wait of mean `interval`.
 */
static __always_inline __u64 hp_exp_wait(__u32 rnd, __u64 interval, const volatile __u32 *log2_table)
{
    __u64 m = ((__u64)rnd << 1) | 1; /* 2 * (rnd + 0.5), in [1, 2^33) */
    __u32 e = hp_msb34(m);
    __u64 frac = e ? (m << (64 - e)) : 0; /* bits below the leading one */
    /* The top bits of the fraction pick a table step, the next ones interpolate. */
    __u32 idx = (__u32)(frac >> (64 - HP_LOG2_STEP_BITS)) & ((1u << HP_LOG2_STEP_BITS) - 1);
    __u64 rem = (frac >> (64 - HP_LOG2_STEP_BITS - HP_LOG2_INTERP_BITS)) &
                ((1ULL << HP_LOG2_INTERP_BITS) - 1);
    __u64 lo = log2_table[idx & (HP_LOG2_TABLE_LEN - 1)];
    __u64 hi = log2_table[(idx + 1) & (HP_LOG2_TABLE_LEN - 1)];
    __u64 log2_m = ((__u64)e << HP_LOG2_FIX_BITS) + lo + (((hi - lo) * rem) >> HP_LOG2_INTERP_BITS);
    __u64 neg_log2_u = (33ULL << HP_LOG2_FIX_BITS) - log2_m; /* -log2(U) */
    __u64 neg_ln_u = (neg_log2_u * HP_LN2_FIX32) >> 32;      /* -ln(U), same units */
    __u64 wait = (interval * neg_ln_u) >> HP_LOG2_FIX_BITS;
    return wait ? wait : 1;
}

/*
 * The number of allocations one sample of `size` bytes stands for,
 * 1 / (1 - exp(-size/interval)), in units of 2^-16. An interval of 1 means
 * every allocation is recorded, each as itself.
 */
static __always_inline __u64 hp_weight_objects(__u64 size, __u64 interval,
                                               const volatile __u64 *weight_table)
{
    const __u32 fb = HP_X_FRAC_BITS, below_step = HP_X_FRAC_BITS - HP_WEIGHT_STEP_BITS;
    if (interval <= 1)
        return 1ULL << HP_OBJ_SHIFT;
    if (size == 0)
        size = 1; /* malloc(0) returns an object; weigh it as one byte */
    if (size > HP_MAX_SIZE)
        size = HP_MAX_SIZE;
    if (size >= HP_WEIGHT_X_MAX * interval)
        return 1ULL << HP_OBJ_SHIFT;
    __u64 x = (size << fb) / interval; /* size/interval in 2^-HP_X_FRAC_BITS units */
    if (x < (1ULL << fb)) {
        /* 1/(1-e^-x) = 1/x + 1/2 + x/12 - x^3/720 + x^5/30240 - ... */
        __u64 x3 = (((x * x) >> fb) * x) >> fb;
        __u64 x5 = (((x3 * x) >> fb) * x) >> fb;
        return ((interval << HP_OBJ_SHIFT) / size) + (1ULL << (HP_OBJ_SHIFT - 1)) + x / 12 -
               x3 / 720 + x5 / 30240;
    }
    __u32 t = (__u32)(x >> below_step);
    if (t >= HP_WEIGHT_TABLE_MAX)
        return 1ULL << HP_OBJ_SHIFT;
    __u64 frac = x & ((1ULL << below_step) - 1);
    __u64 a = weight_table[t & (HP_WEIGHT_TABLE_LEN - 1)]; /* decreasing in t */
    __u64 b = weight_table[(t + 1) & (HP_WEIGHT_TABLE_LEN - 1)];
    return a - (((a - b) * frac) >> below_step);
}

/* The bytes one sample stands for, size * objects weight, in units of 2^-8. */
static __always_inline __u64 hp_weight_bytes(__u64 size, __u64 w_objects)
{
    if (size > HP_MAX_SIZE)
        size = HP_MAX_SIZE;
    if (w_objects == (1ULL << HP_OBJ_SHIFT))
        return size << HP_BYTES_SHIFT;
    /* Here size < 24 * interval <= 2^37 and w_objects < 2^49 / size, so the
     * product stays below 2^55. */
    return (size * w_objects + (1ULL << (HP_OBJ_SHIFT - HP_BYTES_SHIFT - 1))) >>
           (HP_OBJ_SHIFT - HP_BYTES_SHIFT);
}

#endif
