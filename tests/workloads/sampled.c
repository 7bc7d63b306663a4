/*
 * sampled.c - a workload with many allocations of a few sizes, for the
 * statistical checks of tests/integration/test_sampled.py (run at the default
 * sample interval, 524288 bytes).
 *
 *   function     calls     size      kept after "done"
 *   alloc_4k     200000    4096      100000 (every other one is freed)
 *   alloc_1m     500       1048576   0 (each freed at once)
 *   alloc_tiny   2000000   16        0 (each freed at once)
 *
 * Peak memory is about 820 MB of 4 KiB blocks (half of it freed before
 * "done"); the other two never hold more than one block.
 */
#include <stdlib.h>

#include "handshake.h"

#define N_4K 200000
#define SIZE_4K 4096
#define N_1M 500
#define SIZE_1M (1 << 20)
#define N_TINY 2000000
#define SIZE_TINY 16

/* The 4 KiB blocks: a global, so no allocation is dead code. */
void *blocks_4k[N_4K];
/* The last short-lived block, written so its allocation cannot be elided. */
void *volatile last_block;

/* 200000 x malloc(4096), then frees every other one: 100000 stay in use. */
__attribute__((noinline)) void alloc_4k(void)
{
    for (int i = 0; i < N_4K; i++) {
        blocks_4k[i] = malloc(SIZE_4K);
        handshake_touch(blocks_4k[i], SIZE_4K);
    }
    for (int i = 0; i < N_4K; i += 2) {
        free(blocks_4k[i]);
        blocks_4k[i] = NULL;
    }
}

/* 500 x malloc(1 MiB), each freed at once: allocated, never in use at the end. */
__attribute__((noinline)) void alloc_1m(void)
{
    for (int i = 0; i < N_1M; i++) {
        last_block = malloc(SIZE_1M);
        handshake_touch(last_block, SIZE_1M);
        free(last_block);
    }
}

/* 2000000 x malloc(16), each freed at once. */
__attribute__((noinline)) void alloc_tiny(void)
{
    for (int i = 0; i < N_TINY; i++) {
        last_block = malloc(SIZE_TINY);
        handshake_touch(last_block, SIZE_TINY);
        free(last_block);
    }
}

int main(void)
{
    handshake_ready();
    if (!handshake_wait_line())
        return 1;
    alloc_4k();
    alloc_1m();
    alloc_tiny();
    handshake_done();
    handshake_wait_line();
    return 0;
}
