/*
 * views.c - reads the counts a request asks for and builds its profile
 * (see views.h).
 */
#include "views.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "heap_profile.h"
#include "proc_info.h"
#include "probe_cost.h"
#include "targets.h"
#include "visible_targets.h"

/* One process's counts being gathered. */
struct gathered {
    pid_t pid;
    uint64_t start_time; /* which process had the pid when access was checked */
    char comm[17];
    struct stack_counts *counts;
    size_t n;
};

/* The cumulative counts, or the live allocations older than min_age. */
static int read_one(struct daemon_ctx *ctx, const struct profile_query *q, pid_t pid,
                    struct stack_counts **out, size_t *n)
{
    targets_drain_frees(ctx->targets, pid); /* frees still in its ring count too */
    if (q->min_age_ns) {
        uint64_t now = monotonic_ns();
        uint64_t before = now > q->min_age_ns ? now - q->min_age_ns : 0;
        return bpf_state_read_live(ctx->bpf, (uint32_t)pid, before, out, n);
    }
    return bpf_state_read_counts(ctx->bpf, (uint32_t)pid, out, n);
}

/*
 * Whether pid g->pid is still the process that `who` was allowed to read:
 * the same start time, and `who` may still profile it (a setuid exec
 * keeps the start time but not the access). A pid freed and taken again
 * by another user's process fails the first test (docs/security.md, "A
 * read is of the process approved").
 */
static bool still_approved(const struct gathered *g, const struct caller *who)
{
    uint64_t now;
    if (proc_start_time(g->pid, &now) != 0 || now != g->start_time)
        return false;
    return !who || access_may_profile(who, g->pid) == 0;
}

/* Notes each process's start time, the identity later reads are checked
 * against; a process already gone is left out. Returns the count kept. */
static size_t note_identities(struct gathered *g, size_t ng, uint64_t started)
{
    size_t kept = 0;
    for (size_t i = 0; i < ng; i++) {
        if (started && ng == 1)
            g[i].start_time = started;
        else if (proc_start_time(g[i].pid, &g[i].start_time) != 0)
            continue;
        g[kept++] = g[i];
    }
    return kept;
}

/* Drops (frees the counts of) every process that is no longer the one
 * approved; returns the count kept, moved to the front. */
static size_t drop_changed(struct gathered *g, size_t ng, const struct caller *who)
{
    size_t kept = 0;
    for (size_t i = 0; i < ng; i++) {
        if (still_approved(&g[i], who)) {
            g[kept++] = g[i];
            continue;
        }
        free(g[i].counts);
        g[i].counts = NULL;
    }
    return kept;
}

/* Fills g[i].counts for every process, over the delta window if asked.
 * Processes whose pid changed hands (or whose access `who` lost) during
 * the window are dropped: *ng is the count kept. */
static int read_all(struct daemon_ctx *ctx, const struct profile_query *q, const struct caller *who,
                    struct gathered *g, size_t *ng)
{
    int e = 0;
    for (size_t i = 0; i < *ng && e == 0; i++)
        e = read_one(ctx, q, g[i].pid, &g[i].counts, &g[i].n);
    /* Nothing to wait for: an empty selection is answered at once. */
    if (e || q->seconds == 0 || *ng == 0)
        return e;
    /* Open from the first read to the second: /metrics shows it, so that
     * a client (the tests) knows what falls in the window. */
    atomic_fetch_add(&ctx->delta_windows_open, 1);
    sleep((unsigned)q->seconds);
    atomic_fetch_sub(&ctx->delta_windows_open, 1);
    /* A pid that changed hands in the window reads another process's
     * counts: every stack of it would be "new" in the delta. */
    *ng = drop_changed(g, *ng, who);
    for (size_t i = 0; i < *ng && e == 0; i++) {
        struct stack_counts *after = NULL, *delta = NULL;
        size_t nafter = 0, ndelta = 0;
        targets_drain_frees(ctx->targets, g[i].pid);
        e = bpf_state_read_counts(ctx->bpf, (uint32_t)g[i].pid, &after, &nafter);
        if (e == 0)
            e = heap_profile_delta(g[i].counts, g[i].n, after, nafter, &delta, &ndelta);
        free(after);
        free(g[i].counts);
        g[i].counts = delta;
        g[i].n = ndelta;
    }
    /* The second read may have raced an exit and a new process at the pid. */
    return e ? e : (*ng = drop_changed(g, *ng, who), 0);
}

/* The processes of the profile: one, or every target `who` may see. */
static size_t choose(struct daemon_ctx *ctx, const struct profile_query *q,
                     const struct caller *who, struct gathered *g)
{
    if (q->pid) {
        g[0].pid = q->pid;
        return 1;
    }
    struct visible_targets v;
    if (visible_targets_get(ctx, who, false, &v) != 0)
        return 0;
    for (size_t i = 0; i < v.n; i++) {
        g[i].pid = v.info[i].pid;
        memcpy(g[i].comm, v.info[i].comm, sizeof(g[i].comm));
    }
    size_t n = v.n;
    visible_targets_free(&v);
    return n;
}

/* The comments on what heapprofd did to the process: its cost, and how
 * soon after its exec or fork it was attached. */
static int add_target_comments(struct pprof_profile *p, const struct target_info *info)
{
    char line[256];
    probe_cost_describe(info->probe_hits, info->ns_per_hit, info->cpu_ns, line, sizeof(line));
    int e = pprof_add_comment(p, line);
    if (e == 0 && info->attach_delay_ns) {
        snprintf(line, sizeof(line), "heapprofd: attached %.1f ms after its exec or fork",
                 info->attach_delay_ns / 1e6);
        e = pprof_add_comment(p, line);
    }
    return e;
}

/* Builds the profile of the `ng` processes in `g` (their counts read
 * here) for `who`; with `label`, each sample labelled pid and comm;
 * `scope` says in a comment what they are (NULL: one process, or all).
 * A process that is no longer the one approved is left out; one that
 * changed while its maps were being read fails the build. Frees the
 * counts. */
static int build(struct daemon_ctx *ctx, const struct profile_query *q, const struct caller *who,
                 struct gathered *g, size_t ng, int label, const char *scope, int default_alloc,
                 struct pprof_profile **out, char *err, size_t errlen)
{
    struct heap_profile_part *parts = calloc(ng ? ng : 1, sizeof(*parts));
    size_t asked = ng;
    int e = parts ? read_all(ctx, q, who, g, &ng) : -ENOMEM;
    if (e) {
        snprintf(err, errlen, "read the BPF counts: %s", strerror(-e));
        goto out;
    }
    if (q->pid && ng < asked) {
        snprintf(err, errlen, "process %d exited, or changed, during the request", (int)q->pid);
        e = -ESRCH;
        goto out;
    }
    for (size_t i = 0; i < ng; i++)
        parts[i] = (struct heap_profile_part){
            .pid = g[i].pid, .comm = g[i].comm, .counts = g[i].counts, .n = g[i].n};
    struct heap_profile_spec spec = {
        .pid = q->pid,
        .default_alloc = default_alloc,
        .duration_ns = (int64_t)q->seconds * 1000000000,
        .symbolize = !q->no_symbols,
        .scope = scope,
    };
    e = heap_profile_build_parts(ctx->bpf, ctx->cache, &spec, parts, ng, label, out, err, errlen);
    /* Its mappings were read from /proc after the counts: the same process? */
    for (size_t i = 0; i < ng && e == 0; i++) {
        if (still_approved(&g[i], who))
            continue;
        snprintf(err, errlen, "process %d exited, or changed, during the request", (int)g[i].pid);
        pprof_free(*out);
        *out = NULL;
        e = -ESRCH;
    }
out:
    for (size_t i = 0; i < ng; i++)
        free(g[i].counts);
    free(parts);
    return e;
}

int views_build(struct daemon_ctx *ctx, const struct profile_query *q, const struct caller *who,
                uint64_t started, int default_alloc, struct pprof_profile **out, char *err,
                size_t errlen)
{
    struct gathered *g = calloc(HP_MAX_TARGETS, sizeof(*g));
    if (!g)
        return -ENOMEM;
    size_t ng = note_identities(g, choose(ctx, q, who, g), q->pid ? started : 0);
    int e = 0;
    if (q->pid && ng == 0) {
        snprintf(err, errlen, "process %d exited during the request", (int)q->pid);
        e = -ESRCH;
    }
    if (e == 0)
        e = build(ctx, q, who, g, ng, q->pid == 0, NULL, default_alloc, out, err, errlen);
    free(g);
    struct target_info info;
    if (e == 0 && q->pid && targets_info(ctx->targets, q->pid, &info))
        e = add_target_comments(*out, &info);
    return e;
}

int views_build_set(struct daemon_ctx *ctx, const struct profile_query *q, const struct caller *who,
                    const struct process_found *procs, size_t n, const char *scope,
                    int default_alloc, struct pprof_profile **out, char *err, size_t errlen)
{
    struct gathered *g = calloc(n ? n : 1, sizeof(*g));
    if (!g)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++) {
        g[i].pid = procs[i].pid;
        g[i].start_time = procs[i].start_time;
        memcpy(g[i].comm, procs[i].comm, sizeof(g[i].comm));
    }
    struct profile_query all = *q;
    all.pid = 0; /* several processes, each labelled */
    int e = build(ctx, &all, who, g, n, 1, scope, default_alloc, out, err, errlen);
    free(g);
    return e;
}

/* The comment that says why a kept profile is the last one. */
static void farewell_line(const struct target_farewell *f, char *line, size_t len)
{
    const struct holders *h = &f->info->holders;
    if (f->end == END_EXITED) {
        snprintf(line, len, "heapprofd: process %d exited; this is its last profile", (int)f->pid);
    } else if (h->count[HOLD_REQUEST] && f->idle_ns) {
        snprintf(line, len, "heapprofd: process %d was detached after %llu s without a request "
                 "(--idle-detach); this is its profile until then, and the next request "
                 "attaches it again", (int)f->pid, (unsigned long long)(f->idle_ns / 1000000000u));
    } else {
        snprintf(line, len, "heapprofd: process %d was detached when nothing held it any more "
                 "(its parent's profiling ended); this is its profile until then",
                 (int)f->pid);
    }
}

void views_keep_last_profile(void *arg, const struct target_farewell *f)
{
    struct daemon_ctx *ctx = arg;
    struct stack_counts *counts = NULL;
    size_t n = 0;
    struct pprof_profile *p = NULL;
    char err[256], line[256];
    if (bpf_state_read_counts(ctx->bpf, (uint32_t)f->pid, &counts, &n) != 0) {
        fprintf(stderr, "heapprofd: pid %d: its last counts could not be read\n", (int)f->pid);
        return;
    }
    struct heap_profile_part part = {.pid = f->pid, .comm = f->facts->comm, .maps = f->maps,
                                     .counts = counts, .n = n};
    if (f->end == END_EXITED) { /* /proc has nothing of it left to name its JIT code */
        part.exited_start = f->facts->start_time;
        part.exited_exe = f->facts->exe;
    }
    struct heap_profile_spec spec = {.pid = f->pid, .symbolize = true};
    if (heap_profile_build_parts(ctx->bpf, ctx->cache, &spec, &part, 1, 0, &p, err,
                                 sizeof(err)) == 0) {
        farewell_line(f, line, sizeof(line));
        pprof_add_comment(p, line);
        add_target_comments(p, f->info);
        if (exited_profiles_put(ctx->exited, f->pid, f->facts, p) == 0)
            p = NULL; /* kept */
        else
            fprintf(stderr, "heapprofd: pid %d: keeping its last profile failed\n", (int)f->pid);
    } else {
        fprintf(stderr, "heapprofd: pid %d: its last profile: %s\n", (int)f->pid, err);
    }
    pprof_free(p);
    free(counts);
}
