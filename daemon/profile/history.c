/*
 * history.c - memory over time per process (see history.h): a thread
 * reads every target's totals each period in one walk of the counts map
 * (the same read /metrics does) and appends them to the process's ring.
 */
#include "history.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "daemon_ctx.h"
#include "exited_profiles.h"
#include "proc_info.h"
#include "target_info.h"

/* Frees what history_init() allocated. */
static void free_buffers(struct history *h)
{
    free(h->v);
    free(h->tick_info);
    free(h->tick_tgids);
    free(h->tick_starts);
    free(h->tick_totals);
    h->v = NULL;
}

int history_init(struct history *h, struct daemon_ctx *ctx, uint64_t period_ns)
{
    memset(h, 0, sizeof(*h));
    h->v = calloc(HISTORY_MAX_SERIES, sizeof(*h->v));
    h->tick_info = calloc(HP_MAX_TARGETS, sizeof(*h->tick_info));
    h->tick_tgids = calloc(HP_MAX_TARGETS, sizeof(*h->tick_tgids));
    h->tick_starts = calloc(HP_MAX_TARGETS, sizeof(*h->tick_starts));
    h->tick_totals = calloc(HP_MAX_TARGETS, sizeof(*h->tick_totals));
    if (!h->v || !h->tick_info || !h->tick_tgids || !h->tick_starts || !h->tick_totals) {
        free_buffers(h);
        return -ENOMEM;
    }
    h->ctx = ctx;
    h->period_ns = period_ns;
    pthread_mutex_init(&h->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&h->wake, &attr);
    pthread_condattr_destroy(&attr);
    return 0;
}

/* Empties a slot. */
static void clear_series(struct history_series *s)
{
    free(s->ring);
    memset(s, 0, sizeof(*s));
}

/* The slot of process (pid, start_time), made if `make` and there is
 * room (a process reusing a pid replaces the old one's history); NULL if
 * none. Lock held. */
static struct history_series *series_of(struct history *h, pid_t pid, uint64_t start_time,
                                        bool make)
{
    struct history_series *free_slot = NULL;
    for (size_t i = 0; i < HISTORY_MAX_SERIES; i++) {
        struct history_series *s = &h->v[i];
        if (s->pid == pid) {
            if (s->start_time == start_time || !make)
                return s;
            clear_series(s); /* the pid now names another process */
        }
        if (!s->pid && !free_slot)
            free_slot = s;
    }
    if (!make || !free_slot)
        return NULL;
    free_slot->ring = calloc(HISTORY_POINTS, sizeof(*free_slot->ring));
    if (!free_slot->ring)
        return NULL;
    free_slot->pid = pid;
    free_slot->start_time = start_time;
    return free_slot;
}

/* Appends a point, the oldest going once the ring is full. */
static void append(struct history_series *s, const struct history_point *p)
{
    if (s->n < HISTORY_POINTS) {
        s->ring[(s->head + s->n++) % HISTORY_POINTS] = *p;
    } else {
        s->ring[s->head] = *p;
        s->head = (s->head + 1) % HISTORY_POINTS;
    }
}

/* A point from fixed-point BPF totals. In-use can dip below zero for a
 * moment (a free seen before its sampled allocation's count): shown as 0. */
static struct history_point point_of(const struct hp_counts *c, int64_t time_ms)
{
    struct history_point p = {.time_ms = time_ms};
    p.inuse_bytes = c->inuse_bytes > 0 ? c->inuse_bytes >> HP_BYTES_SHIFT : 0;
    p.inuse_objects = c->inuse_objects > 0 ? c->inuse_objects >> HP_OBJ_SHIFT : 0;
    p.alloc_bytes = (int64_t)(c->alloc_bytes >> HP_BYTES_SHIFT);
    p.alloc_objects = (int64_t)(c->alloc_objects >> HP_OBJ_SHIFT);
    return p;
}

/* Drops the histories of processes that are no longer targets, once they
 * have had no point for HISTORY_GRACE_PERIODS and have no kept last
 * profile. Lock held. */
static void prune(struct history *h, uint64_t now)
{
    for (size_t i = 0; i < HISTORY_MAX_SERIES; i++) {
        struct history_series *s = &h->v[i];
        if (!s->pid || s->live || now - s->last_ns < HISTORY_GRACE_PERIODS * h->period_ns)
            continue;
        if (!h->ctx->exited || !exited_profiles_has(h->ctx->exited, s->pid, s->start_time))
            clear_series(s);
    }
}

void history_tick(struct history *h)
{
    struct daemon_ctx *ctx = h->ctx;
    if (!ctx->targets || !ctx->bpf)
        return;
    struct target_info *info = h->tick_info;
    uint32_t *tgids = h->tick_tgids;
    uint64_t *starts = h->tick_starts;
    struct hp_counts *totals = h->tick_totals;
    size_t n = 0, all = targets_list(ctx->targets, info, HP_MAX_TARGETS);
    for (size_t i = 0; i < all && i < HP_MAX_TARGETS; i++) {
        /* A process gone since the list was made has no start time: its
         * history keeps the points it has. */
        if (proc_start_time(info[i].pid, &starts[n]) != 0)
            continue;
        info[n] = info[i];
        tgids[n++] = (uint32_t)info[i].pid;
    }
    if (bpf_state_process_totals(ctx->bpf, tgids, n, totals) != 0)
        n = 0;
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    int64_t time_ms = (int64_t)wall.tv_sec * 1000 + wall.tv_nsec / 1000000;
    uint64_t now = monotonic_ns();
    pthread_mutex_lock(&h->lock);
    for (size_t i = 0; i < HISTORY_MAX_SERIES; i++)
        h->v[i].live = false;
    for (size_t i = 0; i < n; i++) {
        struct history_series *s = series_of(h, info[i].pid, starts[i], true);
        if (!s)
            continue; /* out of memory: this point is lost, the next may fit */
        struct history_point p = point_of(&totals[i], time_ms);
        append(s, &p);
        memcpy(s->comm, info[i].comm, sizeof(s->comm));
        s->live = true;
        s->last_ns = now;
    }
    prune(h, now);
    pthread_mutex_unlock(&h->lock);
}

/* The thread: a point now, then one every period until stopped. */
static void *history_main(void *arg)
{
    struct history *h = arg;
    uint64_t next = monotonic_ns();
    pthread_mutex_lock(&h->lock);
    while (!h->stop) {
        if (monotonic_ns() >= next) {
            pthread_mutex_unlock(&h->lock);
            history_tick(h);
            /* A period missed (the machine was busy) is skipped, not
             * made up by points in a burst. */
            next += h->period_ns;
            if (next <= monotonic_ns())
                next = monotonic_ns() + h->period_ns;
            pthread_mutex_lock(&h->lock);
            continue;
        }
        struct timespec until = {.tv_sec = (time_t)(next / 1000000000u),
                                 .tv_nsec = (long)(next % 1000000000u)};
        pthread_cond_timedwait(&h->wake, &h->lock, &until);
    }
    pthread_mutex_unlock(&h->lock);
    return NULL;
}

int history_start(struct history *h)
{
    int e = pthread_create(&h->thread, NULL, history_main, h);
    h->started = e == 0;
    return -e;
}

void history_destroy(struct history *h)
{
    if (!h->v)
        return;
    if (h->started) {
        pthread_mutex_lock(&h->lock);
        h->stop = true;
        pthread_cond_signal(&h->wake);
        pthread_mutex_unlock(&h->lock);
        pthread_join(h->thread, NULL);
    }
    for (size_t i = 0; i < HISTORY_MAX_SERIES; i++)
        clear_series(&h->v[i]);
    free_buffers(h);
    pthread_mutex_destroy(&h->lock);
    pthread_cond_destroy(&h->wake);
}

/* The history of `pid`: that of the process at the pid now (started at
 * `current`; 0: none runs) if it has one, else (`kept`) the newest of a
 * process that had the pid, else NULL. Lock held. A history is found by
 * pid and start time, never by pid alone: the pid of a process that
 * exited may name another user's process before the next tick. */
static struct history_series *find_locked(struct history *h, pid_t pid, uint64_t current, bool kept)
{
    struct history_series *found = NULL;
    for (size_t i = 0; i < HISTORY_MAX_SERIES; i++) {
        struct history_series *s = &h->v[i];
        if (s->pid != pid)
            continue;
        if (current && s->start_time == current)
            return s;
        if (kept && (!found || s->start_time > found->start_time))
            found = s;
    }
    return found;
}

/* The start time of the process at `pid` now, 0 if none runs. */
static uint64_t started_now(pid_t pid)
{
    uint64_t t;
    return proc_start_time(pid, &t) == 0 ? t : 0;
}

/* The JSON name of a comm: only the bytes that need no escaping, since a
 * program chooses its name (the page shows it as text anyway). */
static void safe_comm(char out[17], const char *comm)
{
    size_t i = 0;
    for (; comm[i] && i < 16; i++)
        out[i] = (comm[i] == '"' || comm[i] == '\\' || (unsigned char)comm[i] < 0x20 ||
                  (unsigned char)comm[i] >= 0x7f)
                     ? '?'
                     : comm[i];
    out[i] = '\0';
}

/* The JSON's head, up to the opening of its points. */
static int write_head(struct history *h, struct strbuf *out, pid_t pid, const char *raw_comm,
                      bool live)
{
    char comm[17];
    safe_comm(comm, raw_comm);
    return strbuf_printf(out,
                         "{\"pid\": %d, \"comm\": \"%s\", \"live\": %s, \"period_seconds\": %g, "
                         "\"max_points\": %d,\n \"columns\": [\"time_ms\", \"inuse_bytes\", "
                         "\"inuse_objects\", \"alloc_bytes\", \"alloc_objects\"],\n \"points\": [",
                         (int)pid, comm, live ? "true" : "false", h->period_ns / 1e9,
                         HISTORY_POINTS);
}

int history_write_json(struct history *h, pid_t pid, const struct caller *who, struct strbuf *out)
{
    uint64_t current = started_now(pid);
    int may = access_may_profile(who, pid);
    if (current && started_now(pid) != current)
        may = -ESRCH; /* the access check was of another process */
    struct target_info info;
    /* A target attached since the last tick has no point yet: an empty history. */
    bool target = h->ctx->targets && targets_info(h->ctx->targets, pid, &info);
    pthread_mutex_lock(&h->lock);
    /* The running process's history: for who may profile it; a kept one's
     * (a process that had the pid): for a trusted caller, as its kept
     * profile (its owner is gone). */
    struct history_series *s = find_locked(h, pid, current, who->trusted);
    bool running = s && current && s->start_time == current;
    int e = running ? may : s ? 0 : target ? may : -ENOENT;
    if (e == 0)
        e = s ? write_head(h, out, pid, s->comm, s->live)
              : write_head(h, out, pid, info.comm, true);
    for (size_t i = 0; e == 0 && s && i < s->n; i++) {
        const struct history_point *p = &s->ring[(s->head + i) % HISTORY_POINTS];
        e = strbuf_printf(out,
                          "%s\n  [%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "]",
                          i ? "," : "", p->time_ms, p->inuse_bytes, p->inuse_objects,
                          p->alloc_bytes, p->alloc_objects);
    }
    if (e == 0)
        e = strbuf_printf(out, "]}\n");
    pthread_mutex_unlock(&h->lock);
    return e;
}

int history_write_spark(struct history *h, pid_t pid, struct strbuf *out)
{
    uint64_t current = started_now(pid);
    pthread_mutex_lock(&h->lock);
    struct history_series *s = current ? find_locked(h, pid, current, false) : NULL;
    size_t n = s ? s->n : 0, first = n > HISTORY_SPARK_POINTS ? n - HISTORY_SPARK_POINTS : 0;
    int e = strbuf_printf(out, "[");
    for (size_t i = first; e == 0 && i < n; i++)
        e = strbuf_printf(out, "%s%" PRId64, i > first ? ", " : "",
                          s->ring[(s->head + i) % HISTORY_POINTS].inuse_bytes);
    if (e == 0)
        e = strbuf_printf(out, "]");
    pthread_mutex_unlock(&h->lock);
    return e;
}
