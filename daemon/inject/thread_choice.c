/*
 * thread_choice.c - which thread of a process may be stopped to run our
 * calls (see thread_choice.h): what /proc says of each thread (its tracer,
 * its seccomp mode, the system call it is blocked in and its arguments,
 * its signal masks), and how each blocked call goes on after a stop.
 *
 * This is the policy; thread_stop.c is the ptrace machinery that acts on
 * it. The two were one file: the policy reads only /proc and can be
 * changed (a filter evaluated, a call class added) without reading the
 * state machine that must hand every thread back as it was.
 */
#include "thread_choice.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

#include "thread_stop.h"

int thread_stop_syscall_safe(long nr)
{
    switch (nr) {
    case SYS_epoll_wait:
    case SYS_epoll_pwait:
    case SYS_epoll_pwait2:
    case SYS_semop:
    case SYS_semtimedop:
    case SYS_rt_sigtimedwait:
    case SYS_io_getevents:
    case SYS_io_pgetevents:
    /* Sockets fail with EINTR after a stop when they have a timeout
     * (SO_RCVTIMEO, SO_SNDTIMEO), which cannot be seen from outside. */
    case SYS_accept:
    case SYS_accept4:
    case SYS_recvfrom:
    case SYS_recvmsg:
    case SYS_recvmmsg:
    case SYS_sendto:
    case SYS_sendmsg:
    case SYS_sendmmsg:
    case SYS_connect:
        return 0;
    default:
        return 1;
    }
}

/* The value of field `field` of /proc/PID/task/TID/status, read as a
 * number in `base` into `*v`: 0, or -1 if the file or the field is not
 * there (the thread exited, or an older kernel). */
static int task_status_number(pid_t pid, pid_t tid, const char *field, int base,
                              unsigned long long *v)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, (int)tid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    int e = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, field, n) == 0 && line[n] == ':') {
            *v = strtoull(line + n + 1, NULL, base);
            e = 0;
            break;
        }
    fclose(f);
    return e;
}

long task_status_field(pid_t pid, pid_t tid, const char *field)
{
    unsigned long long v;
    return task_status_number(pid, tid, field, 10, &v) == 0 ? (long)v : -1;
}

/* The system call thread `tid` is blocked in: its number, -1 when it runs
 * or is blocked outside one, -2 when it cannot be read; its arguments in
 * `args`. */
static long task_syscall(pid_t pid, pid_t tid, uint64_t args[6])
{
    char path[64], buf[256];
    snprintf(path, sizeof(path), "/proc/%d/task/%d/syscall", (int)pid, (int)tid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -2;
    long nr = -2;
    memset(args, 0, 6 * sizeof(args[0]));
    if (fgets(buf, sizeof(buf), f)) {
        char *p = buf;
        nr = strncmp(buf, "running", 7) == 0 ? -1 : strtol(buf, &p, 10);
        for (int i = 0; i < 6 && nr >= 0; i++)
            args[i] = strtoull(p, &p, 16);
    }
    fclose(f);
    return nr < -1 ? -1 : nr;
}

/* How a call the thread is blocked in goes on after a stop. */
enum blocked_call {
    CALL_RESTARTS,      /* made again from its arguments, where it was */
    CALL_RESTART_BLOCK, /* made again from its restart block, which restart_interrupted_call()
                         * turns into the first kind, its timeout whole again */
    CALL_FAILS,         /* fails with EINTR, or cannot be made again (restart_syscall) */
};

/*
 * Whether call `nr`, one a stop fails with EINTR, waits here without a
 * timeout: made again from its arguments (restart_interrupted_call()), it
 * waits exactly as it would have, so a thread blocked in it is as fit as
 * one in a call the kernel restarts. An event loop's main thread often
 * waits so (PostgreSQL's postmaster, nginx's workers with no timer due).
 * With a timeout, made again it would wait its whole timeout anew: a
 * thread's timer late by up to that much, which is not done. Sockets'
 * timeouts (SO_RCVTIMEO) cannot be seen from outside.
 */
static bool waits_without_timeout(long nr, const uint64_t args[6])
{
    switch (nr) {
    case SYS_epoll_wait:
    case SYS_epoll_pwait:
        return (int)args[3] < 0;
    case SYS_epoll_pwait2:
    case SYS_semtimedop:
        return args[3] == 0; /* no struct timespec */
    case SYS_semop:
        return true;
    case SYS_rt_sigtimedwait:
        return args[2] == 0;
    case SYS_io_getevents:
    case SYS_io_pgetevents:
        return args[4] == 0;
    default:
        return false;
    }
}

/* How call `nr` with `args` goes on after a stop (kernel/time/hrtimer.c,
 * fs/select.c and kernel/futex/waitwake.c say which use a restart block). */
static enum blocked_call blocked_call_kind(long nr, const uint64_t args[6])
{
    if (waits_without_timeout(nr, args))
        return CALL_RESTARTS;
    if (!thread_stop_syscall_safe(nr) || nr == SYS_restart_syscall)
        return CALL_FAILS;
    switch (nr) {
    case SYS_nanosleep:
        return CALL_RESTART_BLOCK;
    case SYS_clock_nanosleep:
        return args[1] & 1 /* TIMER_ABSTIME */ ? CALL_RESTARTS : CALL_RESTART_BLOCK;
    case SYS_poll:
        return (int)args[2] >= 0 ? CALL_RESTART_BLOCK : CALL_RESTARTS;
    case SYS_futex:
        return args[3] ? CALL_RESTART_BLOCK : CALL_RESTARTS;
    default:
        return CALL_RESTARTS;
    }
}

uint64_t task_status_mask(pid_t pid, pid_t tid, const char *field)
{
    unsigned long long v;
    return task_status_number(pid, tid, field, 16, &v) == 0 ? (uint64_t)v : 0;
}

/* Candidate threads in order of preference: running, blocked outside a
 * system call, blocked in one that restarts, blocked in one that restarts
 * from its restart block (restart_interrupted_call()). */
size_t thread_candidates(pid_t pid, pid_t *out, size_t cap, int *skipped_seccomp,
                         int *tracer, int *skipped_syscall)
{
    enum { RUNNING, BLOCKED_OUTSIDE, IN_RESTARTING_CALL, IN_RESTART_BLOCK_CALL, CLASSES };
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d)
        return 0;
    pid_t cls[CLASSES][THREAD_MAX_CANDIDATES];
    size_t ncls[CLASSES] = {0};
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        pid_t tid = (pid_t)atoi(de->d_name);
        if (tid <= 0)
            continue;
        long tracer_pid = task_status_field(pid, tid, "TracerPid");
        if (tracer_pid > 0) {
            *tracer = (int)tracer_pid;
            continue;
        }
        if (task_status_field(pid, tid, "Seccomp") > 0) {
            (*skipped_seccomp)++;
            continue;
        }
        uint64_t args[6];
        long nr = task_syscall(pid, tid, args);
        int c = RUNNING;
        if (nr >= 0) {
            enum blocked_call k = blocked_call_kind(nr, args);
            if (k == CALL_FAILS) {
                (*skipped_syscall)++;
                continue;
            }
            c = k == CALL_RESTARTS ? IN_RESTARTING_CALL : IN_RESTART_BLOCK_CALL;
        } else {
            char state[64];
            snprintf(state, sizeof(state), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
            FILE *f = fopen(state, "re");
            char s = 'R';
            if (f) {
                if (fscanf(f, "%*d (%*[^)]) %c", &s) != 1)
                    s = 'R';
                fclose(f);
            }
            c = s == 'R' ? RUNNING : BLOCKED_OUTSIDE;
        }
        if (ncls[c] < THREAD_MAX_CANDIDATES)
            cls[c][ncls[c]++] = tid;
    }
    closedir(d);
    size_t n = 0;
    for (int c = 0; c < CLASSES; c++)
        for (size_t i = 0; i < ncls[c] && n < cap; i++)
            out[n++] = cls[c][i];
    return n;
}
