/*
 * static_alloc.c - a statically linked glibc workload for
 * tests/integration/test_runtimes.py, which strips a copy of it and keeps
 * its symbols in a separate debug file: the allocator of a stripped static
 * binary is found from a debug file with its build ID.
 *
 *   alloc_static   200 x malloc(500), kept
 */
#include <stdlib.h>

#include "handshake.h"

#define N_BLOCKS 200
#define SIZE_BLOCK 500

void *blocks[N_BLOCKS];

__attribute__((noinline)) void alloc_static(void)
{
    for (int i = 0; i < N_BLOCKS; i++)
        if (!(blocks[i] = malloc(SIZE_BLOCK)))
            handshake_die("static_alloc: malloc failed");
}

int main(void)
{
    handshake_ready();
    if (!handshake_wait_line())
        return 1;
    alloc_static();
    handshake_done();
    handshake_wait_line();
    return 0;
}
