/*
 * forks.c - a process that forks a child which allocates a known set long
 * after the fork (test_events.py: a child of a profiled process is
 * profiled, exactly at interval 1).
 *
 * Usage: forks DELAY_MS [PROGRAM ARG...]. Prints "ready <pid>", waits for
 * "go", forks and prints "child <pid>". The child sleeps DELAY_MS, makes
 * FORK_BLOCKS allocations of FORK_BLOCK_SIZE bytes from child_alloc(),
 * keeps them, prints "done", and waits for a line (or EOF) on stdin; given
 * a PROGRAM, it execs that at once instead (a fork+exec, as a shell runs a
 * command). The parent allocates nothing after the fork; it waits for a
 * line (or EOF), then ends the child and exits.
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "handshake.h"

#define FORK_BLOCKS 7
#define FORK_BLOCK_SIZE 2345

static void *blocks[FORK_BLOCKS];

/* The child's allocations. */
__attribute__((noinline)) void child_alloc(void)
{
    for (int i = 0; i < FORK_BLOCKS; i++) {
        blocks[i] = malloc(FORK_BLOCK_SIZE);
        if (!blocks[i])
            handshake_die("forks: allocation failed");
        ((volatile char *)blocks[i])[0] = 1;
    }
}

int main(int argc, char **argv)
{
    if (argc < 2)
        handshake_die("usage: forks DELAY_MS [PROGRAM ARG...]");
    long delay_ms = atol(argv[1]);
    handshake_ready();
    if (!handshake_wait_line())
        return 1;
    pid_t child = fork();
    if (child < 0)
        handshake_die("forks: fork failed");
    if (child == 0 && argc > 2) {
        execv(argv[2], argv + 2);
        handshake_die("forks: exec failed");
    }
    if (child == 0) {
        struct timespec ts = {delay_ms / 1000, (delay_ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0)
            ;
        child_alloc();
        handshake_done();
        handshake_wait_line();
        _exit(0);
    }
    handshake_say_pid("child", (long)child);
    handshake_wait_line();
    kill(child, SIGTERM);
    int status;
    waitpid(child, &status, 0);
    return 0;
}
