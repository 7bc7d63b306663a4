/*
 * history.h - memory over time: a bounded history per profiled process of
 * the totals the BPF counts give (in-use and allocated bytes and objects),
 * taken every period (--history-interval, 10 s by default) by a thread of
 * its own, HISTORY_POINTS of them (an hour at 10 s), for the process
 * page's chart, the index's sparklines and the JSON of
 * /debug/pprof/history.
 *
 * A process's history outlives its target: after a detach or an exit it
 * is kept as long as its last profile is (exited_profiles.h: the same pid
 * and start time), so that the chart of a process that died still shows
 * how it grew. A pid reused by another process starts a new history.
 *
 * Thread-safe: one lock, held only to copy points in or out; the BPF
 * maps are read outside it.
 */
#ifndef HEAPPROF_HISTORY_H
#define HEAPPROF_HISTORY_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "access.h"
#include "hp_limits.h"
#include "strbuf.h"
#include "target_info.h"

struct daemon_ctx;

/* Points kept per process: an hour at the default period of 10 s, which
 * is fine enough to see a leak's slope within a minute and coarse enough
 * that reading the totals (one walk of the counts map for all targets)
 * costs nothing to speak of. Each point is 40
 * bytes, so a full history is 14 KiB; at most HISTORY_MAX_SERIES of them
 * (about 15 MiB if every target slot and kept profile had one). */
#define HISTORY_POINTS 360
/* Histories at once: every target, and every kept last profile. */
#define HISTORY_MAX_SERIES (HP_MAX_TARGETS + 64)
/* A history whose process is no longer a target is dropped once it has
 * had no point for this many periods and has no kept profile: the grace
 * covers the moment between a target's end and its last profile being
 * kept. */
#define HISTORY_GRACE_PERIODS 6
/* Points the index's sparklines get: ten minutes at the default period. */
#define HISTORY_SPARK_POINTS 60

/* One point: when (wall clock, ms since the epoch, for the chart's axis)
 * and the process's totals then, in bytes and objects. */
struct history_point {
    int64_t time_ms;
    int64_t inuse_bytes, inuse_objects;
    int64_t alloc_bytes, alloc_objects;
};

/* The history of one process, a ring of HISTORY_POINTS. */
struct history_series {
    pid_t pid;           /* 0: a free slot */
    uint64_t start_time; /* the process's start time (proc_start_time) */
    char comm[17];
    bool live;                  /* a target at the last tick */
    uint64_t last_ns;           /* CLOCK_MONOTONIC of the last point */
    size_t head, n;             /* the oldest point and how many there are */
    struct history_point *ring; /* HISTORY_POINTS, owned */
};

/* Every history, and the thread that adds to them. */
struct history {
    pthread_mutex_t lock;     /* guards v and stop */
    pthread_cond_t wake;      /* history_stop() wakes the thread */
    struct history_series *v; /* HISTORY_MAX_SERIES slots (lock) */
    bool stop;                /* (lock) */
    pthread_t thread;
    bool started;
    struct daemon_ctx *ctx; /* where the totals come from */
    uint64_t period_ns;     /* between two points */
    /* What a tick reads, HP_MAX_TARGETS each, made once: only the thread
     * (or a test calling history_tick) uses them. */
    struct target_info *tick_info;
    uint32_t *tick_tgids;
    uint64_t *tick_starts;
    struct hp_counts *tick_totals;
};

/* Empties `h`, to take a point every `period_ns`; 0 or -ENOMEM. */
int history_init(struct history *h, struct daemon_ctx *ctx, uint64_t period_ns);
/* Starts the thread that takes a point every period; 0 or -errno. */
int history_start(struct history *h);
/* Stops the thread (if started) and frees everything. */
void history_destroy(struct history *h);

/* Takes one point of every target now (what the thread does each period;
 * not to be called while the thread runs). */
void history_tick(struct history *h);

/* Writes the history of `pid` as JSON (docs/http-api.md) if `who` may
 * see it: that of the process running at `pid` (the same start time) if
 * `who` may profile it, or a kept one (of a process that had the pid) for
 * a trusted caller.
 * -ENOENT if there is none, -EACCES/-EPERM if `who` may not. */
int history_write_json(struct history *h, pid_t pid, const struct caller *who, struct strbuf *out);

/* Appends the last HISTORY_SPARK_POINTS in-use byte totals of the process
 * running at `pid` to `out` as a JSON array ("[]" if it has no history). */
int history_write_spark(struct history *h, pid_t pid, struct strbuf *out);

#endif
