/*
 * process_watch_workers.c - the attacher's workers: attaches of different
 * processes run at once, ATTACH_WORKERS at a time, the oldest to have
 * asked first. An attach spends most of its time waiting (for a thread to
 * stop, for the kernel), so a burst of new processes is attached in a
 * fraction of the time that one after another would take. The attacher's
 * thread hands the work out and takes the results back: the pending list,
 * and what becomes of each attach, stay its own (process_watch_pending.c).
 */
#include "process_watch_state.h"

#include <errno.h>
#include <string.h>

#include "clock.h"
#include "targets.h"

/* Attaches one pending process, as the attacher would. */
static void run_attach(struct process_watch *w, struct pending *p, struct attach_result *r)
{
    enum sampler_kind sampler = (enum sampler_kind)p->sampler;
    uint64_t now = monotonic_ns();
    r->pid = p->pid;
    r->settle = !p->from_scan && now - p->event_ns < EXEC_SETTLE_MAX_NS;
    r->err[0] = '\0';
    struct hold_request how = {.event_ns = p->from_scan ? 0 : p->event_ns,
                               .just_exec_d = r->settle,
                               .reattach = p->reattach, .fork_child = p->parent != 0,
                               .sampler = p->sampler >= 0 ? &sampler : NULL,
                               .owner = p->owned ? &p->owner : NULL};
    r->e = holders_held(&p->holders, now)
               ? targets_hold_set(w->targets, p->pid, &p->holders, &how, r->err, sizeof(r->err))
               : -ESRCH; /* its holds ended while it waited */
}

static void *worker_main(void *arg)
{
    struct process_watch *w = arg;
    pthread_mutex_lock(&w->work_lock);
    while (!w->workers_stopping) {
        if (w->work_len == 0) {
            pthread_cond_wait(&w->work_ready, &w->work_lock);
            continue;
        }
        struct pending p = w->work[w->work_head];
        w->work_head = (w->work_head + 1) % PENDING_MAX;
        w->work_len--;
        pthread_mutex_unlock(&w->work_lock);
        struct attach_result r;
        run_attach(w, &p, &r);
        pthread_mutex_lock(&w->work_lock);
        /* Room is certain: each result is of one process in flight. */
        w->done[w->ndone++] = r;
    }
    pthread_mutex_unlock(&w->work_lock);
    return NULL;
}

int watch_workers_start(struct process_watch *w)
{
    pthread_mutex_init(&w->work_lock, NULL);
    pthread_cond_init(&w->work_ready, NULL);
    for (w->nworkers = 0; w->nworkers < ATTACH_WORKERS; w->nworkers++) {
        int e = pthread_create(&w->workers[w->nworkers], NULL, worker_main, w);
        if (e)
            return w->nworkers ? 0 : -e; /* fewer workers only attach slower */
    }
    return 0;
}

void watch_workers_stop(struct process_watch *w)
{
    pthread_mutex_lock(&w->work_lock);
    w->workers_stopping = 1;
    pthread_cond_broadcast(&w->work_ready);
    pthread_mutex_unlock(&w->work_lock);
    for (size_t i = 0; i < w->nworkers; i++)
        pthread_join(w->workers[i], NULL);
    pthread_cond_destroy(&w->work_ready);
    pthread_mutex_destroy(&w->work_lock);
}

bool watch_dispatch(struct process_watch *w, const struct pending *p)
{
    if (w->ninflight >= PENDING_MAX || w->nworkers == 0)
        return false;
    w->inflight[w->ninflight++] = *p;
    pthread_mutex_lock(&w->work_lock);
    w->work[(w->work_head + w->work_len) % PENDING_MAX] = *p;
    w->work_len++;
    pthread_cond_signal(&w->work_ready);
    pthread_mutex_unlock(&w->work_lock);
    return true;
}

size_t watch_take_results(struct process_watch *w, struct attach_result *out, size_t max)
{
    pthread_mutex_lock(&w->work_lock);
    size_t n = w->ndone < max ? w->ndone : max;
    memcpy(out, w->done, n * sizeof(*out));
    memmove(w->done, w->done + n, (w->ndone - n) * sizeof(*out));
    w->ndone -= n;
    pthread_mutex_unlock(&w->work_lock);
    return n;
}

struct pending *watch_inflight(struct process_watch *w, pid_t pid)
{
    for (size_t i = 0; i < w->ninflight; i++)
        if (w->inflight[i].pid == pid)
            return &w->inflight[i];
    return NULL;
}
