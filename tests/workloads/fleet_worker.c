/*
 * fleet_worker.c - one worker of a fleet, for the fleet-scale tests
 * (tests/integration/test_fleet.py) and the backend benchmark
 * (tests/bench/fleet_bench.py): allocates one kept block of 64 bytes on
 * each of S distinct stacks, S from its first argument (default 512, at
 * most 1024). Distinct stacks come from a depth (0..63) times one of 16
 * leaf functions, so that none is deeper than the unwinder's limit
 * (HP_MAX_FRAMES) and none is cut to another's frames.
 *
 * After "done" it waits for a line; with the second argument "free-exit"
 * it then frees every block and exits at once, so that its last frees come
 * right before its exit (the kept profile must show no in-use).
 */
#include <stdlib.h>
#include <string.h>

#include "handshake.h"

#define MAX_STACKS 1024
#define LEAVES 16
#define BLOCK 64

/* The kept blocks: a global, so no allocation is dead code. */
void *blocks[MAX_STACKS];
static int next_block;

/* One kept block, from whichever leaf called. */
static void keep_one(void *p)
{
    handshake_touch(p, BLOCK);
    blocks[next_block++] = p;
}

/* The leaves: each its own call site of malloc. */
#define LEAF(n) \
    __attribute__((noinline)) void leaf##n(void) { keep_one(malloc(BLOCK)); }
LEAF(0) LEAF(1) LEAF(2) LEAF(3) LEAF(4) LEAF(5) LEAF(6) LEAF(7)
LEAF(8) LEAF(9) LEAF(10) LEAF(11) LEAF(12) LEAF(13) LEAF(14) LEAF(15)

static void (*const leaves[LEAVES])(void) = {
    leaf0, leaf1, leaf2, leaf3, leaf4, leaf5, leaf6, leaf7,
    leaf8, leaf9, leaf10, leaf11, leaf12, leaf13, leaf14, leaf15,
};

/* Calls leaf `which` at recursion depth `depth`. */
__attribute__((noinline)) void descend(int depth, int which)
{
    if (depth > 0) {
        descend(depth - 1, which);
        __asm__ volatile(""); /* keeps the call from becoming a jump */
        return;
    }
    leaves[which]();
}

int main(int argc, char **argv)
{
    int stacks = argc > 1 ? atoi(argv[1]) : 512;
    int free_exit = argc > 2 && strcmp(argv[2], "free-exit") == 0;
    if (stacks < 1 || stacks > MAX_STACKS)
        handshake_die("fleet_worker: stacks must be 1..1024");
    handshake_ready();
    if (!handshake_wait_line())
        return 0;
    for (int s = 0; s < stacks; s++)
        descend(s / LEAVES, s % LEAVES);
    handshake_done();
    handshake_wait_line();
    if (free_exit)
        for (int i = 0; i < next_block; i++)
            free(blocks[i]);
    return 0;
}
