/*
 * process_watch_pending.c - the attacher's queue (see process_watch.c):
 * processes that exec'd or were forked, waiting to be attached once ready
 * (an exec'd program once its dynamic linker has loaded its libraries, a
 * child after FORK_GRACE_NS), what became of each attach, and the
 * processes whose attach for a rule failed, so that the scan does not try
 * them every second. Only the attacher's thread touches any of it.
 */
#include "process_watch_state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "process_events.h"
#include "proc_info.h"
#include "targets.h"

/* Whether the attach of this very process failed before. */
bool watch_failed_before(struct process_watch *w, pid_t pid, uint64_t start_time)
{
    for (size_t i = 0; i < FAILED_MEMORY; i++)
        if (w->failed[i].pid == pid && w->failed[i].start_time == start_time)
            return true;
    return false;
}

/* Remembers a process whose attach for a rule failed, saying why once. */
void watch_remember_failure(struct process_watch *w, pid_t pid, const char *err)
{
    uint64_t start_time;
    if (proc_start_time(pid, &start_time) != 0 || watch_failed_before(w, pid, start_time))
        return;
    fprintf(stderr, "heapprofd: pid %d matches a target rule but: %s\n", (int)pid, err);
    w->failed[w->next_failed].pid = pid;
    w->failed[w->next_failed].start_time = start_time;
    w->next_failed = (w->next_failed + 1) % FAILED_MEMORY;
}

/* Queues `pid` to attach once ready; a full queue leaves it to the scan. */
void watch_add_pending(struct process_watch *w, const struct pending *p)
{
    for (size_t i = 0; i < w->npending; i++)
        if (w->pending[i].pid == p->pid) {
            holders_merge(&w->pending[i].holders, &p->holders);
            return;
        }
    if (w->npending < PENDING_MAX) {
        w->pending[w->npending++] = *p;
        w->pending_unsorted = true;
    }
    else if (!p->parent && !p->reattach && !p->from_scan) /* the next scan finds it again */
        watch_count(w, &w->stats.exec_missed[EXEC_MISSED_QUEUE_FULL], 1);
}

void watch_scan_outcome(struct process_watch *w, pid_t pid, bool was_target, int e,
                        const char *err)
{
    if (e == 0 && !was_target) {
        watch_count(w, &w->stats.scan_attached, 1);
        watch_existing_children(w, pid);
    }
    /* Over the cap (-ENOSPC): not remembered, so retried at each scan and
     * attached once a slot frees. No allocator yet (-ENOENT): a process
     * matched right after exec has no libc mapped until the dynamic linker
     * runs, so it is retried too. Gone, or exec'd during the attach
     * (-ESRCH, -EAGAIN): its new program is news of its own. */
    if (e && e != -ENOSPC && e != -ENOENT && e != -ESRCH && e != -EAGAIN)
        watch_remember_failure(w, pid, err);
}

/* Counts a process a rule matched at its exec that was not attached. */
static void count_exec_missed(struct process_watch *w, const struct pending *p, int e)
{
    if (p->parent || p->reattach || !holders_holds(&p->holders, HOLD_RULE, 0))
        return;
    enum exec_missed why = e == -ESRCH    ? EXEC_MISSED_EXITED
                           : e == -ENOSPC ? EXEC_MISSED_MAX_TARGETS
                                          : EXEC_MISSED_ERROR;
    watch_count(w, &w->stats.exec_missed[why], 1);
}

/* What became of a pending attach: counted, and said where it failed. */
static void finish_pending(struct process_watch *w, const struct pending *p, int e,
                           const char *err)
{
    uint64_t delay = monotonic_ns() - p->event_ns;
    if (p->from_scan) {
        watch_scan_outcome(w, p->pid, p->was_target, e, err);
        return;
    }
    if (e == 0)
        watch_existing_children(w, p->pid);
    else
        count_exec_missed(w, p, e);
    if (e == 0 && p->parent) {
        static const unsigned bounds_ms[FORK_DELAY_BUCKETS] = FORK_DELAY_BOUNDS_MS;
        pthread_mutex_lock(&w->lock);
        w->stats.forks_attached++;
        w->stats.fork_delay_ns += delay;
        for (size_t b = 0; b < FORK_DELAY_BUCKETS; b++)
            w->stats.fork_delay_buckets[b] += delay <= bounds_ms[b] * 1000000ull;
        pthread_mutex_unlock(&w->lock);
    } else if (e == 0 && p->reattach) {
        /* a target that exec'd: counted by the table (reattached_total) */
    } else if (e == 0) {
        pthread_mutex_lock(&w->lock);
        w->stats.exec_attached++;
        w->stats.exec_attach_delay_ns += delay;
        pthread_mutex_unlock(&w->lock);
    } else if (e == -ESRCH || e == -EAGAIN) {
        /* Gone already, or exec'd during its attach (targets.c counts both
         * apart from errors): its exec is news of its own. */
    } else if (p->parent) {
        /* Uprobes' breakpoints can be taken out; an in-process sampler's
         * patch cannot be by a uprobe (removing one writes the file's
         * first byte back over the patched entry). */
        char why[512] = "it inherited the in-process sampler, which stays";
        int scrubbed = p->sampler == SAMPLER_INPROCESS
                           ? -EPERM
                           : targets_scrub_inherited(w->targets, p->pid, why, sizeof(why));
        fprintf(stderr, "heapprofd: pid %d, forked by profiled pid %d, is not profiled: %s; %s%s\n",
                (int)p->pid, (int)p->parent, err,
                scrubbed == 0 ? "the probes it inherited were taken out"
                              : "it runs with the probes it inherited, unprofiled: ",
                scrubbed == 0 ? "" : why);
        /* Counted once all of that is done: what the count shows is over. */
        targets_note_unprofiled_fork(w->targets, p->parent);
        watch_count(w, &w->stats.forks_unprofiled, 1);
    } else if (e == -ENOSPC || e == -ENOENT) {
        /* Over the cap, or no allocator yet (held at its exec): the scan
         * and the reaper retry. */
    } else if (holders_holds(&p->holders, HOLD_RULE, 0)) {
        watch_remember_failure(w, p->pid, err);
    } else {
        fprintf(stderr, "heapprofd: pid %d after exec: %s\n", (int)p->pid, err);
    }
    if (e && e != -ESRCH && w->events)
        process_events_unwatch(w->events, p->pid);
}

/* How often a child forked during its parent's attach looks again, and for
 * how long at most (an attach that never ends is bounded well below). */
#define PENDING_PARENT_POLL_NS 2000000ULL
#define PENDING_PARENT_MAX_NS 60000000000ULL

/*
 * A child that waits for its parent's attach: true once the parent is live
 * (the child then holds as its parent, with its sampler and owner). False
 * while it attaches (wait_parent stays set), or when it is no target any
 * more, or waited too long (wait_parent cleared: the child is dropped).
 */
static bool parent_settled(struct process_watch *w, struct pending *p, uint64_t now)
{
    struct holders parent;
    enum sampler_kind sampler;
    int state = targets_fork_parent(w->targets, p->parent, &parent, &sampler, &p->owned,
                                    &p->owner);
    if (state == 0 && now - p->event_ns < PENDING_PARENT_MAX_NS)
        return false;
    p->wait_parent = false;
    if (state <= 0)
        return false;
    p->holders = holders_for_child(&parent, now);
    p->sampler = (int)sampler;
    return holders_held(&p->holders, now);
}

/* Takes the finished attaches back: one whose dynamic linker was still
 * loading waits again, the others are done with. */
static void take_results(struct process_watch *w)
{
    struct attach_result r[16];
    size_t n;
    while ((n = watch_take_results(w, r, sizeof(r) / sizeof(r[0]))) > 0) {
        for (size_t k = 0; k < n; k++) {
            struct pending *in = watch_inflight(w, r[k].pid);
            if (!in)
                continue;
            struct pending p = *in;
            *in = w->inflight[--w->ninflight];
            if (r[k].e == -EAGAIN && r[k].settle) {
                uint64_t now = monotonic_ns();
                p.not_before_ns = now + (now - p.event_ns >= PENDING_FAST_NS
                                             ? PENDING_SLOW_POLL_NS : 0);
                watch_add_pending(w, &p);
                continue;
            }
            finish_pending(w, &p, r[k].e, r[k].err);
        }
    }
}

/* Orders pending processes oldest first: under a burst, the first to ask
 * is the first attached. */
static int older_first(const void *a, const void *b)
{
    const struct pending *x = a, *y = b;
    return x->event_ns < y->event_ns ? -1 : x->event_ns > y->event_ns;
}

void watch_attach_pending(struct process_watch *w)
{
    take_results(w);
    if (w->pending_unsorted)
        qsort(w->pending, w->npending, sizeof(w->pending[0]), older_first);
    w->pending_unsorted = false;
    for (size_t i = 0; i < w->npending;) {
        struct pending *p = &w->pending[i];
        uint64_t now = monotonic_ns();
        if (now < p->not_before_ns) {
            i++;
            continue;
        }
        if (p->wait_parent && !parent_settled(w, p, now)) {
            if (p->wait_parent) { /* still attaching */
                p->not_before_ns = now + PENDING_PARENT_POLL_NS;
                i++;
                continue;
            }
            if (w->events) /* its parent was not attached: nor is it */
                process_events_unwatch(w->events, p->pid);
            memmove(p, p + 1, (--w->npending - i) * sizeof(*p));
            continue;
        }
        if (!watch_dispatch(w, p)) {
            i++; /* no worker: tried again at the next turn */
            continue;
        }
        memmove(p, p + 1, (--w->npending - i) * sizeof(*p)); /* keeps the order */
    }
}

/* Whether `pid` waits in the pending list (the scan leaves it be). */
bool watch_is_pending(struct process_watch *w, pid_t pid)
{
    for (size_t i = 0; i < w->npending; i++)
        if (w->pending[i].pid == pid)
            return true;
    return watch_inflight(w, pid) != NULL;
}
