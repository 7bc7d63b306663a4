/*
 * selection.c - processes named by comm, exe, cgroup or unit: found in
 * /proc, filtered by who may profile them, the kept profiles of those that
 * exited merged in, and the guard of a pid (see selection.h).
 */
#include "selection.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "strutil.h"

/* What a look through the kept profiles for the guard finds. */
struct kept_guard {
    const struct profile_query *q;
    char *why;
    size_t whylen;
};

/* -ESTALE if the kept profile of q->pid is of a process q->sel does not
 * match, -ESRCH if it is of one it does (an exited_profiles_each visitor). */
static int guard_kept(pid_t pid, const struct process_facts *facts, const struct pprof_profile *p,
                      time_t exited_at, void *arg)
{
    (void)p;
    (void)exited_at;
    struct kept_guard *g = arg;
    if (pid != g->q->pid)
        return 0;
    return process_selector_matches(&g->q->sel, facts, g->why, g->whylen) ? -ESRCH : -ESTALE;
}

int selection_guard(struct daemon_ctx *ctx, const struct profile_query *q, int kept,
                    uint64_t *started, char *err, size_t errlen)
{
    char why[512], sel[600];
    struct process_facts facts;
    *started = 0;
    process_selector_describe(&q->sel, sel, sizeof(sel));
    int e = process_facts_read(q->pid, &facts);
    if (e == 0) {
        e = process_selector_matches(&q->sel, &facts, why, sizeof(why)) ? 0 : -ESTALE;
        *started = facts.start_time;
        process_facts_free(&facts);
    } else if (e == -ESRCH) {
        struct kept_guard g = {.q = q, .why = why, .whylen = sizeof(why)};
        e = kept ? exited_profiles_each(ctx->exited, guard_kept, &g) : 0;
        if (e == 0 || e == -ESRCH) {
            snprintf(err, errlen, "process %d does not exist", (int)q->pid);
            return -ESRCH;
        }
    }
    if (e == -ESTALE)
        snprintf(err, errlen, "process %d does not match %s: %s; not attached (its pid may "
                 "name another program now)", (int)q->pid, sel, why);
    else if (e)
        snprintf(err, errlen, "read /proc/%d: %s", (int)q->pid, strerror(-e));
    hide_control_bytes(err);
    return e;
}

long selection_find(const struct profile_query *q, const struct caller *who,
                    struct process_found **out, char *err, size_t errlen)
{
    /* The matches of the whole host, before they are filtered by who asks:
     * the limit is on what a request attaches, not on what a host runs. */
    size_t cap = 4 * SELECTION_MAX;
    struct process_found *found = calloc(cap, sizeof(*found));
    if (!found) {
        snprintf(err, errlen, "list the matching processes: %s", strerror(ENOMEM));
        return -ENOMEM;
    }
    long n = process_selector_find(&q->sel, found, cap);
    if (n < 0) {
        snprintf(err, errlen, "list the processes in /proc: %s", strerror((int)-n));
        free(found);
        return n;
    }
    size_t kept = 0;
    for (size_t i = 0; i < (size_t)n && i < cap && kept < SELECTION_MAX; i++)
        if (access_may_profile(who, found[i].pid) == 0)
            found[kept++] = found[i];
    *out = found;
    return (long)kept;
}

void selection_scope(const struct profile_query *q, char *buf, size_t len)
{
    char sel[600];
    process_selector_describe(&q->sel, sel, sizeof(sel));
    snprintf(buf, len, "processes matching %s", sel);
    hide_control_bytes(buf);
}

/* What merging the kept profiles needs. */
struct kept_merge {
    const struct profile_query *q;
    struct pprof_profile *p;
    const struct process_found *live;
    size_t n;
    int added;
};

/* Merges one kept profile into the selection's, if it matches and is not
 * of a process already in it (an exited_profiles_each visitor). */
static int merge_kept(pid_t pid, const struct process_facts *facts,
                      const struct pprof_profile *kept, time_t exited_at, void *arg)
{
    struct kept_merge *m = arg;
    if (!process_selector_matches(&m->q->sel, facts, NULL, 0))
        return 0;
    for (size_t i = 0; i < m->n; i++)
        if (m->live[i].pid == pid && m->live[i].start_time == facts->start_time)
            return 0;
    char pid_text[16], line[160];
    snprintf(pid_text, sizeof(pid_text), "%d", (int)pid);
    struct pprof_label labels[2] = {{"pid", pid_text}, {"comm", facts->comm}};
    int e = pprof_merge(m->p, kept, labels, 2);
    if (e == 0) {
        long ago = (long)(monotonic_ns() / 1000000000u) - (long)exited_at;
        snprintf(line, sizeof(line), "heapprofd: process %d (%s) exited %ld s ago; its last "
                 "profile is included", (int)pid, facts->comm, ago);
        e = pprof_add_comment(m->p, line);
    }
    m->added += e == 0;
    return e;
}

int selection_add_exited(struct daemon_ctx *ctx, const struct profile_query *q,
                         struct pprof_profile *p, const struct process_found *live, size_t n)
{
    struct kept_merge m = {.q = q, .p = p, .live = live, .n = n};
    /* A process that exited a moment ago: its last profile now, not once
     * its exit event is acted on. */
    targets_settle_exits(ctx->targets);
    int e = exited_profiles_each(ctx->exited, merge_kept, &m);
    return e ? e : m.added;
}
