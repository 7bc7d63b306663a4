/*
 * rounds.c - a workload that allocates and frees in three rounds, one per
 * "go", for the restart test of tests/integration/test_service.py (run with
 * --sample-interval 1): the daemon is restarted between two rounds, while
 * the workload is idle, and the in-use totals must stay exact across it.
 *
 * Each round prints "done"; after the third, a line (or EOF) lets it exit.
 * The expected totals per function are tabled in test_service.py; keep the
 * two in step.
 *
 *   round 1: round1_alloc:  300 x malloc(1000), kept
 *   round 2: round2_free:   frees the first 100 of round 1's blocks
 *            round2_alloc:  40 x malloc(5000), kept
 *   round 3: round3_free:   frees the rest of round 1's and all of round 2's
 *            round3_alloc:  10 x calloc(10, 100), kept
 */
#include <stdlib.h>

#include "handshake.h"

#define N_ROUND1 300
#define SIZE_ROUND1 1000
#define N_FREED_IN_ROUND2 100
#define N_ROUND2 40
#define SIZE_ROUND2 5000
#define N_ROUND3 10

/* Globals, so no allocation is dead code. */
void *round1_ptrs[N_ROUND1];
void *round2_ptrs[N_ROUND2];
void *round3_ptrs[N_ROUND3];

/* 300 x malloc(1000), kept. */
__attribute__((noinline)) void round1_alloc(void)
{
    for (int i = 0; i < N_ROUND1; i++) {
        round1_ptrs[i] = malloc(SIZE_ROUND1);
        handshake_touch(round1_ptrs[i], SIZE_ROUND1);
    }
}

/* Frees the first 100 blocks of round 1. */
__attribute__((noinline)) void round2_free(void)
{
    for (int i = 0; i < N_FREED_IN_ROUND2; i++) {
        free(round1_ptrs[i]);
        round1_ptrs[i] = NULL;
    }
}

/* 40 x malloc(5000), kept. */
__attribute__((noinline)) void round2_alloc(void)
{
    for (int i = 0; i < N_ROUND2; i++) {
        round2_ptrs[i] = malloc(SIZE_ROUND2);
        handshake_touch(round2_ptrs[i], SIZE_ROUND2);
    }
}

/* Frees the remaining blocks of rounds 1 and 2. */
__attribute__((noinline)) void round3_free(void)
{
    for (int i = N_FREED_IN_ROUND2; i < N_ROUND1; i++) {
        free(round1_ptrs[i]);
        round1_ptrs[i] = NULL;
    }
    for (int i = 0; i < N_ROUND2; i++) {
        free(round2_ptrs[i]);
        round2_ptrs[i] = NULL;
    }
}

/* 10 x calloc(10, 100), kept. */
__attribute__((noinline)) void round3_alloc(void)
{
    for (int i = 0; i < N_ROUND3; i++) {
        round3_ptrs[i] = calloc(10, 100);
        handshake_touch(round3_ptrs[i], 1000);
    }
}

int main(void)
{
    handshake_ready();
    if (!handshake_wait_line())
        return 1;
    round1_alloc();
    handshake_done();
    if (!handshake_wait_line())
        return 1;
    round2_free();
    round2_alloc();
    handshake_done();
    if (!handshake_wait_line())
        return 1;
    round3_free();
    round3_alloc();
    handshake_done();
    handshake_wait_line();
    return 0;
}
