/*
 * unwind.c - a workload for the .eh_frame unwinder, for
 * tests/integration/test_unwind.py (run under --sample-interval 1 and under
 * gdb, whose backtraces at the same malloc calls the test compares with the
 * sampled stacks).
 *
 * Built with -O2 -fomit-frame-pointer -g (see CMakeLists.txt), like most
 * distribution code: no frame pointers, so only CFI gets past a frame. Each
 * allocation site mallocs its own size, SITE_COUNT times, from a noinline
 * leaf that keeps the pointers in a global:
 *
 *   1111 deep:   main -> run_sites -> exe_chain_1 -> exe_chain_2 ->
 *                lib_chain_1 -> lib_chain_2 (libunwind_shlib.so) ->
 *                exe_callback -> recurse x5 -> vla_frame (a VLA: %rbp-based
 *                CFA) -> alloc_deep; 14 frames, crossing the library and
 *                back, with recursion.
 *   2222 tail:   main -> run_sites -> lib_to_exe (library) -> tail_caller,
 *                which jumps (a sibling call, unwind_tail.c) to tail_callee
 *                -> alloc_after_tail. tail_caller is on no stack: neither
 *                gdb's backtrace nor ours can show it.
 *   3333 alloca: main -> run_sites -> alloca_frame (alloca: %rbp-based CFA)
 *                -> alloc_under_alloca.
 *   4444 signal: main -> run_sites -> signal_chain_1 -> signal_chain_2 ->
 *                raise(SIGUSR1) ... on_sigusr1 -> alloc_in_handler: the
 *                handler's frames, the kernel's signal frame (__restore_rt),
 *                then the interrupted chain inside libc's raise.
 *   5555 lib:    main -> run_sites -> exe_chain_to_lib -> lib_alloc_chain
 *                -> lib_alloc (library), malloc called from the library.
 *
 * Every function is a real frame (noinline, noclone: no inlining, no
 * clones renamed .constprop/.isra) and every call that is not meant to be a
 * tail call is followed by a compiler barrier and a store, so -O2 cannot turn
 * it into a jump. Keep the sizes and chains in step with test_unwind.py.
 */
#include <alloca.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "handshake.h"
#include "unwind_shlib.h"

#define FRAME __attribute__((noinline, noclone))
#define BARRIER() __asm__ volatile("" ::: "memory")

#define SITE_COUNT 3 /* allocations per site */
#define SIZE_DEEP 1111
#define SIZE_ALLOCA 3333
#define SIZE_SIGNAL 4444
#define SIZE_LIB 5555
#define RECURSION_DEPTH 5

/* In unwind_tail.c: tail_caller jumps to tail_callee, which calls
 * alloc_after_tail (2222 bytes). */
void tail_caller(int arg);

/* Kept pointers: globals, so no allocation is dead code. */
void *deep_ptrs[SITE_COUNT];
void *alloca_ptrs[SITE_COUNT];
void *signal_ptrs[SITE_COUNT];

/* Written after calls so that no call is the last act of its function. */
volatile int unwind_sink;
/* Sizes of the variable-sized frames, read at run time. */
volatile int vla_bytes = 200;
volatile int alloca_bytes = 300;

/* Writes one byte of p; exits if p is NULL. */
static void keep(void **slot, void *p)
{
    if (p == NULL)
        handshake_die("unwind: allocation failed");
    ((volatile char *)p)[0] = 1;
    *slot = p;
}

/* Site 1111, at the bottom of the deep chain. */
FRAME void alloc_deep(void)
{
    for (int i = 0; i < SITE_COUNT; i++)
        keep(&deep_ptrs[i], malloc(SIZE_DEEP));
}

/* A frame whose size is known only at run time (a VLA). */
FRAME void vla_frame(int n)
{
    volatile char buf[n];
    for (int i = 0; i < n; i++)
        buf[i] = (char)i;
    alloc_deep();
    BARRIER();
    unwind_sink += buf[n - 1];
}

/* Recursion: RECURSION_DEPTH frames of recurse, then the VLA frame. */
FRAME void recurse(int level)
{
    if (level > 1)
        recurse(level - 1);
    else
        vla_frame(vla_bytes);
    BARRIER();
    unwind_sink += level;
}

/* Called back from the library (lib_chain_2). */
FRAME void exe_callback(int arg)
{
    recurse(RECURSION_DEPTH);
    BARRIER();
    unwind_sink += arg;
}

FRAME void exe_chain_2(int arg)
{
    lib_chain_1(exe_callback, arg);
    BARRIER();
    unwind_sink++;
}

FRAME void exe_chain_1(int arg)
{
    exe_chain_2(arg + 1);
    BARRIER();
    unwind_sink++;
}

/* Site 3333, under a frame that grew with alloca. */
FRAME void alloc_under_alloca(void)
{
    for (int i = 0; i < SITE_COUNT; i++)
        keep(&alloca_ptrs[i], malloc(SIZE_ALLOCA));
}

FRAME void alloca_frame(int n)
{
    volatile char *buf = alloca((size_t)n);
    for (int i = 0; i < n; i++)
        buf[i] = (char)i;
    alloc_under_alloca();
    BARRIER();
    unwind_sink += buf[n - 1];
}

/* Site 4444, in a signal handler (raise is synchronous: malloc is safe). */
FRAME void alloc_in_handler(void)
{
    for (int i = 0; i < SITE_COUNT; i++)
        keep(&signal_ptrs[i], malloc(SIZE_SIGNAL));
}

FRAME void on_sigusr1(int sig)
{
    alloc_in_handler();
    BARRIER();
    unwind_sink += sig;
}

FRAME void signal_chain_2(void)
{
    if (raise(SIGUSR1) != 0)
        handshake_die("unwind: raise failed");
    BARRIER();
    unwind_sink++;
}

FRAME void signal_chain_1(void)
{
    signal_chain_2();
    BARRIER();
    unwind_sink++;
}

/* Site 5555 is in the library; this is its caller in the executable. */
FRAME void exe_chain_to_lib(void)
{
    lib_alloc_chain(SITE_COUNT, SIZE_LIB);
    BARRIER();
    unwind_sink++;
}

FRAME void run_sites(void)
{
    exe_chain_1(1);
    BARRIER();
    lib_to_exe(tail_caller, 7);
    BARRIER();
    alloca_frame(alloca_bytes);
    BARRIER();
    signal_chain_1();
    BARRIER();
    exe_chain_to_lib();
    BARRIER();
    unwind_sink++;
}

int main(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sigusr1;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGUSR1, &sa, NULL) != 0)
        handshake_die("unwind: sigaction failed");

    handshake_ready();
    if (!handshake_wait_line())
        return 1;
    run_sites();
    handshake_done();
    handshake_wait_line();
    return 0;
}
