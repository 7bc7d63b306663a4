/*
 * thread_stop.h - stops one thread of a process with ptrace, chosen so
 * that running our code on it is safe, runs system calls and a function
 * of the sampler in it, and lets it go as it was. The process's other
 * threads run on throughout: what the sampler changes (relocation slots)
 * needs no thread stopped.
 *
 * Seizing (not attaching) sends no SIGSTOP, and no PTRACE_O_EXITKILL is
 * set: if heapprofd dies while the thread is stopped, the kernel detaches
 * it and it runs on (the stub of remote_stub.h returns it to where it
 * was). Every wait is bounded, and the caller runs all of this on a thread
 * of its own (inject.c): a ptrace relation ends with its tracer thread, so
 * no error path can leave the thread stopped.
 *
 * The held thread runs our calls with every signal blocked (its mask set
 * with ptrace, and put back by the stub if we die): a signal that arrives
 * meanwhile stays pending, with its siginfo, and is delivered once the
 * thread is let go. One already being delivered when the thread stopped is
 * queued again, by the thread itself, with its siginfo.
 */
#ifndef HEAPPROF_THREAD_STOP_H
#define HEAPPROF_THREAD_STOP_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

/* How long a thread may take to stop, or a remote call to finish, before
 * we give up. */
#define THREAD_STOP_TIMEOUT_MS 1000
#define THREAD_CALL_TIMEOUT_MS 2000
/* Signals kept for the thread while it is held; a thread held a few ms
 * rarely gets one, and standard signals do not queue anyway. */
#define THREAD_MAX_HELD_SIGNALS 8
/* How long to wait for a thread that may be stopped unseen, when every
 * one is blocked in a call a stop would fail with EINTR. */
#define THREAD_SAFE_WAIT_MS 200
/* Threads tried before giving up: each is a candidate that turned out
 * unfit once stopped (inside an rseq critical section, a seccomp filter
 * installed meanwhile). */
#define THREAD_MAX_CANDIDATES 16

/* The one stopped thread. */
struct stopped_thread {
    pid_t pid, tid;
    struct user_regs_struct regs; /* as stopped: what it goes back to */
    siginfo_t held[THREAD_MAX_HELD_SIGNALS];
    size_t nheld;
    int lost_signals;             /* held signals beyond the array (counted, not kept) */
    int mem_fd;                   /* /proc/PID/mem, the caller's, for the stack writes */
    uint64_t sigmask;             /* its own signal mask, put back at release */
    int mask_set;                 /* every signal blocked while we hold it */
    int returned;                 /* back in its own code after a remote call: the stub put
                                   * its registers and mask back, release must not */
    int at_syscall_stop;          /* stopped at the exit of a system call of ours (else at
                                   * the interrupt stop it was seized in, or one after) */
    uint64_t stopped_at_ns;       /* when it was last stopped */
    uint64_t held_ns;             /* how long it was held in stops before that */
};

/*
 * Stops one thread of `pid` fit to run our calls: not traced, not under
 * seccomp (a filter could kill the process for our system calls), not
 * blocked in a system call that Linux does not restart after a stop
 * (thread_stop_syscall_safe()), not inside an rseq critical section, and
 * still a thread of `pid` once seized. `mem_fd` is /proc/PID/mem, open
 * read-write. Returns 0, or -errno with the reason: -ESRCH (gone), -EBUSY
 * (no thread fit: traced, seccomp), -EAGAIN (none fit now: blocked in such
 * calls), -ETIMEDOUT.
 */
int thread_stop_one(pid_t pid, int mem_fd, struct stopped_thread *st, char *err, size_t errlen);

/* Whether a thread blocked in system call `nr` may be stopped: Linux does
 * not restart some calls after a stop but fails them with EINTR (signal(7),
 * "Interruption of system calls and library functions by stop signals"). */
int thread_stop_syscall_safe(long nr);

/*
 * Runs system call `nr` with `args` in the stopped thread through the stub
 * at `stub` (remote_stub.h). Returns 0 and the call's result in `*ret` (a
 * -errno of the call itself included), or -errno when ptrace failed.
 */
int thread_remote_syscall(struct stopped_thread *st, uint64_t stub, long nr,
                          const uint64_t args[6], int64_t *ret);

/*
 * Calls `func(arg, cookie)` in the stopped thread with the stub's address
 * as its return address, and lets it run: `func` writes `cookie` to the
 * 8 bytes at `done` once it is over (sampler/report.S), and the thread is
 * stopped again after that. Returns 0, -EFAULT if the thread faulted in it
 * (it is put back as it was at release), or -ETIMEDOUT: then the thread is
 * still inside and must be let go with the stub left in place, to finish
 * by itself and return through it.
 */
int thread_remote_call(struct stopped_thread *st, uint64_t stub, uint64_t func, uint64_t arg,
                       uint64_t done);

/*
 * Lets the thread go: the signals held for it queued again through the
 * stub (0: none can be), its registers back, detached. Returns how long it
 * was held in stops, in ns (not the time it ran the installer, at its own
 * priority, which is time of its own).
 */
uint64_t thread_release(struct stopped_thread *st, uint64_t stub);

/* Lets a thread still inside a remote call go on by itself (after
 * -ETIMEDOUT): the stub returns it to where it was. */
void thread_abandon(struct stopped_thread *st);

int thread_get_regs(pid_t tid, struct user_regs_struct *r);
int thread_set_regs(pid_t tid, const struct user_regs_struct *r);

/*
 * For the tests of a daemon killed mid-injection: with the environment
 * variable HEAPPROFD_TEST_CRASH_AT=N, the N-th call of this function (at
 * each point where an injection has the target in an intermediate state)
 * SIGKILLs heapprofd itself. Compiled in only for test builds
 * (HEAPPROF_TEST_HOOKS); elsewhere it is nothing.
 */
#ifdef HEAPPROF_TEST_HOOKS
void thread_crash_point(void);
#else
static inline void thread_crash_point(void) {}
#endif

#endif
