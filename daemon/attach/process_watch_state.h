/*
 * process_watch_state.h - the state of the process watch (process_watch.h)
 * that its two files share: process_watch.c (the threads, the kernel's
 * events, the rule scan) and process_watch_pending.c (the attacher's queue
 * of processes waiting to be attached, and the failures it remembers).
 * Private to them.
 */
#ifndef HEAPPROF_PROCESS_WATCH_STATE_H
#define HEAPPROF_PROCESS_WATCH_STATE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "holders.h"
#include "proc_events.h"
#include "process_watch.h"
#include "target_rules.h"

/* Processes waiting to be attached at once (exec'd, forked): a burst
 * larger than this waits for the 1 s scan. */
#define PENDING_MAX 1024
/* How often a waiting process is looked at again: every millisecond while
 * a dynamic linker usually finishes (1-2 ms here), then every
 * PENDING_SLOW_POLL_NS (a program held at its exec, by a debugger say). */
#define PENDING_POLL_MS 1
#define PENDING_FAST_NS (10 * 1000000ull)
#define PENDING_SLOW_POLL_NS (10 * 1000000ull)
/* How long an exec'd process may keep its dynamic linker busy before it is
 * attached on what is loaded so far (a linker that never says it is done,
 * a program that dlopens in its constructors). */
#define EXEC_SETTLE_MAX_NS (200 * 1000000ull)
/* How long a child may take to exec before it is followed as a fork. */
#define FORK_GRACE_NS (5 * 1000000ull)
/* How often the rules are matched against /proc, exited and exec'd targets
 * looked for, and idle ones let go. */
#define SCAN_INTERVAL_NS (1000 * 1000000ull)
/* Exits the reaper has not yet handled: the watch list's size. */
#define EXITS_MAX HP_MAX_WATCHED
/* Attaches run at once (process_watch_workers.c). An attach mostly waits
 * for the target's thread to be scheduled through each of its stops, and
 * in a burst the new processes fill the run queue: on 2 CPUs, 40 processes
 * at once had 43% of their first allocations seen with 4 workers and 87%
 * with 8 (tests/bench/exec_bench.py); 16 did no better than 8. */
#define ATTACH_WORKERS 8
/* Processes whose attach failed, remembered so a rule does not retry them
 * every second (a kernel thread named like a target, a process without
 * malloc). */
#define FAILED_MEMORY 256

/* A process to attach once it is ready. */
struct pending {
    pid_t pid;
    pid_t parent;          /* a forked child's parent (0: an exec) */
    bool reattach;         /* a target that exec'd */
    int sampler;           /* the sampler it asks for (enum sampler_kind), -1: the default */
    uint64_t event_ns;     /* its exec or fork */
    uint64_t not_before_ns; /* a child: its fork plus the grace */
    struct holders holders;
    bool wait_parent;      /* a child forked while its parent was being attached: its holders,
                            * sampler and owner are its parent's once that is live */
    bool owned;            /* a child: its parent's owner, whose cap it counts against */
    uid_t owner;
    bool from_scan;        /* a rule's match found by the 1 s scan (no event, no delay) */
    bool was_target;       /* ... that was profiled already, for another reason */
};

/* What a worker's attach of `pid` came to. */
struct attach_result {
    pid_t pid;
    int e;
    bool settle; /* tried while its dynamic linker may still be loading */
    char err[256];
};

/* The watch: what both threads share, under `lock`, and the attacher's own. */
struct process_watch {
    struct targets *targets;
    struct process_events *events; /* NULL: the scan alone */
    pthread_mutex_t lock;          /* the rules, the exit queue, the stats, stopping */
    pthread_cond_t wake_reaper;
    struct target_rule_set rules; /* under lock */
    pid_t exits[EXITS_MAX];       /* under lock */
    size_t nexits;                /* under lock */
    struct process_watch_stats stats; /* under lock */
    int stopping;                     /* under lock */
    /* Set once the workers run: the scan queues what it matches for them
     * rather than attach it on the attacher's thread, which would leave
     * the kernel's events unread meanwhile. The first scan, at start,
     * attaches before the daemon serves. */
    bool scan_queues;
    /* The attacher's own. */
    struct pending pending[PENDING_MAX]; /* oldest first once sorted */
    size_t npending;
    bool pending_unsorted; /* added to since the last sort */
    struct {
        pid_t pid;
        uint64_t start_time;
    } failed[FAILED_MEMORY];
    size_t next_failed;
    /* Handed to the workers and not yet finished: the attacher's own. */
    struct pending inflight[PENDING_MAX];
    size_t ninflight;
    /* The workers' queue and results, under work_lock. */
    pthread_mutex_t work_lock;
    pthread_cond_t work_ready;
    struct pending work[PENDING_MAX]; /* a ring: oldest first */
    size_t work_head, work_len;
    struct attach_result done[PENDING_MAX];
    size_t ndone;
    int workers_stopping;
    pthread_t workers[ATTACH_WORKERS];
    size_t nworkers;
    pthread_t attacher, reaper;
};

/* Adds `n` to `counter`, one of w->stats. */
void watch_count(struct process_watch *w, uint64_t *counter, uint64_t n);

/* process_watch_pending.c: the attacher's own, called from its thread only. */

/* Whether the attach of this very process failed before. */
bool watch_failed_before(struct process_watch *w, pid_t pid, uint64_t start_time);

/* Remembers a process whose attach for a rule failed, saying why once. */
void watch_remember_failure(struct process_watch *w, pid_t pid, const char *err);

/* Queues `p->pid` to attach once ready; a full queue leaves it to the scan. */
void watch_add_pending(struct process_watch *w, const struct pending *p);

/* Attaches the pending processes whose time has come: an exec'd one once
 * its libraries are loaded (or EXEC_SETTLE_MAX_NS passed), a child after
 * its grace. */
void watch_attach_pending(struct process_watch *w);

/* What became of the attach of `pid`, which the scan matched (profiled
 * already for another reason if `was_target`): counted, its children
 * queued, or the failure remembered so the scan does not retry it. */
void watch_scan_outcome(struct process_watch *w, pid_t pid, bool was_target, int e,
                        const char *err);

/* Whether `pid` waits in the pending list or is being attached (the scan
 * leaves it be). */
bool watch_is_pending(struct process_watch *w, pid_t pid);

/* process_watch_workers.c. */

/* Starts the workers; -errno if not even one could be. */
int watch_workers_start(struct process_watch *w);
/* Stops them; attaches queued and not started are dropped. */
void watch_workers_stop(struct process_watch *w);
/* Hands `p` to a worker (attacher only): it is in flight until its result
 * is taken. False if it cannot be (no worker). */
bool watch_dispatch(struct process_watch *w, const struct pending *p);
/* Moves up to `max` finished attaches into `out`; how many. */
size_t watch_take_results(struct process_watch *w, struct attach_result *out, size_t max);
/* The process in flight with pid `pid`, or NULL (attacher only). */
struct pending *watch_inflight(struct process_watch *w, pid_t pid);

/* Queues the children `pid` has now as forks of it: those forked before
 * it was attached (a server that forks its workers at start) carry its
 * sampler and are attached as fork children. In process_watch.c. */
void watch_existing_children(struct process_watch *w, pid_t pid);

#endif
