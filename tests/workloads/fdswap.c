/*
 * fdswap.c - a process that tries to make the daemon write a file it must
 * not, for test_inprocess_safety.py: a sibling that shares its descriptor
 * table (clone(CLONE_FILES), not a thread, so the injection never stops it)
 * watches the table, and the moment a memfd named heapprofd-sampler
 * appears, dup2()s the file named by argv[1] (opened read-only: root's and
 * world-readable) onto that number. Meanwhile the main thread allocates.
 *
 * Runs as an unprivileged user. Protocol: "ready PID", then it runs until
 * stdin closes.
 */
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "handshake.h"

static int victim_fd;

/* The sibling: swaps every sampler memfd it sees for the victim. */
static int swapper(void *arg)
{
    (void)arg;
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* not left spinning when the test kills the process */
    if (getppid() == 1)
        _exit(0);
    for (;;) {
        for (int fd = 3; fd < 64; fd++) {
            char link[64], target[256];
            snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
            ssize_t n = readlink(link, target, sizeof(target) - 1);
            if (n <= 0)
                continue;
            target[n] = '\0';
            if (strstr(target, "heapprofd-sampler"))
                dup2(victim_fd, fd);
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2)
        handshake_die("usage: fdswap VICTIM");
    victim_fd = open(argv[1], O_RDONLY);
    if (victim_fd < 0)
        handshake_die("open the victim");
    static char stack[1 << 16] __attribute__((aligned(16)));
    pid_t sib = clone(swapper, stack + sizeof(stack), CLONE_FILES | SIGCHLD, NULL);
    if (sib < 0)
        handshake_die("clone");
    handshake_ready();
    /* Allocate until stdin closes; a line also ends it. */
    int fl = fcntl(0, F_GETFL);
    fcntl(0, F_SETFL, fl | O_NONBLOCK);
    char c;
    while (read(0, &c, 1) != 0) {
        void *p = malloc(100);
        handshake_touch(p, 100);
        free(p);
        usleep(100);
    }
    kill(sib, SIGKILL);
    waitpid(sib, NULL, 0);
    return 0;
}
