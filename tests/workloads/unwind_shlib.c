/*
 * unwind_shlib.c - libunwind_shlib.so, the shared library of the unwind
 * workload (see unwind.c), built like it with -O2 -fomit-frame-pointer -g:
 * frames of a second ELF file on the stack between frames of the executable,
 * and an allocation site inside the library (malloc called through its PLT).
 *
 * Every function is a real frame (noinline, noclone) and every call that
 * is not meant to be a tail call is followed by a compiler barrier, so -O2
 * cannot turn it into a jump.
 */
#include "unwind_shlib.h"

#include <stdlib.h>

#define FRAME __attribute__((noinline, noclone))
#define BARRIER() __asm__ volatile("" ::: "memory")

#define LIB_MAX_PTRS 16

/* Kept pointers: a global, so no allocation is dead code. */
void *lib_ptrs[LIB_MAX_PTRS];

/* Counters written after each call, so no call is the last act. */
volatile int lib_sink;

FRAME static void lib_chain_2(unwind_callback callback, int arg)
{
    callback(arg);
    BARRIER();
    lib_sink++;
}

FRAME void lib_chain_1(unwind_callback callback, int arg)
{
    lib_chain_2(callback, arg + 1);
    BARRIER();
    lib_sink++;
}

/* The allocation site inside the library. */
FRAME static void lib_alloc(int count, unsigned long size)
{
    for (int i = 0; i < count && i < LIB_MAX_PTRS; i++) {
        void *p = malloc(size);
        if (p == NULL)
            abort();
        ((volatile char *)p)[0] = 1;
        lib_ptrs[i] = p;
    }
}

FRAME void lib_alloc_chain(int count, unsigned long size)
{
    lib_alloc(count, size);
    BARRIER();
    lib_sink++;
}

FRAME void lib_to_exe(unwind_callback callback, int arg)
{
    callback(arg);
    BARRIER();
    lib_sink++;
}
