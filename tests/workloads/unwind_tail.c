/*
 * unwind_tail.c - the tail call of the unwind workload (see unwind.c), built
 * with -O2 -fomit-frame-pointer -foptimize-sibling-calls: tail_caller's last
 * act is calling tail_callee, which gcc emits as a jmp, so tail_caller's
 * frame is gone when tail_callee runs and tail_callee returns straight into
 * tail_caller's caller (lib_to_exe in the library).
 */
#include <stdlib.h>

#include "handshake.h"

#define FRAME __attribute__((noinline, noclone))
#define BARRIER() __asm__ volatile("" ::: "memory")

#define SITE_COUNT 3
#define SIZE_TAIL 2222

void tail_caller(int arg);

/* Kept pointers: a global, so no allocation is dead code. */
void *tail_ptrs[SITE_COUNT];
volatile int tail_sink;

/* Site 2222, called by the tail-called function. */
FRAME void alloc_after_tail(void)
{
    for (int i = 0; i < SITE_COUNT; i++) {
        void *p = malloc(SIZE_TAIL);
        if (p == NULL)
            handshake_die("unwind: allocation failed");
        ((volatile char *)p)[0] = 1;
        tail_ptrs[i] = p;
    }
}

FRAME void tail_callee(int arg)
{
    alloc_after_tail();
    BARRIER();
    tail_sink += arg;
}

/* A sibling call: the call to tail_callee is its last act (a jmp). */
FRAME void tail_caller(int arg)
{
    tail_sink += arg;
    tail_callee(arg + 1);
}
