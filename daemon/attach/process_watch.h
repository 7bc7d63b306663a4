/*
 * process_watch.h - acts on process lifetimes, so that profiling costs
 * only while someone asks and starts with a process's first allocations:
 *
 * - an exec that a target rule matches is attached as soon as the new
 *   program's dynamic linker has loaded its libraries (~1 ms after the
 *   exec), not at the next scan; a target that exec'd is attached afresh;
 * - a child forked by a target is attached as soon as it exists, held as
 *   long as its parent was (it inherits its parent's probes and pays for
 *   them either way); a child that cannot be (--max-targets) is logged and
 *   counted on its parent;
 * - a target's exit keeps its last profile at once;
 * - every second: the rules are matched against /proc (what events
 *   missed), exited and exec'd targets are found, targets that nothing
 *   holds any more are let go (--idle-detach).
 *
 * Two threads: one attaches (events, the scan), one detaches (exits,
 * expiry), so that a detach, which waits for RCU, never delays an attach.
 * Without the event source (a kernel without BTF tracepoints) the scan
 * does it all, once a second, as before.
 */
#ifndef HEAPPROF_PROCESS_WATCH_H
#define HEAPPROF_PROCESS_WATCH_H

#include <stdint.h>

#include "target_rules.h"
#include "targets.h"

struct process_watch;
struct process_events;

/* What the watch has seen and done (counters since start). */
/* Why a process a rule matched at its exec was not attached. */
enum exec_missed {
    EXEC_MISSED_QUEUE_FULL, /* more new processes at once than the attacher queues */
    EXEC_MISSED_EXITED,     /* it exited (or exec'd again) before its attach */
    EXEC_MISSED_MAX_TARGETS, /* --max-targets processes were profiled already */
    EXEC_MISSED_ERROR,      /* its attach failed (logged) */
    EXEC_MISSED_REASONS,
};

/* The bounds of the fork-to-attached histogram, in ms: from the 5 ms grace
 * a child is given to exec to the seconds a burst of forks waited
 * (issue 26: 0.17-3.3 s for 8 pgbench backends). */
#define FORK_DELAY_BOUNDS_MS {5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000}
#define FORK_DELAY_BUCKETS 11

struct process_watch_stats {
    uint64_t execs, forks, exits;   /* events received */
    uint64_t events_lost;           /* dropped by a full ring buffer */
    uint64_t watch_full;            /* processes the kernel could not watch */
    uint64_t exec_attached;         /* rule matches attached on their exec event */
    uint64_t exec_attach_delay_ns;  /* the sum of their delays from exec to attached */
    uint64_t exec_missed[EXEC_MISSED_REASONS]; /* rule matches at exec not attached, by why */
    uint64_t scan_attached;         /* rule matches the 1 s scan attached (events missed them) */
    uint64_t forks_attached;        /* children of targets attached */
    /* Their delays from fork to attached: a histogram, each bucket counting
     * the delays up to its bound (FORK_DELAY_BOUNDS_MS), cumulative as
     * Prometheus has it, and their sum. */
    uint64_t fork_delay_buckets[FORK_DELAY_BUCKETS];
    uint64_t fork_delay_ns;
    uint64_t forks_unprofiled;      /* children of targets that could not be */
    int events_on;                  /* 1 if the event source runs */
};

/*
 * Starts watching for `targets` with `rules` (copied) and `events` (NULL:
 * none; the watch owns it from here). 0, or -errno.
 */
int process_watch_start(struct process_watch **out, struct targets *targets,
                        const struct target_rule_set *rules, struct process_events *events);

/* Stops both threads and frees the watch (and the event source). */
void process_watch_stop(struct process_watch *w);

/* Takes new rules (SIGHUP); -ENOMEM keeps the old ones. */
int process_watch_set_rules(struct process_watch *w, const struct target_rule_set *rules);

void process_watch_stats(struct process_watch *w, struct process_watch_stats *out);

#endif
