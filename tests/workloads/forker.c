/*
 * forker.c - forks a child that inherits whatever its parent's allocator
 * looks like at that moment, for test_inprocess.py: the parent is given the
 * in-process sampler first, then the child (named "hp_forked_child") is
 * picked up by a target rule, which adopts the patch it inherited.
 *
 * Protocol: "ready PID"; on a line it forks, prints "child PID", and the
 * child allocates and frees (pattern-checked blocks from its own function,
 * child_allocates) until its stdin, shared with the parent, has another
 * line; then both exit, the parent with the child's status.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "handshake.h"

#define BLOCKS 64

/* The child's work: every block holds its index, checked before it is freed. */
__attribute__((noinline)) static int child_allocates(void)
{
    static unsigned char *blocks[BLOCKS];
    for (long round = 0;; round++) {
        int i = (int)(round % BLOCKS);
        if (blocks[i]) {
            for (int k = 0; k < 256; k++)
                if (blocks[i][k] != (unsigned char)i)
                    return 1;
            free(blocks[i]);
        }
        blocks[i] = malloc(256);
        if (!blocks[i])
            return 1;
        memset(blocks[i], i, 256);
        if (round % 4096 == 0) {
            /* stdin readable: the test asks the child to stop */
            fd_set set;
            FD_ZERO(&set);
            FD_SET(0, &set);
            struct timeval now = {0, 0};
            if (select(1, &set, NULL, NULL, &now) > 0)
                return 0;
            usleep(1000);
        }
    }
}

int main(void)
{
    handshake_ready();
    if (!handshake_wait_line())
        return 0;
    pid_t c = fork();
    if (c == 0) {
        prctl(PR_SET_NAME, "hp_forked_child");
        _exit(child_allocates());
    }
    char line[32];
    int len = snprintf(line, sizeof(line), "child %d\n", (int)c);
    if (write(1, line, (size_t)len) != len)
        return 3;
    int status;
    if (c < 0 || waitpid(c, &status, 0) != c)
        return 2;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
