/*
 * test_sampling_math.c - checks the BPF side's integer sampling arithmetic
 * (bpf/sampling_math.h) against libm: the exponential waits have the right
 * distribution and the weights are 1/(1-exp(-s/R)) to within 1e-4.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "check.h"
#include "sampling_tables.h"

static __u32 log2_table[HP_LOG2_TABLE_LEN];
static __u64 weight_table[HP_WEIGHT_TABLE_LEN];

/* A fixed xorshift generator, so a failure can be reproduced. */
static uint32_t next_random(uint64_t *state)
{
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    return (uint32_t)(x >> 32);
}

static void waits_follow_minus_log_of_the_uniform(void)
{
    const uint64_t interval = 524288;
    uint32_t rnds[] = {0, 1, 2, 1000, 0x7fffffffu, 0x80000000u, 0xdeadbeefu, 0xfffffffeu,
                       0xffffffffu};
    for (size_t i = 0; i < sizeof(rnds) / sizeof(rnds[0]); i++) {
        double u = (rnds[i] + 0.5) / 4294967296.0;
        double want = -log(u) * (double)interval;
        double got = (double)hp_exp_wait(rnds[i], interval, log2_table);
        /* Waits are whole bytes, at least 1: below a byte only that much error is possible. */
        double err = fabs(got - want) <= 1.0 ? 0 : fabs(got - want) / want;
        if (err > 1e-5)
            fprintf(stderr, "rnd %u: wait %.1f, want %.1f (relative error %.2g)\n", rnds[i], got,
                    want, err);
        CHECK(err <= 1e-5);
    }
}

static void waits_average_the_interval(void)
{
    /* The mean of N exponential waits has standard deviation R/sqrt(N);
     * 5 sigma keeps a correct implementation from failing by chance. The
     * tail P(wait > R) = 1/e is checked the same way as a binomial. */
    const uint64_t interval = 524288;
    const int n = 1000000;
    uint64_t state = 0x9e3779b97f4a7c15ULL;
    double sum = 0;
    int above = 0;
    for (int i = 0; i < n; i++) {
        uint64_t w = hp_exp_wait(next_random(&state), interval, log2_table);
        sum += (double)w;
        above += w > interval;
    }
    double mean = sum / n;
    double sigma = (double)interval / sqrt(n);
    fprintf(stderr, "mean wait %.1f, want %llu +- %.1f\n", mean, (unsigned long long)interval,
            5 * sigma);
    CHECK(fabs(mean - (double)interval) < 5 * sigma);
    double p = exp(-1.0);
    double tail_sigma = sqrt(n * p * (1 - p));
    CHECK(fabs(above - n * p) < 5 * tail_sigma);
}

/* Checks the objects and bytes weights of one (size, interval) against libm. */
static void check_weight(uint64_t size, uint64_t interval)
{
    double x = (double)(size ? size : 1) / (double)interval;
    double want = 1.0 / -expm1(-x);
    uint64_t w = hp_weight_objects(size, interval, weight_table);
    double got = (double)w / 65536.0;
    double err = fabs(got - want) / want;
    if (err > 1e-4)
        fprintf(stderr, "size %llu interval %llu: weight %.6f, want %.6f\n",
                (unsigned long long)size, (unsigned long long)interval, got, want);
    CHECK(err <= 1e-4);
    double bytes = (double)hp_weight_bytes(size, w) / 256.0;
    double want_bytes = (double)size * want;
    if (size > 0) {
        /* Bytes are kept in 1/256 units: a smaller error cannot be asked for. */
        double berr = fabs(bytes - want_bytes) / want_bytes;
        if (fabs(bytes - want_bytes) <= 1.0 / 256)
            berr = 0;
        if (berr > 1e-4)
            fprintf(stderr, "size %llu interval %llu: bytes %.3f, want %.3f\n",
                    (unsigned long long)size, (unsigned long long)interval, bytes, want_bytes);
        CHECK(berr <= 1e-4);
    }
}

static void weights_match_libm_across_sizes(void)
{
    const uint64_t intervals[] = {2, 4096, 524288, 1ULL << 32};
    for (size_t k = 0; k < sizeof(intervals) / sizeof(intervals[0]); k++) {
        uint64_t r = intervals[k];
        for (uint64_t s = 1; s < 40 * r && s < (1ULL << 40); s = s * 9 / 8 + 1)
            check_weight(s, r);
        check_weight(r - 1, r);
        check_weight(r, r);
        check_weight(r + 1, r);
        check_weight(24 * r - 1, r);
        check_weight(24 * r, r);
    }
}

static void interval_one_records_each_allocation_as_itself(void)
{
    for (uint64_t s = 0; s < 100000; s = s * 3 + 1) {
        uint64_t w = hp_weight_objects(s, 1, weight_table);
        CHECK_U64_EQ(w, 1ULL << HP_OBJ_SHIFT);
        CHECK_U64_EQ(hp_weight_bytes(s, w), s << HP_BYTES_SHIFT);
    }
}

static void huge_sizes_weigh_as_themselves_without_overflow(void)
{
    uint64_t w = hp_weight_objects(~0ULL, 524288, weight_table);
    CHECK_U64_EQ(w, 1ULL << HP_OBJ_SHIFT);
    CHECK_U64_EQ(hp_weight_bytes(~0ULL, w), HP_MAX_SIZE << HP_BYTES_SHIFT);
}

int main(void)
{
    sampling_fill_log2_table(log2_table);
    sampling_fill_weight_table(weight_table);
    RUN_TEST(waits_follow_minus_log_of_the_uniform);
    RUN_TEST(waits_average_the_interval);
    RUN_TEST(weights_match_libm_across_sizes);
    RUN_TEST(interval_one_records_each_allocation_as_itself);
    RUN_TEST(huge_sizes_weigh_as_themselves_without_overflow);
    return check_exit_code();
}
