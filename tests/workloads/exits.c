/*
 * exits.c - a workload that keeps allocating until it is killed or its time
 * is up, for the exit and delta-profile checks of
 * tests/integration/test_errors.py.
 *
 * Usage: exits MILLISECONDS. It prints "ready <pid>", waits for "go", then
 * from alloc_forever makes one malloc(1000) (freed at once) about every
 * millisecond, and exits after MILLISECONDS. There is no "done".
 */
#include <stdlib.h>
#include <time.h>

#include "handshake.h"

#define SIZE_BLOCK 1000
#define PAUSE_NS 1000000L /* 1 ms between allocations: about 1000 a second */

/* The last block, written so its allocation cannot be elided. */
void *volatile last_block;

/* Returns CLOCK_MONOTONIC in milliseconds. */
static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Allocates and frees a 1000-byte block every millisecond until deadline_ms. */
__attribute__((noinline)) void alloc_forever(long long deadline_ms)
{
    const struct timespec pause = {0, PAUSE_NS};

    while (now_ms() < deadline_ms) {
        last_block = malloc(SIZE_BLOCK);
        if (last_block == NULL)
            handshake_die("exits: allocation failed");
        ((volatile char *)last_block)[0] = 1;
        free(last_block);
        nanosleep(&pause, NULL);
    }
}

int main(int argc, char **argv)
{
    if (argc != 2)
        handshake_die("usage: exits MILLISECONDS");
    long long lifetime_ms = strtoll(argv[1], NULL, 10);

    handshake_ready();
    if (!handshake_wait_line())
        return 1;
    alloc_forever(now_ms() + lifetime_ms);
    return 0;
}
