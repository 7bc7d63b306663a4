/*
 * eintr.c - threads that block every signal and loop on one blocking call
 * each, counting the calls and the EINTR failures, for test_eintr.py: a
 * stop of the in-process sampler's attach or detach must never make one
 * of them fail with EINTR (a thread that blocks every signal never sees
 * one otherwise).
 *
 * The calls: epoll_wait, epoll_pwait, poll, select, sem_timedwait,
 * nanosleep, futex (FUTEX_WAIT with a timeout) and recv on a socket with
 * SO_RCVTIMEO, each with a WAIT_MS timeout and nothing that ever wakes it;
 * ppoll; and "epoll_wait_busy" and "ppoll_busy", threads that run a little,
 * then block for 1 ms, again and again: they are often seen running, the
 * thread an attach prefers, and likely to have entered their call by the
 * time they are stopped. epoll_pwait and ppoll wait with a signal mask of
 * their own (every signal blocked but SIGURG, which nobody sends): once
 * the call returns, the thread's own mask (every signal) must be back,
 * or the line says "mask N" (calls after which it was not).
 *
 * Protocol: "ready PID" once every thread loops; on a line, the threads
 * stop and it prints one line "NAME calls N eintr M mask K" per call, then
 * "done", and exits on the next line (or EOF).
 *
 * "eintr forever": one thread only, which waits in epoll_wait without a
 * timeout, the way an idle event loop does, on stdin: the only thread an
 * attach can stop, so it must be stopped in that call and the call made
 * again. On a line it prints "epoll_wait_forever calls N eintr M", then
 * "done", and exits on the next line.
 */
#include <errno.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "handshake.h"

/* Each call's timeout: short, so that many calls start during a test. */
#define WAIT_MS 50
/* How long a busy thread runs between its 1 ms waits: shorter than the
 * tens of microseconds from an attach's look at its threads to its stop,
 * so that a busy thread seen running is often in its call once stopped. */
#define BUSY_NS 30000L

enum call {
    EPOLL_WAIT,
    EPOLL_PWAIT,
    POLL,
    SELECT,
    SEM_TIMEDWAIT,
    NANOSLEEP,
    FUTEX,
    RECV,
    EPOLL_WAIT_BUSY,
    PPOLL,
    PPOLL_BUSY,
    NCALLS
};

static const char *const names[NCALLS] = {
    "epoll_wait", "epoll_pwait",     "poll",  "select",     "sem_timedwait", "nanosleep", "futex",
    "recv",       "epoll_wait_busy", "ppoll", "ppoll_busy",
};

static atomic_int stopping;
static atomic_long calls[NCALLS], eintrs[NCALLS], masks_lost[NCALLS];
static int epfd, pipe_rd, sock;
static sem_t sem;
static int futex_word;

/* BUSY_NS of work: a busy thread's time between its short waits. */
static void busy(void)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do
        clock_gettime(CLOCK_MONOTONIC, &t);
    while ((t.tv_sec - t0.tv_sec) * 1000000000L + t.tv_nsec - t0.tv_nsec < BUSY_NS);
}

/* One call of kind `c`: -1 with errno on failure. */
static int one_call(enum call c)
{
    struct epoll_event ev;
    sigset_t own;
    sigfillset(&own);
    sigdelset(&own, SIGURG);
    switch (c) {
    case EPOLL_WAIT:
        return epoll_wait(epfd, &ev, 1, WAIT_MS);
    case EPOLL_PWAIT:
        return epoll_pwait(epfd, &ev, 1, WAIT_MS, &own);
    case PPOLL:
    case PPOLL_BUSY: {
        struct pollfd p = {.fd = pipe_rd, .events = POLLIN};
        struct timespec ts = {0, (c == PPOLL ? WAIT_MS : 1) * 1000000L};
        if (c == PPOLL_BUSY)
            busy();
        return ppoll(&p, 1, &ts, &own);
    }
    case POLL: {
        struct pollfd p = {.fd = pipe_rd, .events = POLLIN};
        return poll(&p, 1, WAIT_MS);
    }
    case SELECT: {
        fd_set set;
        FD_ZERO(&set);
        FD_SET(pipe_rd, &set);
        struct timeval tv = {0, WAIT_MS * 1000};
        return select(pipe_rd + 1, &set, NULL, NULL, &tv);
    }
    case SEM_TIMEDWAIT: {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += WAIT_MS * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        int r = sem_timedwait(&sem, &until);
        return r < 0 && errno == ETIMEDOUT ? 0 : r;
    }
    case NANOSLEEP: {
        struct timespec ts = {0, WAIT_MS * 1000000L};
        return nanosleep(&ts, NULL);
    }
    case FUTEX: {
        struct timespec ts = {0, WAIT_MS * 1000000L};
        long r = syscall(SYS_futex, &futex_word, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
        return r < 0 && errno == ETIMEDOUT ? 0 : (int)r;
    }
    case RECV: {
        char b;
        ssize_t r = recv(sock, &b, 1, 0);
        return r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? 0 : (int)r;
    }
    case EPOLL_WAIT_BUSY:
        busy();
        return epoll_wait(epfd, &ev, 1, 1);
    default:
        return 0;
    }
}

/* Says which call failed how, and exits with status 2. */
static void fail(enum call c, int err)
{
    char line[128];
    int n = snprintf(line, sizeof(line), "eintr: %s failed: %s\n", names[c], strerror(err));
    if (write(1, line, (size_t)n) < 0)
        _exit(3);
    _exit(2);
}

static void *loop(void *arg)
{
    enum call c = (enum call)(long)arg;
    while (!atomic_load(&stopping)) {
        int r = one_call(c);
        int err = errno;
        sigset_t now;
        pthread_sigmask(SIG_SETMASK, NULL, &now);
        if (sigismember(&now, SIGURG) != 1)
            atomic_fetch_add(&masks_lost[c], 1);
        errno = err;
        atomic_fetch_add(&calls[c], 1);
        if (r < 0 && errno == EINTR)
            atomic_fetch_add(&eintrs[c], 1);
        else if (r < 0)
            fail(c, errno);
    }
    return NULL;
}

/* The "forever" mode: epoll_wait(-1) on stdin until a line comes. */
static int wait_forever(void)
{
    struct epoll_event e = {.events = EPOLLIN};
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, 0, &e) != 0)
        handshake_die("eintr: setup failed");
    handshake_ready();
    long n = 0, eintr = 0;
    for (;;) {
        int r = epoll_wait(ep, &e, 1, -1);
        n++;
        if (r < 0 && errno == EINTR)
            eintr++;
        else if (r < 0)
            fail(EPOLL_WAIT, errno);
        else if (r > 0)
            break;
    }
    handshake_wait_line();
    printf("epoll_wait_forever calls %ld eintr %ld mask 0\n", n, eintr);
    fflush(stdout);
    handshake_done();
    handshake_wait_line();
    return 0;
}

int main(int argc, char **argv)
{
    /* Every signal blocked, in the main thread and so in every thread. */
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, NULL);
    if (argc > 1 && strcmp(argv[1], "forever") == 0)
        return wait_forever();
    int ev = eventfd(0, EFD_CLOEXEC);
    struct epoll_event e = {.events = EPOLLIN};
    int p[2], sv[2];
    epfd = epoll_create1(EPOLL_CLOEXEC);
    if (ev < 0 || epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, ev, &e) != 0 || pipe(p) != 0 ||
        socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) != 0 || sem_init(&sem, 0, 0) != 0)
        handshake_die("eintr: setup failed");
    pipe_rd = p[0];
    sock = sv[0];
    struct timeval tv = {0, WAIT_MS * 1000};
    if (setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0)
        handshake_die("eintr: SO_RCVTIMEO");
    pthread_t threads[NCALLS];
    for (long c = 0; c < NCALLS; c++)
        if (pthread_create(&threads[c], NULL, loop, (void *)c) != 0)
            handshake_die("eintr: pthread_create");
    while (1) { /* every thread has looped once */
        int all_started = 1;
        for (int c = 0; c < NCALLS; c++)
            all_started &= atomic_load(&calls[c]) > 0;
        if (all_started)
            break;
        usleep(1000);
    }
    handshake_ready();
    handshake_wait_line();
    atomic_store(&stopping, 1);
    for (int c = 0; c < NCALLS; c++)
        pthread_join(threads[c], NULL);
    for (int c = 0; c < NCALLS; c++) {
        char line[128];
        int n =
            snprintf(line, sizeof(line), "%s calls %ld eintr %ld mask %ld\n", names[c],
                     atomic_load(&calls[c]), atomic_load(&eintrs[c]), atomic_load(&masks_lost[c]));
        if (write(1, line, (size_t)n) != n)
            return 2;
    }
    handshake_done();
    handshake_wait_line();
    return 0;
}
