/*
 * frames.c - a workload for tests/integration/test_frames.py: other tools
 * (gdb, perf) stopped in malloc must walk the same stack with the
 * in-process sampler as without it.
 *
 * After "go" it allocates FRAMES_SIZE bytes and frees them, for ever, from
 * main -> frames_loop -> frames_outer -> frames_inner -> frames_leaf, until
 * killed. Built like distribution code (-O2 -fomit-frame-pointer): no
 * frame pointer, so only CFI gets a debugger past a frame, and the size is
 * one no other malloc of the process asks for, so that a conditional
 * breakpoint stops only at this call. Keep the names and the size in step
 * with test_frames.py.
 */
#include <stdlib.h>

#include "handshake.h"

#define FRAME __attribute__((noinline, noclone))
#define BARRIER() __asm__ volatile("" ::: "memory")
#define FRAMES_SIZE 777

/* Where the last block was, so that the allocation is not dead code. */
void *volatile frames_sink;

FRAME void frames_leaf(void)
{
    void *p = malloc(FRAMES_SIZE);
    handshake_touch(p, FRAMES_SIZE);
    frames_sink = p;
    BARRIER();
    free(p);
    BARRIER();
}

FRAME void frames_inner(void)
{
    frames_leaf();
    BARRIER();
}

FRAME void frames_outer(void)
{
    frames_inner();
    BARRIER();
}

FRAME void frames_loop(void)
{
    for (;;) {
        frames_outer();
        BARRIER();
    }
}

int main(void)
{
    handshake_ready();
    if (!handshake_wait_line())
        return 0;
    frames_loop();
}
