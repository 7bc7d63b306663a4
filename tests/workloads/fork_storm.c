/*
 * fork_storm.c - a process that allocates (so that the kernel optimizes
 * the probe on its sampler's report function, when it uses that one) and
 * then forks many children at once, each of which allocates and frees for
 * a while, for tests/integration/test_free_ring.py: a child inherits the
 * call to a [uprobes-trampoline] that fork() does not copy, and must never
 * reach it.
 *
 * Usage: fork_storm CHILDREN. Protocol: "ready PID"; on a line, allocates
 * WARMUP blocks, prints "warm", waits for a line, forks CHILDREN children,
 * each doing ROUNDS rounds of BLOCKS allocations and frees ROUND_MS apart
 * (so that the daemon attaches some of them while they run), waits for all
 * and prints "children N exited-0 M crashed K", then "done", and exits on
 * a line (or EOF).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "handshake.h"

#define MAX_CHILDREN 4096
#define WARMUP 1000
#define ROUNDS 20
#define BLOCKS 16
#define ROUND_MS 10

static void *(*volatile do_malloc)(size_t) = malloc;
static void (*volatile do_free)(void *) = free;
static void *warm[WARMUP];

__attribute__((noinline)) void parent_allocates(void)
{
    for (int i = 0; i < WARMUP; i++) {
        warm[i] = do_malloc(64 + (size_t)(i % 7) * 100);
        handshake_touch(warm[i], 64);
    }
}

__attribute__((noinline)) void child_allocates(void)
{
    void *b[BLOCKS];
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < BLOCKS; i++) {
            b[i] = do_malloc(32 + (size_t)i * 40);
            handshake_touch(b[i], 32);
        }
        for (int i = 0; i < BLOCKS; i++)
            do_free(b[i]);
        struct timespec ts = {0, ROUND_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    if (n < 1 || n > MAX_CHILDREN)
        handshake_die("usage: fork_storm CHILDREN (1-4096)");
    static pid_t kids[MAX_CHILDREN];
    handshake_ready();
    if (!handshake_wait_line())
        return 1;
    parent_allocates();
    printf("warm\n");
    fflush(stdout);
    if (!handshake_wait_line())
        return 1;
    int forked = 0;
    for (int c = 0; c < n; c++) {
        kids[c] = fork();
        if (kids[c] == 0) {
            child_allocates();
            _exit(0);
        }
        forked += kids[c] > 0;
    }
    int ok = 0, crashed = 0;
    for (int c = 0; c < n; c++) {
        int status;
        if (kids[c] <= 0 || waitpid(kids[c], &status, 0) != kids[c])
            continue;
        ok += WIFEXITED(status) && WEXITSTATUS(status) == 0;
        crashed += WIFSIGNALED(status);
    }
    printf("children %d exited-0 %d crashed %d\n", forked, ok, crashed);
    fflush(stdout);
    handshake_done();
    handshake_wait_line();
    return 0;
}
