/*
 * exact.c - a workload whose every allocation is known, for the exact checks
 * of tests/integration/test_exact.py (run with --sample-interval 1).
 *
 * Each allocator entry point is called from its own named function, so the
 * leaf frame of each sample says which call made it. The expected totals per
 * function are tabled in test_exact.py; keep the two in step.
 *
 * Pointers are kept in global arrays and the memory is written, so the
 * compiler can neither drop nor merge an allocation (the build also passes
 * -fno-builtin). Frees are part of the scripted work, never left to exit.
 */
#include <stdlib.h>
#include <string.h>

#include "handshake.h"

#define N_SMALL 1000      /* malloc(100), kept */
#define N_BIG 10          /* malloc(100000), kept */
#define N_FREED 500       /* malloc(64), all freed */
#define N_CALLOC 200      /* calloc(4, 50), kept */
#define N_REALLOC 100     /* malloc(10) then realloc(p, 300), kept */
#define N_REALLOC_NULL 50 /* realloc(NULL, 128), kept */
#define N_MEMALIGN 20     /* posix_memalign(&p, 64, 256), kept */
#define N_ALIGNED 30      /* aligned_alloc(64, 512), kept */
#define N_REALLOCARRAY 40 /* reallocarray(NULL, 8, 16), kept */

/* Where the kept pointers live: globals, so no allocation is dead code. */
void *small_ptrs[N_SMALL];
void *big_ptrs[N_BIG];
void *freed_ptrs[N_FREED];
void *calloc_ptrs[N_CALLOC];
void *realloc_ptrs[N_REALLOC];
void *realloc_null_ptrs[N_REALLOC_NULL];
void *memalign_ptrs[N_MEMALIGN];
void *aligned_ptrs[N_ALIGNED];
void *reallocarray_ptrs[N_REALLOCARRAY];

/* 1000 x malloc(100), kept: 1000 objects, 100000 bytes. */
__attribute__((noinline)) void alloc_small(void)
{
    for (int i = 0; i < N_SMALL; i++) {
        small_ptrs[i] = malloc(100);
        handshake_touch(small_ptrs[i], 100);
    }
}

/* 10 x malloc(100000), kept: 10 objects, 1000000 bytes. */
__attribute__((noinline)) void alloc_big(void)
{
    for (int i = 0; i < N_BIG; i++) {
        big_ptrs[i] = malloc(100000);
        handshake_touch(big_ptrs[i], 100000);
    }
}

/* 500 x malloc(64), then all freed: 500 objects, 32000 bytes, nothing in use. */
__attribute__((noinline)) void alloc_freed(void)
{
    for (int i = 0; i < N_FREED; i++) {
        freed_ptrs[i] = malloc(64);
        handshake_touch(freed_ptrs[i], 64);
    }
    for (int i = 0; i < N_FREED; i++) {
        free(freed_ptrs[i]);
        freed_ptrs[i] = NULL;
    }
}

/* 200 x calloc(4, 50), kept: 200 objects, 40000 bytes. */
__attribute__((noinline)) void alloc_calloc(void)
{
    for (int i = 0; i < N_CALLOC; i++) {
        calloc_ptrs[i] = calloc(4, 50);
        handshake_touch(calloc_ptrs[i], 200);
    }
}

/*
 * 100 x (malloc(10), then realloc to 300), kept: 200 objects and 31000 bytes
 * allocated, 100 objects and 30000 bytes in use (realloc frees the old block).
 */
__attribute__((noinline)) void alloc_realloc(void)
{
    for (int i = 0; i < N_REALLOC; i++) {
        void *p = malloc(10);
        handshake_touch(p, 10);
        realloc_ptrs[i] = p;
        p = realloc(realloc_ptrs[i], 300);
        handshake_touch(p, 300);
        realloc_ptrs[i] = p;
    }
}

/* 50 x realloc(NULL, 128), kept: 50 objects, 6400 bytes. */
__attribute__((noinline)) void alloc_realloc_null(void)
{
    for (int i = 0; i < N_REALLOC_NULL; i++) {
        realloc_null_ptrs[i] = realloc(NULL, 128);
        handshake_touch(realloc_null_ptrs[i], 128);
    }
}

/* 20 x posix_memalign(&p, 64, 256), kept: 20 objects, 5120 bytes. */
__attribute__((noinline)) void alloc_posix_memalign(void)
{
    for (int i = 0; i < N_MEMALIGN; i++) {
        if (posix_memalign(&memalign_ptrs[i], 64, 256) != 0)
            handshake_die("exact: posix_memalign failed");
        handshake_touch(memalign_ptrs[i], 256);
    }
}

/* 30 x aligned_alloc(64, 512), kept: 30 objects, 15360 bytes. */
__attribute__((noinline)) void alloc_aligned(void)
{
    for (int i = 0; i < N_ALIGNED; i++) {
        aligned_ptrs[i] = aligned_alloc(64, 512);
        handshake_touch(aligned_ptrs[i], 512);
    }
}

/* 40 x reallocarray(NULL, 8, 16), kept: 40 objects, 5120 bytes. */
__attribute__((noinline)) void alloc_reallocarray(void)
{
    for (int i = 0; i < N_REALLOCARRAY; i++) {
        reallocarray_ptrs[i] = reallocarray(NULL, 8, 16);
        handshake_touch(reallocarray_ptrs[i], 128);
    }
}

int main(void)
{
    handshake_ready();
    if (!handshake_wait_line())
        return 1;
    alloc_small();
    alloc_big();
    alloc_freed();
    alloc_calloc();
    alloc_realloc();
    alloc_realloc_null();
    alloc_posix_memalign();
    alloc_aligned();
    alloc_reallocarray();
    handshake_done();
    handshake_wait_line();
    return 0;
}
