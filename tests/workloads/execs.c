/*
 * execs.c - a workload that allocates, then execs, for the exec test of
 * tests/integration/test_service.py (run with --sample-interval 1).
 *
 * Usage:
 *   execs PROGRAM [ARG]...  prints "ready <pid>", waits for "go", makes
 *                           100 x malloc(700) in before_exec_alloc (kept),
 *                           prints "done", waits for a line, then execs
 *                           PROGRAM with ARGs (argv[0] = PROGRAM).
 *   execs --after           prints "ready <pid>", waits for "go", makes
 *                           50 x malloc(900) in after_exec_alloc (kept),
 *                           prints "done", waits for a line and exits.
 * So `execs /proc/self/exe --after` execs itself (the same executable: the
 * daemon tells the exec from libc's new place), and `execs .../exact`
 * becomes another program.
 */
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

#include "handshake.h"

#define N_BEFORE 100
#define SIZE_BEFORE 700
#define N_AFTER 50
#define SIZE_AFTER 900

/* Globals, so no allocation is dead code. */
void *before_ptrs[N_BEFORE];
void *after_ptrs[N_AFTER];

/* 100 x malloc(700), kept until the exec. */
__attribute__((noinline)) void before_exec_alloc(void)
{
    for (int i = 0; i < N_BEFORE; i++) {
        before_ptrs[i] = malloc(SIZE_BEFORE);
        handshake_touch(before_ptrs[i], SIZE_BEFORE);
    }
}

/* 50 x malloc(900), kept. */
__attribute__((noinline)) void after_exec_alloc(void)
{
    for (int i = 0; i < N_AFTER; i++) {
        after_ptrs[i] = malloc(SIZE_AFTER);
        handshake_touch(after_ptrs[i], SIZE_AFTER);
    }
}

int main(int argc, char **argv)
{
    if (argc < 2)
        handshake_die("usage: execs PROGRAM [ARG]... | execs --after");
    int after = strcmp(argv[1], "--after") == 0;
    handshake_ready();
    if (!handshake_wait_line())
        return 1;
    if (after)
        after_exec_alloc();
    else
        before_exec_alloc();
    handshake_done();
    if (!handshake_wait_line())
        return 1;
    if (after)
        return 0;
    execv(argv[1], argv + 1);
    handshake_die("execs: execv failed");
    return 2;
}
