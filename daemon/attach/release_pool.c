/*
 * release_pool.c - releases the probes of many targets on a few threads
 * (see release_pool.h). Threads are made per call: a call is rare (a
 * burst of exits, the daemon stopping) and making a thread costs far less
 * than one RCU wait.
 */
#include "release_pool.h"

#include <pthread.h>

#include "target_slot.h"

/* The work of one call, shared by its threads. */
struct release_work {
    struct targets *t;
    struct target *const *tgs;
    size_t n;
    size_t next;      /* the next target to take (atomic) */
    uint64_t longest; /* the longest release (atomic max) */
};

/* One thread: takes targets until none is left. */
static void *release_thread(void *arg)
{
    struct release_work *w = arg;
    for (;;) {
        size_t k = __atomic_fetch_add(&w->next, 1, __ATOMIC_RELAXED);
        if (k >= w->n)
            break;
        uint64_t took = target_release_probes(w->t, w->tgs[k], 1);
        uint64_t seen = __atomic_load_n(&w->longest, __ATOMIC_RELAXED);
        while (took > seen && !__atomic_compare_exchange_n(&w->longest, &seen, took, false,
                                                            __ATOMIC_RELAXED, __ATOMIC_RELAXED))
            ;
    }
    return NULL;
}

uint64_t release_pool_run(struct targets *t, struct target *const *tgs, size_t n)
{
    struct release_work w = {.t = t, .tgs = tgs, .n = n};
    pthread_t th[RELEASE_THREADS];
    size_t started = 0;
    size_t want = n < RELEASE_THREADS ? n : RELEASE_THREADS;
    /* One target needs no thread; a thread that cannot be made leaves
     * its share to the others, and to this one. */
    for (; want > 1 && started < want; started++)
        if (pthread_create(&th[started], NULL, release_thread, &w) != 0)
            break;
    release_thread(&w);
    for (size_t i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    return w.longest;
}
