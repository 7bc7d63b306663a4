/*
 * mix_bench.c - a malloc+free loop over a realistic mix of sizes, with a
 * working set of live blocks, for tests/bench/ring_bench.py: 95% of blocks
 * 16-4095 bytes, 4% 4-32 KiB, 1% 32-128 KiB (the mix of issue 23), LIVE
 * blocks alive at any time in the one thread.
 *
 * Usage: mix_bench PAIRS [LIVE]. Fills LIVE blocks, prints "ready <pid>",
 * waits for a line on stdin, then PAIRS times frees a block chosen at
 * random and allocates another in its place (writing one byte), and
 * prints "ns_per_pair <wall> cpu_ns_per_pair <cpu>". The random sequence
 * is the same every run (fixed seed), so runs compare the same calls.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define MAX_LIVE 100000

/* Through volatile pointers: every call reaches the allocator's slot. */
static void *(*volatile bench_malloc)(size_t) = malloc;
static void (*volatile bench_free)(void *) = free;

static uint64_t rng = 0x9e3779b97f4a7c15ULL;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* A size drawn from the mix. */
static size_t mix_size(void)
{
    uint64_t r = next();
    unsigned pct = (unsigned)(r % 100);
    uint64_t v = r >> 8;
    if (pct < 95)
        return 16 + v % (4096 - 16);
    if (pct < 99)
        return 4096 + v % (32768 - 4096);
    return 32768 + v % (131072 - 32768);
}

static uint64_t clock_ns(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    unsigned long pairs = strtoul(argv[1], NULL, 10);
    unsigned long live = argc > 2 ? strtoul(argv[2], NULL, 10) : 1000;
    if (live < 1 || live > MAX_LIVE)
        return 2;
    static void *blocks[MAX_LIVE];
    for (unsigned long i = 0; i < live; i++) {
        blocks[i] = bench_malloc(mix_size());
        ((volatile char *)blocks[i])[0] = 1;
    }
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    char line[64];
    if (!fgets(line, sizeof(line), stdin))
        return 1;
    uint64_t t0 = clock_ns(CLOCK_MONOTONIC), c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    for (unsigned long i = 0; i < pairs; i++) {
        unsigned long k = (unsigned long)(next() % live);
        bench_free(blocks[k]);
        blocks[k] = bench_malloc(mix_size());
        ((volatile char *)blocks[k])[0] = (char)i;
    }
    uint64_t c1 = clock_ns(CLOCK_THREAD_CPUTIME_ID), t1 = clock_ns(CLOCK_MONOTONIC);
    printf("ns_per_pair %.2f cpu_ns_per_pair %.2f\n", (double)(t1 - t0) / (double)pairs,
           (double)(c1 - c0) / (double)pairs);
    fflush(stdout);
    if (!fgets(line, sizeof(line), stdin))
        return 0;
    return 0;
}
