/*
 * process_watch.c - the threads that act on process lifetimes (see
 * process_watch.h): the attacher takes the kernel's events and runs the
 * 1 s rule scan; the reaper keeps the last profiles of exited targets and
 * lets go of those nothing holds.
 *
 * An exec is attached once the new program's libraries are loaded: the
 * attacher retries every millisecond (PENDING_POLL_MS) while the dynamic
 * linker says it is still loading (targets_hold(), just_exec_d). A child
 * is attached FORK_GRACE_NS after its fork unless it execs first: a
 * fork+exec (a shell running a command) is a new program, which pays
 * nothing for its parent's probes once it has exec'd. The queue of
 * processes waiting so is in process_watch_pending.c; the attaches
 * themselves run on ATTACH_WORKERS threads, the oldest first
 * (process_watch_workers.c).
 */
#include "process_watch.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "clock.h"
#include "process_events.h"
#include "proc_info.h"
#include "process_watch_state.h"

/* Adds to a counter of the stats. */
void watch_count(struct process_watch *w, uint64_t *counter, uint64_t n)
{
    pthread_mutex_lock(&w->lock);
    *counter += n;
    pthread_mutex_unlock(&w->lock);
}

/* Whether a target rule matches `pid`, the sampler the first that names
 * one asks for (-1: none does), and the owner whose cap it counts against
 * (`p`'s owned and owner). */
static bool rule_matches(struct process_watch *w, pid_t pid, int *sampler, struct pending *p)
{
    bool owned = false;
    uid_t owner = 0;
    *sampler = -1;
    pthread_mutex_lock(&w->lock);
    bool m = target_rules_any(&w->rules) &&
             target_rules_match_owner(&w->rules, pid, sampler, &owned, &owner);
    pthread_mutex_unlock(&w->lock);
    if (m && owned) {
        p->owned = true;
        p->owner = owner;
    }
    return m;
}

/* An exec: a target is attached afresh to its new program (an exec ends a
 * fork hold), and a process a rule matches is attached. */
static void on_exec(struct process_watch *w, const struct hp_proc_event *ev)
{
    pid_t pid = (pid_t)ev->pid;
    struct pending p = {.pid = pid, .event_ns = ev->time_ns, .sampler = -1};
    watch_count(w, &w->stats.execs, 1);
    for (size_t i = 0; i < w->npending; i++)
        if (w->pending[i].pid == pid) {
            holders_drop(&w->pending[i].holders, HOLD_FORK);
            p.holders = w->pending[i].holders; /* re-queued below as an exec */
            w->pending[i] = w->pending[--w->npending];
            break;
        }
    struct holders kept;
    enum sampler_kind sampler;
    if (targets_exec_d(w->targets, pid, ev->time_ns, &kept, &sampler)) {
        holders_merge(&p.holders, &kept);
        p.reattach = true;
        p.sampler = (int)sampler;
    } else {
        targets_release(w->targets, pid, HOLD_FORK); /* attached after the exec, as a child */
    }
    holders_drop(&p.holders, HOLD_FORK);
    int rule_sampler;
    if (rule_matches(w, pid, &rule_sampler, &p)) {
        holders_add(&p.holders, HOLD_RULE, HOLD_FOREVER);
        p.sampler = rule_sampler >= 0 ? rule_sampler : p.sampler;
    }
    if (holders_held(&p.holders, monotonic_ns()))
        watch_add_pending(w, &p);
    else if (w->events)
        process_events_unwatch(w->events, pid); /* a child that exec'd: not followed */
}

/* A fork of a watched process: the child is followed, held as its parent. */
static void on_fork(struct process_watch *w, const struct hp_proc_event *ev)
{
    struct holders parent;
    watch_count(w, &w->stats.forks, 1);
    uint64_t now = monotonic_ns();
    struct pending p = {.pid = (pid_t)ev->pid, .parent = (pid_t)ev->ppid, .sampler = -1,
                        .event_ns = ev->time_ns, .not_before_ns = ev->time_ns + FORK_GRACE_NS};
    /* The child's memory holds its parent's sampler (a patch, or uprobes'
     * breakpoints): it gets the same. */
    enum sampler_kind sampler;
    int state = targets_fork_parent(w->targets, p.parent, &parent, &sampler, &p.owned, &p.owner);
    bool parent_known = state > 0;
    /* Its parent is being attached (or handed to a worker to be): it
     * follows once that is done. */
    if (state == 0 || watch_inflight(w, p.parent)) {
        p.wait_parent = true;
        watch_add_pending(w, &p);
        return;
    }
    if (parent_known)
        p.sampler = (int)sampler;
    for (size_t i = 0; i < w->npending && !parent_known; i++)
        if (w->pending[i].pid == p.parent) { /* a child's child, forked in its grace */
            parent = w->pending[i].holders;
            p.sampler = w->pending[i].sampler;
            p.owned = w->pending[i].owned;
            p.owner = w->pending[i].owner;
            p.wait_parent = w->pending[i].wait_parent;
            parent_known = true;
        }
    if (p.wait_parent) {
        watch_add_pending(w, &p);
        return;
    }
    if (parent_known)
        p.holders = holders_for_child(&parent, now);
    if (holders_held(&p.holders, now))
        watch_add_pending(w, &p);
    else if (w->events)
        process_events_unwatch(w->events, p.pid); /* its parent is no longer profiled */
}

void watch_existing_children(struct process_watch *w, pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char children[300];
        snprintf(children, sizeof(children), "/proc/%d/task/%s/children", (int)pid, de->d_name);
        FILE *f = fopen(children, "re");
        long child;
        while (f && fscanf(f, "%ld", &child) == 1) {
            /* As if forked now, past its grace: it has run a while already. */
            struct hp_proc_event ev = {.type = HP_EVENT_FORK, .pid = (__u32)child,
                                       .ppid = (__u32)pid,
                                       .time_ns = monotonic_ns() - FORK_GRACE_NS};
            if (w->events)
                process_events_watch(w->events, (pid_t)child);
            on_fork(w, &ev);
        }
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
}

/* Queues an exit for the reaper. */
static void on_exit_event(struct process_watch *w, const struct hp_proc_event *ev)
{
    pthread_mutex_lock(&w->lock);
    w->stats.exits++;
    if (w->nexits < EXITS_MAX)
        w->exits[w->nexits++] = (pid_t)ev->pid; /* else the reaper's scan finds it */
    pthread_cond_signal(&w->wake_reaper);
    pthread_mutex_unlock(&w->lock);
}

static void on_event(void *arg, const struct hp_proc_event *ev)
{
    struct process_watch *w = arg;
    switch (ev->type) {
    case HP_EVENT_EXEC:
        on_exec(w, ev);
        break;
    case HP_EVENT_FORK:
        on_fork(w, ev);
        break;
    case HP_EVENT_EXIT:
        on_exit_event(w, ev);
        break;
    default:
        break;
    }
}

/* The scan's callback: holds a process a rule matched. */
static void attach_matching(pid_t pid, void *arg)
{
    struct process_watch *w = arg;
    uint64_t start_time;
    struct holders h;
    char err[512];
    if (watch_is_pending(w, pid) || proc_start_time(pid, &start_time) != 0 ||
        watch_failed_before(w, pid, start_time))
        return;
    bool was_target = targets_holders_of(w->targets, pid, &h, NULL);
    if (was_target && holders_holds(&h, HOLD_RULE, 0))
        return;
    int rule_sampler;
    struct pending p = {
        .pid = pid, .event_ns = monotonic_ns(), .from_scan = true, .was_target = was_target};
    if (!rule_matches(w, pid, &rule_sampler, &p))
        return; /* the rules changed since the scan's copy */
    if (w->scan_queues) {
        p.sampler = rule_sampler;
        holders_add(&p.holders, HOLD_RULE, HOLD_FOREVER);
        watch_add_pending(w, &p);
        return;
    }
    enum sampler_kind sampler = (enum sampler_kind)rule_sampler;
    struct hold_request how = {.kind = HOLD_RULE,
                               .until_ns = HOLD_FOREVER,
                               .sampler = rule_sampler >= 0 ? &sampler : NULL,
                               .owner = p.owned ? &p.owner : NULL};
    int e = targets_hold(w->targets, pid, &how, err, sizeof(err));
    watch_scan_outcome(w, pid, was_target, e, err);
}

/* Matches the rules against /proc: what the events missed (a full ring
 * buffer, no event source, processes older than the daemon). */
static void scan_rules(struct process_watch *w)
{
    struct target_rule_set rules;
    pthread_mutex_lock(&w->lock);
    int e = target_rules_copy(&rules, &w->rules);
    pthread_mutex_unlock(&w->lock);
    if (e == 0)
        target_rules_scan(&rules, attach_matching, w);
    target_rules_free(&rules);
}

static bool is_stopping(struct process_watch *w)
{
    pthread_mutex_lock(&w->lock);
    bool s = w->stopping;
    pthread_mutex_unlock(&w->lock);
    return s;
}

/* The attacher: events, waiting processes, the scan. */
static void *attacher_main(void *arg)
{
    struct process_watch *w = arg;
    uint64_t next_scan = monotonic_ns() + SCAN_INTERVAL_NS;
    while (!is_stopping(w)) {
        /* Short waits while a process waits for its linker; 100 ms bounds
         * how long a stop takes. */
        int timeout_ms = w->npending || w->ninflight ? PENDING_POLL_MS : 100;
        if (w->events) {
            process_events_poll(w->events, timeout_ms, on_event, w);
        } else {
            struct timespec ts = {0, timeout_ms * 1000000L};
            nanosleep(&ts, NULL);
        }
        watch_attach_pending(w);
        if (monotonic_ns() >= next_scan) {
            scan_rules(w);
            next_scan = monotonic_ns() + SCAN_INTERVAL_NS;
        }
    }
    return NULL;
}

/* The reaper's nice value, above the requests' 0. */
#define REAPER_NICE 10

/* The reaper: exits as they come, and each second exited, exec'd and idle
 * targets. */
static void *reaper_main(void *arg)
{
    struct process_watch *w = arg;
    /* Letting go is background work: the kept profiles of a burst of
     * exits take seconds of CPU, and scrapes of the live targets must not
     * wait for them. Nice is per thread on Linux, and the release pool's
     * threads inherit it. */
    setpriority(PRIO_PROCESS, (id_t)gettid(), REAPER_NICE);
    pid_t exits[EXITS_MAX];
    uint64_t next_tick = monotonic_ns() + SCAN_INTERVAL_NS;
    pthread_mutex_lock(&w->lock);
    while (!w->stopping) {
        if (w->nexits == 0) {
            struct timespec until = {.tv_sec = (time_t)(next_tick / 1000000000u),
                                     .tv_nsec = (long)(next_tick % 1000000000u)};
            pthread_cond_timedwait(&w->wake_reaper, &w->lock, &until);
        }
        size_t n = w->nexits;
        memcpy(exits, w->exits, n * sizeof(exits[0]));
        w->nexits = 0;
        pthread_mutex_unlock(&w->lock);
        /* A burst of exits is let go of in one batch: one pass over the maps. */
        if (n)
            targets_exited_many(w->targets, exits, n);
        uint64_t now = monotonic_ns();
        if (now >= next_tick) {
            targets_reap(w->targets);
            targets_expire(w->targets, now);
            next_tick = monotonic_ns() + SCAN_INTERVAL_NS;
        }
        pthread_mutex_lock(&w->lock);
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

int process_watch_start(struct process_watch **out, struct targets *targets,
                        const struct target_rule_set *rules, struct process_events *events)
{
    struct process_watch *w = calloc(1, sizeof(*w));
    if (!w) {
        process_events_close(events);
        return -ENOMEM;
    }
    w->targets = targets;
    w->events = events;
    w->stats.events_on = events != NULL;
    pthread_mutex_init(&w->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&w->wake_reaper, &ca);
    pthread_condattr_destroy(&ca);
    int e = process_watch_set_rules(w, rules);
    if (e == 0) {
        /* The processes running now are attached before the daemon serves. */
        scan_rules(w);
        if (events)
            process_events_report_all_execs(events, target_rules_any(rules));
        e = watch_workers_start(w);
        w->scan_queues = e == 0;
        if (e == 0 && (e = -pthread_create(&w->attacher, NULL, attacher_main, w)) != 0)
            watch_workers_stop(w);
    }
    if (e == 0 && (e = -pthread_create(&w->reaper, NULL, reaper_main, w)) != 0) {
        pthread_mutex_lock(&w->lock);
        w->stopping = 1;
        pthread_mutex_unlock(&w->lock);
        pthread_join(w->attacher, NULL);
        watch_workers_stop(w);
    }
    if (e) {
        target_rules_free(&w->rules);
        process_events_close(events);
        free(w);
        return e;
    }
    *out = w;
    return 0;
}

void process_watch_stop(struct process_watch *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->lock);
    w->stopping = 1;
    pthread_cond_signal(&w->wake_reaper);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->attacher, NULL);
    watch_workers_stop(w); /* after the attacher: it hands work out */
    pthread_join(w->reaper, NULL);
    /* The targets go after this, with the events that watch them. */
    w->targets->events = NULL;
    process_events_close(w->events);
    target_rules_free(&w->rules);
    pthread_cond_destroy(&w->wake_reaper);
    pthread_mutex_destroy(&w->lock);
    free(w);
}

int process_watch_set_rules(struct process_watch *w, const struct target_rule_set *rules)
{
    struct target_rule_set copy;
    int e = target_rules_copy(&copy, rules);
    if (e)
        return e;
    pthread_mutex_lock(&w->lock);
    target_rules_free(&w->rules);
    w->rules = copy;
    pthread_mutex_unlock(&w->lock);
    if (w->events)
        process_events_report_all_execs(w->events, target_rules_any(rules));
    return 0;
}

void process_watch_stats(struct process_watch *w, struct process_watch_stats *out)
{
    pthread_mutex_lock(&w->lock);
    *out = w->stats;
    pthread_mutex_unlock(&w->lock);
    if (w->events) {
        struct process_events_stats es;
        process_events_stats(w->events, &es);
        out->events_lost = es.lost;
        out->watch_full = es.watch_full;
    }
}
