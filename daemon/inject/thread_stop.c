/*
 * thread_stop.c - one thread of a process stopped with ptrace, system calls
 * and a function run in it, and its release (see thread_stop.h).
 *
 * How a thread runs a system call of ours: registers saved, orig_rax set
 * to -1 so that the kernel does not restart the call the thread was
 * interrupted in on our registers, rip at the `syscall` of the stub of
 * remote_stub.h (which returns the thread to where it was if we die before
 * we restore it), resumed to the call's entry stop and its exit stop.
 *
 * Why system call stops and never a single step: if heapprofd dies while
 * a thread sits in the SIGTRAP stop a single step ends in, the kernel
 * delivers that SIGTRAP when it releases the thread, and it dies. A system
 * call stop reports SIGTRAP|0x80 with PTRACE_O_TRACESYSGOOD, which is no
 * signal, and an interrupt stop none.
 */
#include "thread_stop.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "remote_stub.h"
#include "thread_choice.h"

/* The bytes of hp_remote_call (report.S) from its start to its return, at
 * most: past the cookie, a thread in them is still in our code. */
#define REMOTE_CALL_EPILOGUE_MAX 512
/* Where our calls put their data on the thread's stack: below its red zone
 * and the stub's pushes. */
#define STACK_SCRATCH 2048

#ifdef HEAPPROF_TEST_HOOKS
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
#endif

int thread_get_regs(pid_t tid, struct user_regs_struct *r)
{
    return ptrace(PTRACE_GETREGS, tid, 0, r) == 0 ? 0 : -errno;
}

int thread_set_regs(pid_t tid, const struct user_regs_struct *r)
{
    return ptrace(PTRACE_SETREGS, tid, 0, r) == 0 ? 0 : -errno;
}

/* Waits for a ptrace stop or the end of `tid` for up to `ms`. */
static int wait_thread(pid_t tid, int *status, unsigned ms)
{
    uint64_t deadline = monotonic_ns() + (uint64_t)ms * 1000000u;
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

/* The kernel's code for a call it restarts through the thread's restart
 * block (nanosleep, poll and futex waits with a timeout), which
 * <errno.h> does not name. */
#define ERESTART_RESTARTBLOCK_ 516

/*
 * Two ways a stop could show, fixed before the thread runs anything of
 * ours; each is undone by making the thread's call again, from its own
 * arguments, as the kernel restarts a call:
 *
 * - A thread seen running when the candidates were listed may have
 *   entered a call that a stop fails with EINTR (epoll_wait, recv with
 *   SO_RCVTIMEO, ...) by the time our interrupt reached it: it is stopped
 *   on its way out, EINTR in rax and the call's number in orig_rax.
 * - A call restarted through the thread's restart block (rax
 *   -ERESTART_RESTARTBLOCK: nanosleep, poll, futex with a timeout) would
 *   be resumed by restart_syscall from whatever the block holds when the
 *   thread goes on: the installer's own futex wait, interrupted when we
 *   stop it again, writes its restart there, and poll came back with the
 *   installer's ETIMEDOUT (tests/integration/test_eintr.py).
 *
 * Unless a signal the thread may take is pending: then the EINTR is that
 * signal's, and the kernel's delivery decides, as it would have. The call
 * starts again with its whole timeout: for a thread seen running, it had
 * entered the call only since it was listed, microseconds ago, which is
 * all it waits more; one chosen while blocked in a call with a restart
 * block (the last choice, thread_candidates()) may wait up to that much longer.
 * Returns 1 if the call is made again.
 */
static int restart_interrupted_call(struct stopped_thread *st)
{
    int64_t nr = (int64_t)st->regs.orig_rax, rax = (int64_t)st->regs.rax;
    if (nr < 0 || !((rax == -EINTR && !thread_stop_syscall_safe(nr)) ||
                    rax == -ERESTART_RESTARTBLOCK_))
        return 0;
    uint64_t pending = task_status_mask(st->pid, st->tid, "SigPnd") |
                       task_status_mask(st->pid, st->tid, "ShdPnd");
    uint64_t unseen = task_status_mask(st->pid, st->tid, "SigBlk") |
                      task_status_mask(st->pid, st->tid, "SigIgn");
    if (pending & ~unseen)
        return 0;
    /* Only a 64-bit `syscall` instruction is made again. */
    uint8_t insn[2];
    if (pread(st->mem_fd, insn, 2, (off_t)(st->regs.rip - 2)) != 2 || insn[0] != 0x0f ||
        insn[1] != 0x05)
        return 0;
    st->regs.rax = st->regs.orig_rax;
    st->regs.rip -= 2;
    st->regs.orig_rax = (uint64_t)-1; /* nothing for the kernel to restart on top */
    return 1;
}

/* Keeps the siginfo of the signal-delivery stop the thread is in. */
static void hold_signal(struct stopped_thread *st)
{
    siginfo_t si;
    if (ptrace(PTRACE_GETSIGINFO, st->tid, 0, &si) != 0)
        return;
    /* A standard signal pending twice is pending once (signal(7)): a burst
     * of SIGCHLD while the thread is held is one SIGCHLD. */
    for (size_t i = 0; si.si_signo < SIGRTMIN && i < st->nheld; i++)
        if (st->held[i].si_signo == si.si_signo)
            return;
    if (st->nheld < THREAD_MAX_HELD_SIGNALS)
        st->held[st->nheld++] = si;
    else
        st->lost_signals++;
}

/* Whether a stop with `status` is a signal-delivery stop. */
static int signal_delivery(int status)
{
    return WIFSTOPPED(status) && (status >> 16) == 0 && WSTOPSIG(status) != (SIGTRAP | 0x80);
}

/* Whether the stopped thread's pc is inside an rseq critical section: it
 * must not be moved, or it would come back without its abort. */
static int in_rseq_critical_section(const struct stopped_thread *st)
{
    struct {
        uint64_t rseq_abi_pointer;
        uint32_t rseq_abi_size, signature, flags, pad;
    } conf;
    if (ptrace(PTRACE_GET_RSEQ_CONFIGURATION, st->tid, sizeof(conf), &conf) != (long)sizeof(conf) ||
        !conf.rseq_abi_pointer)
        return 0;
    uint64_t cs_addr;
    if (pread(st->mem_fd, &cs_addr, 8, (off_t)(conf.rseq_abi_pointer + 8)) != 8)
        return 1; /* cannot tell: treat as inside */
    if (!cs_addr)
        return 0;
    struct {
        uint32_t version, flags;
        uint64_t start_ip, post_commit_offset, abort_ip;
    } cs;
    if (pread(st->mem_fd, &cs, sizeof(cs), (off_t)cs_addr) != (ssize_t)sizeof(cs))
        return 1;
    return st->regs.rip - cs.start_ip < cs.post_commit_offset;
}

/* Detaches a thread we stopped but will not use; its held signal (if it
 * was stopped in a signal-delivery stop) is delivered as it came. */
static void let_go(struct stopped_thread *st, int status)
{
    int sig = signal_delivery(status) ? WSTOPSIG(status) : 0;
    ptrace(PTRACE_DETACH, st->tid, 0, (void *)(long)sig);
}

/* Seizes and stops `tid`; 0, or 1 if it is unfit once stopped (let go
 * again, `why` says why), or -errno. */
static int try_thread(struct stopped_thread *st, pid_t tid, const char **why)
{
    char path[64];
    if (ptrace(PTRACE_SEIZE, tid, 0, (void *)(long)PTRACE_O_TRACESYSGOOD) != 0)
        return errno == ESRCH ? (*why = "exited", 1) : -errno;
    st->tid = tid;
    st->nheld = 0;
    int status = 0;
    int e = ptrace(PTRACE_INTERRUPT, tid, 0, 0) == 0 ? 0 : -errno;
    if (e == 0)
        e = wait_thread(tid, &status, THREAD_STOP_TIMEOUT_MS);
    if (e == 0 && !WIFSTOPPED(status))
        return *why = "exited", 1;
    if (e)
        return e; /* our thread's exit detaches it (inject.c) */
    st->stopped_at_ns = monotonic_ns();
    /* A tid listed a moment ago may name another process's thread now. */
    snprintf(path, sizeof(path), "/proc/%d/task/%d", (int)st->pid, (int)tid);
    int unfit = access(path, F_OK) != 0;
    *why = "no longer a thread of the process";
    if (!unfit && task_status_field(st->pid, tid, "Seccomp") != 0)
        unfit = 1, *why = "under seccomp";
    if (!unfit && (e = thread_get_regs(tid, &st->regs)) != 0)
        unfit = 1, *why = "registers unreadable";
    if (!unfit && in_rseq_critical_section(st))
        unfit = 1, *why = "inside an rseq critical section";
    if (unfit) {
        let_go(st, status);
        return 1;
    }
    if (!signal_delivery(status))
        restart_interrupted_call(st);
    if (signal_delivery(status))
        hold_signal(st); /* suppressed by our first resume, queued again at release */
    /* Signals that come while we hold it wait, pending, as they would for
     * a thread that blocks them. */
    uint64_t all = ~0ULL;
    if (ptrace(PTRACE_GETSIGMASK, tid, sizeof(st->sigmask), &st->sigmask) == 0 &&
        ptrace(PTRACE_SETSIGMASK, tid, sizeof(all), &all) == 0)
        st->mask_set = 1;
    return 0;
}

int thread_stop_one(pid_t pid, int mem_fd, struct stopped_thread *st, char *err, size_t errlen)
{
    memset(st, 0, sizeof(*st));
    st->pid = pid;
    st->mem_fd = mem_fd;
    pid_t cand[THREAD_MAX_CANDIDATES];
    int seccomp = 0, traced = 0, blocked = 0;
    size_t n = 0;
    /* A thread blocked where a stop would show is waited for a little:
     * an event loop wakes up often, and one running thread will do. */
    uint64_t give_up = monotonic_ns() + THREAD_SAFE_WAIT_MS * 1000000ULL;
    const char *why = NULL;
    /* The candidates are listed again while every one turned out unfit
     * once seized and time remains: threads that come and go (a thread
     * pool's) may all have exited between the listing and the stop. */
    for (;;) {
        for (;;) {
            seccomp = traced = blocked = 0;
            n = thread_candidates(pid, cand, THREAD_MAX_CANDIDATES, &seccomp, &traced, &blocked);
            if (n || traced || !blocked || monotonic_ns() > give_up)
                break;
            struct timespec pause = {0, 200000};
            nanosleep(&pause, NULL);
        }
        /* A debugger or tracer may be stepping any thread, or may stop the
         * process while a thread runs our code: a traced process is left
         * to its tracer. */
        if (traced) {
            snprintf(err, errlen, "process %d is traced by process %d", (int)pid, traced);
            return -EBUSY;
        }
        for (size_t i = 0; i < n; i++) {
            int e = try_thread(st, cand[i], &why);
            if (e == 0)
                return 0;
            if (e < 0) {
                snprintf(err, errlen, "stop thread %d of process %d: %s", (int)cand[i],
                         (int)pid, strerror(-e));
                return e == -EPERM ? -EBUSY : e;
            }
        }
        if (n == 0 || monotonic_ns() > give_up)
            break;
        struct timespec pause = {0, 200000};
        nanosleep(&pause, NULL);
    }
    if (n == 0 && seccomp + blocked == 0) {
        snprintf(err, errlen, "process %d has no threads left", (int)pid);
        return -ESRCH;
    }
    if (n == 0 && blocked == 0) {
        snprintf(err, errlen, "every thread of process %d runs under seccomp", (int)pid);
        return -EBUSY;
    }
    snprintf(err, errlen, "no thread of process %d can be stopped unseen now (%d blocked in "
             "calls a stop would fail with EINTR%s%s)", (int)pid, blocked, why ? "; " : "",
             why ? why : "");
    return -EAGAIN;
}

/* Resumes the thread to its next system call stop; signals on the way are
 * held. `info` gets the stop's details. */
static int to_syscall_stop(struct stopped_thread *st, unsigned ms, struct __ptrace_syscall_info *info)
{
    uint64_t deadline = monotonic_ns() + (uint64_t)ms * 1000000u;
    for (;;) {
        if (ptrace(PTRACE_SYSCALL, st->tid, 0, 0) != 0)
            return -errno;
        int status;
        uint64_t now = monotonic_ns();
        int e = wait_thread(st->tid, &status, now >= deadline ? 1 : (unsigned)((deadline - now) / 1000000u) + 1);
        if (e)
            return e;
        if (!WIFSTOPPED(status))
            return -ESRCH;
        if (WSTOPSIG(status) == (SIGTRAP | 0x80)) {
            if (ptrace(PTRACE_GET_SYSCALL_INFO, st->tid, sizeof(*info), info) <= 0)
                return -errno;
            return 0;
        }
        if (signal_delivery(status)) {
            int sig = WSTOPSIG(status);
            siginfo_t si;
            /* A fault of the thread itself inside our code: stop here. */
            if ((sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE) &&
                ptrace(PTRACE_GETSIGINFO, st->tid, 0, &si) == 0 && si.si_code > 0)
                return -EFAULT;
            hold_signal(st);
        }
        if (monotonic_ns() > deadline)
            return -ETIMEDOUT;
    }
}

/* Our registers for a call: the stopped ones, with the pc, the stack and
 * the system call state ours. */
static struct user_regs_struct call_regs(const struct stopped_thread *st, uint64_t pc)
{
    struct user_regs_struct r = st->regs;
    r.orig_rax = (uint64_t)-1;
    r.rip = pc;
    r.rsp = (st->regs.rsp - 256) & ~15ULL;
    r.eflags &= ~0x400ULL; /* the ABI's direction flag */
    return r;
}

/* A system call through the stub; with `crash_points`, each step is a
 * point where the tests kill us (thread_crash_point()). */
static int remote_syscall(struct stopped_thread *st, uint64_t stub, long nr,
                          const uint64_t args[6], int64_t *ret, int crash_points)
{
    struct user_regs_struct r = call_regs(st, stub);
    r.rax = (uint64_t)nr;
    r.rdi = args[0];
    r.rsi = args[1];
    r.rdx = args[2];
    r.r10 = args[3];
    r.r8 = args[4];
    r.r9 = args[5];
    struct __ptrace_syscall_info info;
    int e = thread_set_regs(st->tid, &r);
    if (crash_points)
        thread_crash_point(); /* pointed at the stub, not yet run */
    if (e == 0)
        e = to_syscall_stop(st, THREAD_STOP_TIMEOUT_MS, &info); /* entry */
    if (crash_points)
        thread_crash_point(); /* at the stub's system call */
    if (e == 0)
        e = to_syscall_stop(st, THREAD_STOP_TIMEOUT_MS, &info); /* exit */
    if (crash_points)
        thread_crash_point(); /* past it */
    if (e == 0 && (info.op != PTRACE_SYSCALL_INFO_EXIT || info.instruction_pointer != stub + 2))
        e = -EFAULT; /* not our system call's exit */
    st->at_syscall_stop = 1;
    if (e == 0)
        *ret = info.exit.rval;
    return e;
}

int thread_remote_syscall(struct stopped_thread *st, uint64_t stub, long nr,
                          const uint64_t args[6], int64_t *ret)
{
    return remote_syscall(st, stub, nr, args, ret, 1);
}

/* Waits for the interrupt stop of a thread we asked to stop; signals on
 * the way are held. 0 or -errno. */
static int to_interrupt_stop(struct stopped_thread *st)
{
    if (ptrace(PTRACE_INTERRUPT, st->tid, 0, 0) != 0)
        return -errno;
    for (int stops = 0; stops < 16; stops++) {
        int status;
        int e = wait_thread(st->tid, &status, THREAD_STOP_TIMEOUT_MS);
        if (e)
            return e;
        if (!WIFSTOPPED(status))
            return -ESRCH;
        if (!signal_delivery(status))
            return 0; /* the interrupt's stop */
        /* Back in its own code its mask is its own again: a signal is
         * delivered as it came, siginfo and all, by passing it on. */
        if (ptrace(PTRACE_CONT, st->tid, 0, (void *)(long)WSTOPSIG(status)) != 0)
            return -errno;
    }
    return -EAGAIN;
}

/*
 * The thread runs `func` freely, not stopped at each of its system calls:
 * with every signal blocked and its own priority, it is as busy as any
 * of its calls. We watch `done` in its memory for our cookie, written once
 * its state is back, then stop it: it is in the stub or its own code, and
 * release() puts back the registers and mask it was stopped with.
 */
int thread_remote_call(struct stopped_thread *st, uint64_t stub, uint64_t func, uint64_t arg,
                       uint64_t done)
{
    uint64_t cookie = (monotonic_ns() << 1) | 1;
    struct user_regs_struct r = call_regs(st, func);
    r.rsp = ((st->regs.rsp - 512) & ~15ULL) - 8; /* as after a call */
    r.rdi = arg;
    r.rsi = cookie;
    if (pwrite(st->mem_fd, &stub, 8, (off_t)r.rsp) != 8)
        return -EIO;
    int e = thread_set_regs(st->tid, &r);
    thread_crash_point(); /* pointed at the function, not yet run */
    uint64_t let_go = monotonic_ns();
    if (e == 0 && ptrace(PTRACE_CONT, st->tid, 0, 0) != 0)
        e = -errno;
    if (e)
        return e;
    st->held_ns += let_go - st->stopped_at_ns;
    st->at_syscall_stop = 0;
    uint64_t deadline = monotonic_ns() + THREAD_CALL_TIMEOUT_MS * 1000000ULL;
    for (unsigned spins = 0;; spins++) {
        uint64_t seen = 0;
        if (pread(st->mem_fd, &seen, 8, (off_t)done) == 8 && seen == cookie)
            break;
        int status;
        pid_t w = waitpid(st->tid, &status, __WALL | WNOHANG);
        if (w == st->tid && !WIFSTOPPED(status))
            return -ESRCH;
        if (w == st->tid && signal_delivery(status)) {
            siginfo_t si;
            int sig = WSTOPSIG(status);
            /* A fault of the thread inside our code: stop here. */
            if ((sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE) &&
                ptrace(PTRACE_GETSIGINFO, st->tid, 0, &si) == 0 && si.si_code > 0)
                return -EFAULT;
        }
        /* Anything else is passed on as it came: with its mask blocked, the
         * thread stops for a signal only once it is back in its own code. */
        if (w == st->tid &&
            ptrace(PTRACE_CONT, st->tid, 0,
                   (void *)(long)(signal_delivery(status) ? WSTOPSIG(status) : 0)) != 0)
            return -errno;
        if (monotonic_ns() > deadline)
            return -ETIMEDOUT;
        if (spins > 64) {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        }
    }
    int e2 = to_interrupt_stop(st);
    st->stopped_at_ns = monotonic_ns(); /* held again from here */
    struct user_regs_struct now;
    if (e2 == 0 && (e2 = thread_get_regs(st->tid, &now)) == 0) {
        /* Past the cookie's store only our epilogue and the stub are left:
         * a thread stopped there is put back at release; one already back
         * in its own code was put back by the stub, mask and all. */
        int ours = (now.rip >= func && now.rip < func + REMOTE_CALL_EPILOGUE_MAX) ||
                   (now.rip >= stub && now.rip < stub + REMOTE_STUB_SIZE);
        st->returned = !ours;
    }
    return e2;
}

/* Queues each held signal again, from the thread itself: the kernel lets
 * a thread send itself any siginfo, so SI_TKILL and sigqueue values come
 * back as they were sent. */
static void requeue_signals(struct stopped_thread *st, uint64_t stub)
{
    uint64_t at = ((st->regs.rsp - STACK_SCRATCH) & ~15ULL);
    for (size_t i = 0; i < st->nheld; i++) {
        siginfo_t *si = &st->held[i];
        int64_t ret = 0;
        uint64_t args[6] = {(uint64_t)st->pid, (uint64_t)st->tid, (uint64_t)si->si_signo, at};
        if (pwrite(st->mem_fd, si, sizeof(*si), (off_t)at) != (ssize_t)sizeof(*si) ||
            remote_syscall(st, stub, SYS_rt_tgsigqueueinfo, args, &ret, 0) != 0 || ret != 0)
            fprintf(stderr, "heapprofd: pid %d: signal %d that arrived during a stop could not "
                    "be queued again to thread %d\n", (int)st->pid, si->si_signo, (int)st->tid);
    }
}

uint64_t thread_release(struct stopped_thread *st, uint64_t stub)
{
    size_t held = st->nheld;
    if (st->returned) {
        /* The stub gave it back its registers and mask: it runs its own
         * code. Held signals go back from here, by the kernel's hand. */
        ptrace(PTRACE_DETACH, st->tid, 0, (void *)(long)(held ? st->held[0].si_signo : 0));
        return st->held_ns + monotonic_ns() - st->stopped_at_ns;
    }
    if (stub && held)
        requeue_signals(st, stub);
    /* With a signal queued, the kernel's own delivery decides whether the
     * interrupted call restarts (it depends on the handler); without one,
     * it restarts, as the kernel would do after a stop. */
    /* From an interrupt stop the kernel's own signal handling restarts
     * the call the thread was stopped in, as it would have; from a system
     * call stop of ours, nothing does: it is set to run again here. */
    struct user_regs_struct r = st->regs;
    if (st->at_syscall_stop && (!held || !stub))
        remote_stub_resume_regs(&st->regs, &r);
    thread_set_regs(st->tid, &r);
    if (st->mask_set)
        ptrace(PTRACE_SETSIGMASK, st->tid, sizeof(st->sigmask), &st->sigmask);
    /* Without a stub the first held signal is delivered by the detach, its
     * siginfo made up by the kernel: better than none. */
    ptrace(PTRACE_DETACH, st->tid, 0, (void *)(long)(!stub && held ? st->held[0].si_signo : 0));
    if (st->lost_signals)
        fprintf(stderr, "heapprofd: pid %d: %d signals to thread %d during a stop were lost\n",
                (int)st->pid, st->lost_signals, (int)st->tid);
    return st->held_ns + monotonic_ns() - st->stopped_at_ns;
}

void thread_abandon(struct stopped_thread *st)
{
    /* It runs: a detach wants a stop first. Its registers stay as they
     * are; the stub puts back its mask and state once the call returns
     * through it. If even the stop does not come, our thread's end lets it
     * go (inject.c). */
    int status;
    if (ptrace(PTRACE_INTERRUPT, st->tid, 0, 0) == 0 &&
        wait_thread(st->tid, &status, THREAD_STOP_TIMEOUT_MS) == 0 && WIFSTOPPED(status))
        ptrace(PTRACE_DETACH, st->tid, 0,
               (void *)(long)(signal_delivery(status) ? WSTOPSIG(status) : 0));
}
