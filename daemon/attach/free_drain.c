/*
 * free_drain.c - the drains of the in-process sampler's rings of frees:
 * on request and on a timer (see free_drain.h).
 */
#include "free_drain.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "clock.h"
#include "free_ring.h"
#include "target_slot.h"

/* One process to drain, copied out of the table under its lock. */
struct drain_job {
    pid_t pid;
    uint64_t base;
    bool enable; /* profiled for FREE_RING_AFTER_MS: its frees may use the ring */
};

unsigned targets_drain_frees(struct targets *t, pid_t pid)
{
    int prog = t && t->bpf ? bpf_state_drain_fd(t->bpf) : -1;
    if (prog < 0)
        return 0;
    struct drain_job *jobs = malloc(HP_MAX_TARGETS * sizeof(*jobs));
    if (!jobs)
        return 0;
    unsigned most = 0;
    size_t n = 0;
    struct target *tg;
    uint64_t now = monotonic_ns();
    targets_lock(t);
    for_each_live_target(t, i, tg)
        if (tg->inproc && tg->inproc->inj.base && (pid == 0 || tg->pid == pid) &&
            n < HP_MAX_TARGETS)
            jobs[n++] = (struct drain_job){
                .pid = tg->pid, .base = tg->inproc->inj.base,
                .enable = now - tg->attached_ns >= FREE_RING_AFTER_MS * 1000000ull};
    targets_unlock(t);
    for (size_t k = 0; k < n; k++) {
        int got = free_ring_drain(prog, jobs[k].pid, jobs[k].base, jobs[k].enable);
        most = got > (int)most ? (unsigned)got : most;
    }
    free(jobs);
    return most;
}

struct free_drain {
    struct targets *targets;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int stop; /* under lock */
};

static void *drain_loop(void *arg)
{
    struct free_drain *d = arg;
    long wait_ms = FREE_RING_DRAIN_MS;
    pthread_mutex_lock(&d->lock);
    while (!d->stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += wait_ms * 1000000L;
        until.tv_sec += until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        if (pthread_cond_timedwait(&d->wake, &d->lock, &until) != ETIMEDOUT)
            continue;
        pthread_mutex_unlock(&d->lock);
        unsigned most = targets_drain_frees(d->targets, 0);
        wait_ms = most > HP_FREE_RING_SIZE / 4 ? FREE_RING_BUSY_DRAIN_MS : FREE_RING_DRAIN_MS;
        pthread_mutex_lock(&d->lock);
    }
    pthread_mutex_unlock(&d->lock);
    return NULL;
}

struct free_drain *free_drain_start(struct targets *t)
{
    if (!t->bpf || !free_ring_wanted(bpf_state_drain_fd(t->bpf)))
        return NULL;
    struct free_drain *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    d->targets = t;
    pthread_mutex_init(&d->lock, NULL);
    pthread_cond_init(&d->wake, NULL);
    if (pthread_create(&d->thread, NULL, drain_loop, d) != 0) {
        free(d);
        return NULL;
    }
    return d;
}

void free_drain_stop(struct free_drain *d)
{
    if (!d)
        return;
    pthread_mutex_lock(&d->lock);
    d->stop = 1;
    pthread_cond_signal(&d->wake);
    pthread_mutex_unlock(&d->lock);
    pthread_join(d->thread, NULL);
    pthread_cond_destroy(&d->wake);
    pthread_mutex_destroy(&d->lock);
    free(d);
}
