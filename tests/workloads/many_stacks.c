/*
 * many_stacks.c - a workload with more distinct stacks than a small stack
 * map holds, for tests/integration/test_faults.py: a recursion to each depth
 * 0..N_DEPTHS-1 allocates PER_DEPTH blocks of 64 bytes at the bottom, so
 * every depth is its own stack. Every block is kept, so in-use equals
 * allocated. Total: N_DEPTHS * PER_DEPTH allocations.
 */
#include <stdlib.h>

#include "handshake.h"

#define N_DEPTHS 200
#define PER_DEPTH 10
#define BLOCK 64

/* The kept blocks: a global, so no allocation is dead code. */
void *blocks[N_DEPTHS * PER_DEPTH];
static int next_block;

/* Allocates PER_DEPTH blocks at recursion depth `depth`. */
__attribute__((noinline)) void descend(int depth)
{
    if (depth > 0) {
        descend(depth - 1);
        __asm__ volatile(""); /* keeps the call from becoming a jump */
        return;
    }
    for (int i = 0; i < PER_DEPTH; i++) {
        void *p = malloc(BLOCK);
        if (!p)
            handshake_die("many_stacks: malloc failed");
        ((volatile char *)p)[0] = 1;
        blocks[next_block++] = p;
    }
}

int main(void)
{
    handshake_ready();
    if (!handshake_wait_line())
        return 0;
    for (int d = 0; d < N_DEPTHS; d++)
        descend(d);
    handshake_done();
    handshake_wait_line();
    return 0;
}
