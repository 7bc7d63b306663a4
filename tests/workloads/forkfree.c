/*
 * forkfree.c - forks short-lived children that allocate and free for about
 * CHILD_MS ms, free everything they hold, and exit, for test_fork_children.py:
 * a child's kept profile must show nothing in use (issue 26, item 2).
 *
 * Given PROGRAM ARG..., each child instead churns for a random 0-CHILD_MS
 * ms and then execs it: its exec races with its attach
 * (test_fork_children.py: no attach error).
 *
 * Usage: forkfree WAVES PER_WAVE [PROGRAM ARG...]. Prints "ready <pid>"; on each line it
 * forks PER_WAVE children, prints "wave PID PID ...", waits for them and
 * prints "exited" (or "failed PID" first for a child that did not exit
 * with 0); after WAVES waves it prints "done" and exits on the next line.
 * The parent allocates nothing after "ready".
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "handshake.h"

/* How long a child allocates, and how many blocks it holds at most. */
#define CHILD_MS 100
#define HELD 256
#define MAX_PER_WAVE 64

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The child's allocations: blocks of 16 B to 64 KiB, HELD at a time, each
 * replaced by a new one, for `ms`; everything freed at the end. */
__attribute__((noinline)) static void child_churns(unsigned seed, unsigned ms)
{
    static void *held[HELD];
    uint64_t end = now_ns() + ms * 1000000ull;
    for (unsigned i = 0; now_ns() < end; i++) {
        unsigned k = (unsigned)rand_r(&seed) % HELD;
        free(held[k]);
        size_t size = 16 + (size_t)rand_r(&seed) % 65536;
        held[k] = malloc(size);
        handshake_touch(held[k], size);
        if (i % 64 == 0) { /* not only busy: a child that sleeps a little too */
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
        }
    }
    for (unsigned k = 0; k < HELD; k++) {
        free(held[k]);
        held[k] = NULL;
    }
}

int main(int argc, char **argv)
{
    if (argc < 3)
        handshake_die("usage: forkfree WAVES PER_WAVE [PROGRAM ARG...]");
    char **program = argc > 3 ? argv + 3 : NULL;
    int waves = atoi(argv[1]), per_wave = atoi(argv[2]);
    if (per_wave < 1 || per_wave > MAX_PER_WAVE)
        handshake_die("forkfree: PER_WAVE out of range");
    handshake_ready();
    for (int w = 0; w < waves; w++) {
        if (!handshake_wait_line())
            return 1;
        pid_t kids[MAX_PER_WAVE];
        char line[16 + MAX_PER_WAVE * 12];
        size_t len = (size_t)snprintf(line, sizeof(line), "wave");
        for (int i = 0; i < per_wave; i++) {
            kids[i] = fork();
            if (kids[i] < 0)
                handshake_die("forkfree: fork failed");
            if (kids[i] == 0 && program) {
                unsigned seed = (unsigned)getpid();
                child_churns(seed, (unsigned)rand_r(&seed) % CHILD_MS);
                execv(program[0], program);
                _exit(3);
            }
            if (kids[i] == 0) {
                child_churns((unsigned)getpid(), CHILD_MS);
                _exit(0);
            }
            len += (size_t)snprintf(line + len, sizeof(line) - len, " %d", (int)kids[i]);
        }
        line[len++] = '\n';
        if (write(1, line, len) != (ssize_t)len)
            return 2;
        for (int i = 0; i < per_wave; i++) {
            int status;
            if (waitpid(kids[i], &status, 0) != kids[i] || !WIFEXITED(status) ||
                WEXITSTATUS(status) != 0)
                handshake_say_pid("failed", (long)kids[i]);
        }
        if (write(1, "exited\n", 7) != 7)
            return 2;
    }
    if (!handshake_wait_line())
        return 1;
    handshake_done();
    handshake_wait_line();
    return 0;
}
