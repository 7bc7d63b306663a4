/*
 * two_rounds.c - a workload that allocates in two rounds, each after a "go"
 * line, for the min_age leak view of tests/integration/test_views.py:
 *   round 1: alloc_first, 100 x malloc(1000), kept
 *   round 2: alloc_second, 50 x malloc(2000), kept
 * It prints "done" after each round and exits at the next line or EOF.
 */
#include <stdlib.h>

#include "handshake.h"

#define N_FIRST 100
#define N_SECOND 50

/* The kept blocks: globals, so no allocation is dead code. */
void *first[N_FIRST];
void *second[N_SECOND];

/* Writes the block, so its allocation cannot be dropped; exits if it failed. */
static void touch(void *p)
{
    if (!p)
        handshake_die("two_rounds: malloc failed");
    ((volatile char *)p)[0] = 1;
}

/* Round 1: 100 x 1000 bytes, each malloc called from here (the leaf). */
__attribute__((noinline)) void alloc_first(void)
{
    for (int i = 0; i < N_FIRST; i++) {
        first[i] = malloc(1000);
        touch(first[i]);
    }
}

/* Round 2: 50 x 2000 bytes. */
__attribute__((noinline)) void alloc_second(void)
{
    for (int i = 0; i < N_SECOND; i++) {
        second[i] = malloc(2000);
        touch(second[i]);
    }
}

int main(void)
{
    handshake_ready();
    if (!handshake_wait_line())
        return 0;
    alloc_first();
    handshake_done();
    if (!handshake_wait_line())
        return 0;
    alloc_second();
    handshake_done();
    handshake_wait_line();
    return 0;
}
