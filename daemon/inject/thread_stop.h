/*
 * thread_stop.h - stops every thread of a process with ptrace (seize and
 * interrupt, until no new thread appears), runs system calls in one of
 * them, and lets them all go again as they were.
 *
 * Seizing (not attaching) sends no SIGSTOP, and no PTRACE_O_EXITKILL is
 * set: if heapprofd dies while a process is stopped, the kernel detaches
 * it and it runs on untouched. A signal that arrives while a thread is
 * stopped is kept and delivered when it is released.
 */
#ifndef HEAPPROF_THREAD_STOP_H
#define HEAPPROF_THREAD_STOP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

/* How long a thread may take to stop (one in an uninterruptible sleep
 * stops when it wakes) before we give up and let the others go. */
#define THREAD_STOP_TIMEOUT_MS 1000
/* Rounds of "seize the threads not yet seized": each round's threads were
 * created by threads still running in the round before. */
#define THREAD_STOP_MAX_ROUNDS 64

struct stopped_thread {
    pid_t tid;
    int pending_sig; /* a signal that arrived meanwhile, delivered at release */
};

/* The stopped threads of one process; owns its array. */
struct stopped_process {
    pid_t pid;
    struct stopped_thread *v;
    size_t n, cap;
    uint64_t stopped_at_ns;
};

/*
 * Seizes and stops every thread of `pid`. Returns 0, -EBUSY when the
 * process is already traced, -ESRCH when it is gone, -ETIMEDOUT, or
 * another -errno; on failure nothing stays stopped.
 */
int thread_stop_all(pid_t pid, struct stopped_process *sp, char *err, size_t errlen);

/* Releases every thread (with the signals kept for them); returns how long
 * since the first was asked to stop, in ns: the longest any was stopped. */
uint64_t thread_resume_all(struct stopped_process *sp);

int thread_get_regs(pid_t tid, struct user_regs_struct *r);
int thread_set_regs(pid_t tid, const struct user_regs_struct *r);

/*
 * Runs system call `nr` with `args` in stopped thread `i` of `sp`, by
 * pointing it at the stub at `gadget` (remote_stub.h, built for this
 * thread) and running it from the call's entry stop to its exit stop;
 * the thread's registers are left as they were. Returns 0 and the
 * call's result in `*ret` (a -errno of the call itself included), or -errno
 * when ptrace failed.
 */
int thread_remote_syscall(struct stopped_process *sp, size_t i, uint64_t gadget, long nr,
                          const uint64_t args[6], int64_t *ret);

/*
 * For the tests of a daemon killed mid-injection: with the environment
 * variable HEAPPROFD_TEST_CRASH_AT=N, the N-th call of this function (at
 * each point where an injection has the target in an intermediate state)
 * SIGKILLs heapprofd itself. Without it, nothing happens.
 */
void thread_crash_point(void);

#endif
