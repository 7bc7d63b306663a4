/*
 * startup.c - a short-lived program that allocates from its first
 * millisecond: the exec-time attach measurement (tests/bench/exec_bench.py)
 * and test_events.py start it under a --comm rule.
 *
 * Usage: startup [BLOCKS [ALLOC_MS [LIFETIME_MS]]] (default 50 50 300).
 * From the start of main it makes BLOCKS allocations of STARTUP_BLOCK_SIZE
 * bytes from startup_block(), evenly spread over ALLOC_MS, keeps them, and
 * exits LIFETIME_MS after main started. It prints nothing: nothing else
 * allocates, so a profile at --sample-interval 1 holds exactly the blocks
 * that were made after the attach.
 */
#include <stdlib.h>
#include <time.h>

#include "handshake.h"

/* A size no other allocation of the program has. */
#define STARTUP_BLOCK_SIZE 1111
/* Blocks kept at most. */
#define STARTUP_MAX_BLOCKS 10000

static void *blocks[STARTUP_MAX_BLOCKS];

/* CLOCK_MONOTONIC in nanoseconds. */
static long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Sleeps until CLOCK_MONOTONIC reaches `when_ns`. */
static void sleep_until(long long when_ns)
{
    struct timespec ts = {(time_t)(when_ns / 1000000000LL), (long)(when_ns % 1000000000LL)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0)
        ;
}

/* One block, kept. */
__attribute__((noinline)) void startup_block(int i)
{
    blocks[i] = malloc(STARTUP_BLOCK_SIZE);
    if (!blocks[i])
        handshake_die("startup: allocation failed");
    ((volatile char *)blocks[i])[0] = 1;
}

int main(int argc, char **argv)
{
    long long start = now_ns();
    int nblocks = argc > 1 ? atoi(argv[1]) : 50;
    long long alloc_ns = (argc > 2 ? atoll(argv[2]) : 50) * 1000000LL;
    long long lifetime_ns = (argc > 3 ? atoll(argv[3]) : 300) * 1000000LL;
    if (nblocks < 1 || nblocks > STARTUP_MAX_BLOCKS || alloc_ns < 0 || lifetime_ns < alloc_ns)
        handshake_die("usage: startup [BLOCKS [ALLOC_MS [LIFETIME_MS]]]");
    for (int i = 0; i < nblocks; i++) {
        sleep_until(start + alloc_ns * i / nblocks);
        startup_block(i);
    }
    sleep_until(start + lifetime_ns);
    return 0;
}
