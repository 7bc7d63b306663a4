/*
 * spawn_with_pid.c - runs a program as a process with a chosen pid, for the
 * pid reuse test of tests/integration/test_service.py: the pid of a process
 * that just exited is given to a new one before the daemon's reaper notices.
 *
 * Usage: spawn_with_pid PID PROGRAM [ARG]...
 *
 * clone3() with set_tid (Linux 5.5+; root in the initial pid namespace,
 * CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE) makes a child with pid PID, which
 * execs PROGRAM with stdin, stdout and stderr inherited; this process waits
 * for it and exits with its status (128 + the signal if it was killed).
 * Exits with 125 and a reason on stderr if the pid cannot be had (EEXIST:
 * it is taken).
 */
#include <errno.h>
#include <linux/sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: spawn_with_pid PID PROGRAM [ARG]...\n");
        return 125;
    }
    char *end;
    long want = strtol(argv[1], &end, 10);
    if (*end != '\0' || want <= 1) {
        fprintf(stderr, "spawn_with_pid: bad pid '%s'\n", argv[1]);
        return 125;
    }
    pid_t tid = (pid_t)want;
    struct clone_args args;
    memset(&args, 0, sizeof(args));
    args.exit_signal = SIGCHLD;
    args.set_tid = (uint64_t)(uintptr_t)&tid;
    args.set_tid_size = 1;
    long child = syscall(SYS_clone3, &args, sizeof(args));
    if (child < 0) {
        fprintf(stderr, "spawn_with_pid: clone3 with pid %ld: %s\n", want, strerror(errno));
        return 125;
    }
    if (child == 0) {
        execv(argv[2], argv + 2);
        fprintf(stderr, "spawn_with_pid: exec %s: %s\n", argv[2], strerror(errno));
        _exit(126);
    }
    int status;
    while (waitpid((pid_t)child, &status, 0) < 0) {
        if (errno != EINTR) {
            fprintf(stderr, "spawn_with_pid: waitpid: %s\n", strerror(errno));
            return 125;
        }
    }
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}
