/*
 * thread_stop.c - stopping a process's threads with ptrace, and system
 * calls run inside it (see thread_stop.h).
 *
 * How a thread is run through a system call of ours: registers saved,
 * orig_rax set to -1 so that the kernel does not restart the system call
 * the thread was interrupted in on our registers, rip at the `syscall` of
 * the stub of remote_stub.h (which returns the thread to where it was if
 * we die before we restore it), resumed to the call's entry stop and its
 * exit stop, registers restored.
 *
 * Why system call stops and never a single step: if heapprofd dies while
 * a thread sits in the SIGTRAP stop a single step ends in, the kernel
 * delivers that SIGTRAP when it releases the thread, and it dies (seen in
 * test_inprocess.py). A system call stop reports SIGTRAP|0x80 with
 * PTRACE_O_TRACESYSGOOD, which is no signal, and an interrupt stop none.
 * The interrupted call is then restarted by the kernel as usual when the
 * thread is released (its own rax and orig_rax are back).
 */
#include "thread_stop.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

void thread_crash_point(void)
{
    static long countdown = -1; /* -1: not read yet; 0: off */
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&lock);
    if (countdown < 0) {
        const char *v = getenv("HEAPPROFD_TEST_CRASH_AT");
        countdown = v ? atol(v) : 0;
        if (countdown < 0)
            countdown = 0;
    }
    int die = countdown > 0 && --countdown == 0;
    pthread_mutex_unlock(&lock);
    if (die)
        kill(getpid(), SIGKILL);
}


/* Waits for a ptrace stop or the end of `tid`, up to the timeout. Returns
 * 0 with the status, or -ETIMEDOUT, or -errno. */
static int wait_thread(pid_t tid, int *status)
{
    uint64_t deadline = monotonic_ns() + (uint64_t)THREAD_STOP_TIMEOUT_MS * 1000000u;
    for (unsigned spins = 0;; spins++) {
        pid_t r = waitpid(tid, status, __WALL | WNOHANG);
        if (r == tid)
            return 0;
        if (r < 0 && errno != EINTR)
            return -errno;
        if (monotonic_ns() > deadline)
            return -ETIMEDOUT;
        if (spins > 64) {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
}

static int seized(const struct stopped_process *sp, pid_t tid)
{
    for (size_t i = 0; i < sp->n; i++)
        if (sp->v[i].tid == tid)
            return 1;
    return 0;
}

/* Whether thread `tid` is gone or exiting (ptrace refuses a thread that
 * is exiting with EPERM, as it does a traced one). */
static int exiting(pid_t pid, pid_t tid)
{
    char path[64], line[128];
    snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, (int)tid);
    FILE *f = fopen(path, "re");
    if (!f)
        return 1;
    int dying = 0;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, "State:", 6) == 0)
            dying = strchr(line, 'Z') || strchr(line, 'X');
    fclose(f);
    return dying;
}

/* Seizes one thread and asks it to stop; 1 when seized, 0 when it is gone. */
static int seize_one(struct stopped_process *sp, pid_t tid, char *err, size_t errlen)
{
    if (ptrace(PTRACE_SEIZE, tid, 0, (void *)(long)PTRACE_O_TRACESYSGOOD) != 0) {
        int e = errno;
        if (e == ESRCH || (e == EPERM && exiting(sp->pid, tid)))
            return 0;
        snprintf(err, errlen, "ptrace seize thread %d of process %d: %s%s", (int)tid,
                 (int)sp->pid, strerror(e), e == EPERM ? " (traced by another, or ptrace refused to heapprofd)" : "");
        return e == EPERM ? -EBUSY : -e;
    }
    if (sp->n == sp->cap) {
        size_t cap = sp->cap ? 2 * sp->cap : 16;
        struct stopped_thread *v = realloc(sp->v, cap * sizeof(*v));
        if (!v) {
            ptrace(PTRACE_DETACH, tid, 0, 0);
            return -ENOMEM;
        }
        sp->v = v;
        sp->cap = cap;
    }
    sp->v[sp->n++] = (struct stopped_thread){.tid = tid};
    if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) != 0 && errno != ESRCH)
        return -errno;
    return 1;
}

/* Waits for threads [from, sp->n) to stop; drops those that exited. */
static int wait_stopped(struct stopped_process *sp, size_t from, char *err, size_t errlen)
{
    for (size_t i = from; i < sp->n;) {
        int status;
        int e = wait_thread(sp->v[i].tid, &status);
        if (e) {
            snprintf(err, errlen, "stop thread %d of process %d: %s", (int)sp->v[i].tid,
                     (int)sp->pid, strerror(-e));
            return e;
        }
        if (WIFEXITED(status) || WIFSIGNALED(status)) {
            sp->v[i] = sp->v[--sp->n];
            continue;
        }
        /* A signal-delivery stop: the signal is ours to deliver at release. */
        if (WIFSTOPPED(status) && (status >> 16) == 0 && WSTOPSIG(status) != SIGTRAP)
            sp->v[i].pending_sig = WSTOPSIG(status);
        i++;
    }
    return 0;
}

/*
 * Seizes every thread, round after round: all of a round's threads are
 * asked to stop before any is waited for, so that they stop side by side
 * (one at a time, a busy process's 16 threads took up to 40 ms each to be
 * scheduled into their stop here). A round finds new threads only if a
 * thread of the round before created them before it stopped.
 */
int thread_stop_all(pid_t pid, struct stopped_process *sp, char *err, size_t errlen)
{
    memset(sp, 0, sizeof(*sp));
    sp->pid = pid;
    sp->stopped_at_ns = monotonic_ns();
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    for (int round = 0; round < THREAD_STOP_MAX_ROUNDS; round++) {
        DIR *d = opendir(path);
        if (!d) {
            int e = errno == ENOENT ? -ESRCH : -errno;
            snprintf(err, errlen, "list the threads of process %d: %s", (int)pid, strerror(-e));
            thread_resume_all(sp);
            return e;
        }
        size_t before = sp->n;
        int e = 0;
        struct dirent *de;
        while (e >= 0 && (de = readdir(d)) != NULL) {
            pid_t tid = (pid_t)atoi(de->d_name);
            if (tid > 0 && !seized(sp, tid))
                e = seize_one(sp, tid, err, errlen);
        }
        closedir(d);
        if (e >= 0)
            e = wait_stopped(sp, before, err, errlen);
        if (e < 0) {
            thread_resume_all(sp);
            return e;
        }
        if (sp->n == before) {
            if (sp->n == 0) {
                snprintf(err, errlen, "process %d has no threads left", (int)pid);
                thread_resume_all(sp); /* frees the array its exited threads left */
                return -ESRCH;
            }
            return 0; /* every thread was stopped already: none can have appeared */
        }
    }
    snprintf(err, errlen, "process %d keeps creating threads", (int)pid);
    thread_resume_all(sp);
    return -EAGAIN;
}

uint64_t thread_resume_all(struct stopped_process *sp)
{
    for (size_t i = 0; i < sp->n; i++)
        ptrace(PTRACE_DETACH, sp->v[i].tid, 0, (void *)(long)sp->v[i].pending_sig);
    uint64_t took = monotonic_ns() - sp->stopped_at_ns;
    free(sp->v);
    sp->v = NULL;
    sp->n = sp->cap = 0;
    return took;
}

int thread_get_regs(pid_t tid, struct user_regs_struct *r)
{
    return ptrace(PTRACE_GETREGS, tid, 0, r) == 0 ? 0 : -errno;
}

int thread_set_regs(pid_t tid, const struct user_regs_struct *r)
{
    return ptrace(PTRACE_SETREGS, tid, 0, r) == 0 ? 0 : -errno;
}

/* Resumes thread `i` to its next system call stop (entry or exit); 0 or
 * -errno. A signal that stops it first is kept for its release. */
static int to_syscall_stop(struct stopped_process *sp, size_t i)
{
    pid_t tid = sp->v[i].tid;
    for (int tries = 0; tries < 8; tries++) {
        if (ptrace(PTRACE_SYSCALL, tid, 0, 0) != 0)
            return -errno;
        int status;
        int e = wait_thread(tid, &status);
        if (e)
            return e;
        if (!WIFSTOPPED(status))
            return -ESRCH;
        if (WSTOPSIG(status) == (SIGTRAP | 0x80))
            return 0;
        if ((status >> 16) == 0)
            sp->v[i].pending_sig = WSTOPSIG(status);
    }
    return -EAGAIN;
}

int thread_remote_syscall(struct stopped_process *sp, size_t i, uint64_t gadget, long nr,
                          const uint64_t args[6], int64_t *ret)
{
    pid_t tid = sp->v[i].tid;
    struct user_regs_struct saved, r;
    int e = thread_get_regs(tid, &saved);
    if (e)
        return e;
    r = saved;
    r.rax = (uint64_t)nr;
    r.orig_rax = (uint64_t)-1;
    r.rdi = args[0];
    r.rsi = args[1];
    r.rdx = args[2];
    r.r10 = args[3];
    r.r8 = args[4];
    r.r9 = args[5];
    r.rip = gadget;
    /* Below the red zone: the stub pushes the flags it restores. */
    r.rsp = (saved.rsp - 256) & ~15ULL;
    e = thread_set_regs(tid, &r);
    thread_crash_point(); /* pointed at the stub, not yet run */
    if (e == 0)
        e = to_syscall_stop(sp, i); /* entry */
    thread_crash_point(); /* at the stub's system call */
    if (e == 0)
        e = to_syscall_stop(sp, i); /* exit */
    thread_crash_point(); /* past it */
    if (e == 0)
        e = thread_get_regs(tid, &r);
    if (e == 0 && r.rip != gadget + 2)
        e = -EFAULT; /* not our system call's exit */
    *ret = (int64_t)r.rax;
    int e2 = thread_set_regs(tid, &saved);
    return e ? e : e2;
}
