/*
 * sigcheck.c - signals sent to every thread, with their siginfo checked
 * on arrival, for test_inprocess_safety.py: while the in-process sampler
 * is put in and taken out, a thread that is held for it must still get
 * each signal as it was sent. A sender thread sends, to each of 4
 * allocating threads in turn, SIGRTMIN with a value (pthread_sigqueue:
 * SI_QUEUE) and SIGUSR1 (pthread_kill: SI_TKILL). A handler that sees
 * another si_code, a foreign sender, or a value never sent counts it as
 * bad; at the end every queued SIGRTMIN must have arrived.
 *
 * Protocol: "ready PID", a line to start, a line to stop; then it prints
 * "sent N received N bad N" and exits 0 if all was well, 1 otherwise.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "handshake.h"

#define WORKERS 4

static atomic_int stop;
static atomic_long sent_rt, received_rt, bad;
static pid_t self;

static void on_rt(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)uc;
    if (si->si_code != SI_QUEUE || si->si_pid != self || si->si_value.sival_int < 0 ||
        si->si_value.sival_int >= atomic_load(&sent_rt))
        atomic_fetch_add(&bad, 1);
    atomic_fetch_add(&received_rt, 1);
}

static void on_usr1(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)uc;
    if (si->si_code != SI_TKILL || si->si_pid != self)
        atomic_fetch_add(&bad, 1);
}

static void *worker(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        void *p = malloc(256);
        handshake_touch(p, 256);
        free(p);
    }
    return NULL;
}

static atomic_int stop_sending;

static void *reader(void *arg)
{
    (void)arg;
    handshake_wait_line();
    atomic_store(&stop_sending, 1);
    return NULL;
}

int main(void)
{
    self = getpid();
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sa.sa_sigaction = on_rt;
    sigaction(SIGRTMIN, &sa, NULL);
    sa.sa_sigaction = on_usr1;
    sigaction(SIGUSR1, &sa, NULL);
    pthread_t w[WORKERS], r;
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&w[i], NULL, worker, NULL);
    handshake_ready();
    handshake_wait_line();
    pthread_create(&r, NULL, reader, NULL);
    struct timespec pause = {0, 200000};
    for (long i = 0; !atomic_load(&stop_sending); i++) {
        union sigval v = {.sival_int = (int)atomic_load(&sent_rt)};
        atomic_fetch_add(&sent_rt, 1);
        if (pthread_sigqueue(w[i % WORKERS], SIGRTMIN, v) != 0)
            atomic_fetch_sub(&sent_rt, 1); /* the queue was full */
        pthread_kill(w[(i + 1) % WORKERS], SIGUSR1);
        nanosleep(&pause, NULL);
    }
    pthread_join(r, NULL);
    /* Every signal sent reaches its worker before the workers end (a
     * signal pending for a thread that exits is lost). */
    for (int waited = 0; atomic_load(&received_rt) < atomic_load(&sent_rt) && waited < 5000;
         waited++)
        usleep(1000);
    atomic_store(&stop, 1);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(w[i], NULL);
    printf("sent %ld received %ld bad %ld\n", atomic_load(&sent_rt), atomic_load(&received_rt),
           atomic_load(&bad));
    fflush(stdout);
    return atomic_load(&bad) == 0 && atomic_load(&received_rt) == atomic_load(&sent_rt) ? 0 : 1;
}
