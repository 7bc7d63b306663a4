/*
 * profile_request.c - a profile request from its parameters to encoded
 * bytes (see profile_request.h). Every process a request attaches, named
 * by pid or picked by a selector, goes through attach_for(): the same
 * access check, per-uid cap, --max-targets and audit line, and the same
 * attach policy: the request holds it until --idle-detach passes without
 * another; a delta profile (seconds=) holds it only for its window, so a
 * process scraped that way pays only while the scrape lasts.
 */
#include "profile_request.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "exited_profiles.h"
#include "proc_info.h"
#include "profile_formats.h"
#include "selection.h"
#include "snapshots.h"
#include "base_request.h"
#include "strbuf.h"
#include "views.h"

/* Makes sure process `pid` (started at `started`; 0: whichever has the pid)
 * may be profiled by `who` and is attached, held by this request: for its
 * window (`seconds`), or until --idle-detach passes without another
 * request; within the caller's share of the targets if it is not trusted.
 * An attach is logged with who asked (the audit line). */
static int attach_for(struct daemon_ctx *ctx, const struct caller *who, pid_t pid,
                      uint64_t started, unsigned seconds, char *err, size_t errlen)
{
    int e = access_may_profile(who, pid);
    if (e == -EACCES || e == -EPERM) {
        snprintf(err, errlen, "uid %u may not profile process %d, which is %s", (unsigned)who->uid,
                 (int)pid,
                 e == -EACCES ? "not its own"
                              : "not dumpable (prctl PR_SET_DUMPABLE 0, or it gained ids or "
                                "capabilities at exec): ptrace would refuse too");
        return e;
    }
    uint64_t now = monotonic_ns(), idle = targets_idle_ns(ctx->targets);
    struct target_info attached;
    struct hold_request how = {.kind = HOLD_REQUEST,
                               .until_ns = idle ? now + idle : HOLD_FOREVER,
                               .owner = who->trusted ? NULL : &who->uid,
                               .started = started,
                               .attached = &attached};
    if (seconds) {
        how.kind = HOLD_WINDOW;
        how.until_ns = now + (uint64_t)seconds * 1000000000u;
    }
    e = targets_hold(ctx->targets, pid, &how, err, errlen);
    if (e == 0 && attached.pid)
        access_audit_attach(stderr, who, attached.pid, attached.comm, attached.sampler);
    return e;
}

/* Whether `pid` runs, is not a target, and has a kept profile: it was let
 * go when nothing held it. */
static int was_let_go(struct daemon_ctx *ctx, pid_t pid)
{
    struct holders h;
    uint64_t start_time;
    return proc_start_time(pid, &start_time) == 0 &&
           !targets_holders_of(ctx->targets, pid, &h, NULL) &&
           exited_profiles_has(ctx->exited, pid, start_time);
}

/* Whether a kept last profile answers `q`: only the plain cumulative views
 * are kept, and only a trusted caller may read one, as the process's owner
 * can no longer be checked. */
static int may_read_kept(const struct profile_query *q, const struct caller *who)
{
    return q->seconds == 0 && q->min_age_ns == 0 && who->trusted;
}

/* The kept last profile of q->pid, which exited, in the form asked for:
 * the forms kept encoded as they are, the others made from the kept
 * profile. -ESRCH (with `err` as the attach left it) if none is kept. */
static int answer_exited(struct daemon_ctx *ctx, const struct profile_query *q, int default_alloc,
                         const struct pprof_buf *base, struct profile_answer *out, char *err,
                         size_t errlen)
{
    struct profile_form form = {.q = q, .default_alloc = default_alloc, .base = base->data,
                                .base_len = base->len};
    int e;
    if (q->format != FORMAT_PROTO || base->data) {
        e = exited_profiles_write(ctx->exited, q->pid, profile_form_write_cb, &form, &out->body);
    } else {
        enum exited_form kept = q->debug       ? EXITED_TEXT
                                : default_alloc ? EXITED_ALLOCS_PROTO
                                                : EXITED_HEAP_PROTO;
        form.content_type = q->debug ? "text/plain; charset=utf-8" : "application/octet-stream";
        e = exited_profiles_get(ctx->exited, q->pid, kept, &out->body);
    }
    if (e) {
        pprof_buf_free(&out->body);
        if (e == -ENOENT)
            return -ESRCH;
        if (form.why[0])
            snprintf(err, errlen, "the last profile of process %d: %s", (int)q->pid, form.why);
        else
            snprintf(err, errlen, "write the last profile of process %d: %s", (int)q->pid,
                     strerror(-e));
        return e;
    }
    out->content_type = form.content_type;
    atomic_fetch_add(&ctx->profiles_served, 1);
    return 0;
}

/* Writes the built profile `p` (freed here) in the form `q` asks for. */
static int answer_built(struct daemon_ctx *ctx, const struct profile_query *q, int default_alloc,
                        struct pprof_profile *p, uint64_t t0, const struct pprof_buf *base,
                        struct profile_answer *out, char *err, size_t errlen)
{
    struct profile_form form = {.q = q, .default_alloc = default_alloc,
                                .base = base ? base->data : NULL,
                                .base_len = base ? base->len : 0};
    int e = profile_form_write(p, &form, &out->body);
    out->content_type = form.content_type;
    pprof_free(p);
    atomic_fetch_add(&ctx->profile_build_ns, monotonic_ns() - t0);
    atomic_fetch_add(&ctx->profile_builds, 1);
    if (e) {
        pprof_buf_free(&out->body);
        snprintf(err, errlen, "%s", form.why);
        return e;
    }
    atomic_fetch_add(&ctx->profiles_served, 1);
    return 0;
}

/* Attaches every process in `procs` for `who` (for the window of a delta
 * profile, or as a request holds a pid) and moves those attached to the
 * front of `procs`, returning their count. Each process that could not be
 * attached gets a comment line in `notes`, and the first such error is in
 * *first. */
static size_t attach_selected(struct daemon_ctx *ctx, const struct profile_query *q,
                              const struct caller *who, struct process_found *procs, size_t n,
                              struct strbuf *notes, int *first, char *err, size_t errlen)
{
    size_t kept = 0;
    char why[512];
    *first = 0;
    for (size_t i = 0; i < n; i++) {
        int e = attach_for(ctx, who, procs[i].pid, procs[i].start_time, q->seconds, why,
                           sizeof(why));
        if (e == 0) {
            procs[kept++] = procs[i];
            continue;
        }
        if (e == -ESRCH)
            continue; /* it exited meanwhile: it no longer matches */
        if (e == -ENOEXEC) /* as for a pid: the operator should hear of it */
            fprintf(stderr, "heapprofd: %s\n", why);
        if (!*first) {
            *first = e;
            snprintf(err, errlen, "%s", why);
        }
        strbuf_printf(notes, "heapprofd: process %d (%s) matches but is not profiled: %s\n",
                      (int)procs[i].pid, procs[i].comm, why);
    }
    return kept;
}

/* Adds each line of `notes` as a comment of `p`. */
static int add_notes(struct pprof_profile *p, const struct strbuf *notes)
{
    int e = 0;
    for (size_t at = 0; at < notes->len && e == 0;) {
        const char *line = notes->data + at;
        size_t len = strcspn(line, "\n");
        char *copy = strndup(line, len);
        e = copy ? pprof_add_comment(p, copy) : -ENOMEM;
        free(copy);
        at += len + 1;
    }
    return e;
}

/* The merged profile of the processes q->sel picks: those running now
 * (attached first, like a pid) and, for a caller who may read them, the
 * kept profiles of those that exited. None at all is an empty profile:
 * a service between two runs, or whose processes the caller may not see,
 * is not an error. */
static int answer_selected(struct daemon_ctx *ctx, const struct profile_query *q,
                           const struct caller *who, int default_alloc, struct profile_answer *out,
                           char *err, size_t errlen)
{
    struct process_found *procs = NULL;
    struct strbuf notes = {0};
    struct pprof_profile *p = NULL;
    char scope[700];
    int first;
    long found = selection_find(q, who, &procs, err, errlen);
    if (found < 0)
        return (int)found;
    size_t n = attach_selected(ctx, q, who, procs, (size_t)found, &notes, &first, err, errlen);
    uint64_t t0 = monotonic_ns();
    selection_scope(q, scope, sizeof(scope));
    int e = views_build_set(ctx, q, who, procs, n, scope, default_alloc, &p, err, errlen);
    for (size_t i = 0; q->seconds && i < n; i++)
        targets_release(ctx->targets, procs[i].pid, HOLD_WINDOW);
    int exited = e == 0 && may_read_kept(q, who) ? selection_add_exited(ctx, q, p, procs, n) : 0;
    if (e == 0 && exited < 0) {
        e = exited;
        snprintf(err, errlen, "add the last profiles of exited processes: %s", strerror(-e));
    }
    if (e == 0 && n == 0 && exited == 0 && first)
        e = first; /* something matched, and nothing can be shown: say why */
    if (e == 0 && n == 0 && exited == 0)
        strbuf_printf(&notes, "heapprofd: no process that this caller may profile matches\n");
    if (e == 0)
        e = add_notes(p, &notes);
    if (e == 0) {
        e = answer_built(ctx, q, default_alloc, p, t0, NULL, out, err, errlen);
        p = NULL;
    }
    pprof_free(p);
    strbuf_free(&notes);
    free(procs);
    return e;
}

/* The profile of process q->pid, attached first; with a selector, only if
 * the process matches it (else -ESTALE, nothing attached); with a base,
 * its difference from the base. */
static int answer_pid(struct daemon_ctx *ctx, const struct profile_query *q,
                      const struct caller *who, int default_alloc, struct profile_answer *out,
                      char *err, size_t errlen)
{
    uint64_t started = 0;
    struct pprof_buf base = {0};
    int e = 0;
    if (process_selector_any(&q->sel)) {
        /* Who may not profile the pid learns nothing of what it runs. */
        int may = access_may_profile(who, q->pid);
        if (may == -EACCES || may == -EPERM)
            return attach_for(ctx, who, q->pid, 0, q->seconds, err, errlen);
        e = selection_guard(ctx, q, may_read_kept(q, who), &started, err, errlen);
    }
    /* The identity the access check below approves; every read is checked
     * against it (docs/security.md). */
    if (e == 0 && !started && proc_start_time(q->pid, &started) != 0)
        started = 0; /* gone: attach_for() says so */
    if (e == 0)
        e = base_request_load(ctx, q, &base, err, errlen);
    /* A process let go while idle: the next request gets the profile it had
     * then, and attaches it again. */
    int kept = e == 0 && may_read_kept(q, who) && was_let_go(ctx, q->pid);
    if (e == 0)
        e = attach_for(ctx, who, q->pid, started, q->seconds, err, errlen);
    if ((e == -ESRCH || (e == 0 && kept)) && may_read_kept(q, who)) {
        e = answer_exited(ctx, q, default_alloc, &base, out, err, errlen);
        pprof_buf_free(&base);
        return e;
    }
    if (e == -ENOEXEC) /* not the caller's mistake: the operator should hear of it */
        fprintf(stderr, "heapprofd: %s\n", err);
    uint64_t t0 = monotonic_ns();
    struct pprof_profile *p = NULL;
    if (e == 0) {
        e = views_build(ctx, q, who, started, default_alloc, &p, err, errlen);
        if (q->seconds)
            targets_release(ctx->targets, q->pid, HOLD_WINDOW);
    }
    if (e == 0)
        e = answer_built(ctx, q, default_alloc, p, t0, base.data ? &base : NULL, out, err,
                         errlen);
    pprof_buf_free(&base);
    return e;
}

/* Whose snapshot take_snapshot() keeps, and where its id goes. */
struct snapshot_take {
    struct daemon_ctx *ctx;
    pid_t pid;
    uint64_t start_time;
    char *id;
};

/* Keeps the built or kept profile `p` as a snapshot (`arg`, a struct
 * snapshot_take; also exited_profiles_write's callback: `out` is unused). */
static int take_snapshot(const struct pprof_profile *p, void *arg, struct pprof_buf *out)
{
    (void)out;
    struct snapshot_take *t = arg;
    return snapshots_put(t->ctx->snapshots, t->pid, t->start_time, p, t->id);
}

int profile_request_snapshot(struct daemon_ctx *ctx, pid_t pid, const struct caller *who,
                             char id[SNAPSHOT_ID_LEN + 1], char *err, size_t errlen)
{
    struct profile_query q = {.pid = pid};
    struct snapshot_take t = {.ctx = ctx, .pid = pid, .id = id};
    struct pprof_buf unused = {0};
    if (!ctx->bpf) {
        snprintf(err, errlen, "BPF unavailable: %s", ctx->bpf_error);
        return -ENODEV;
    }
    /* As answer_pid(): a process that exited, or was let go while idle,
     * is what its kept profile says (its counts went with its probes). */
    int kept = may_read_kept(&q, who) && was_let_go(ctx, pid);
    /* The identity the access check approves, read before it (0: gone,
     * which attach_for() says). */
    if (proc_start_time(pid, &t.start_time) != 0)
        t.start_time = 0;
    int e = attach_for(ctx, who, pid, t.start_time, 0, err, errlen);
    if (e == 0 && !kept && !t.start_time)
        e = -ESRCH;
    if ((e == -ESRCH || (e == 0 && kept)) && may_read_kept(&q, who)) {
        t.start_time = exited_profiles_start_time(ctx->exited, pid);
        e = t.start_time ? exited_profiles_write(ctx->exited, pid, take_snapshot, &t, &unused)
                         : -ENOENT;
        if (e == -ENOENT) {
            snprintf(err, errlen, "no process %d, and no kept profile of it", (int)pid);
            return -ESRCH;
        }
    } else if (e == 0) {
        struct pprof_profile *p = NULL;
        e = views_build(ctx, &q, who, t.start_time, 0, &p, err, errlen);
        if (e)
            return e;
        e = take_snapshot(p, &t, &unused);
        pprof_free(p);
    } else {
        return e;
    }
    if (e)
        snprintf(err, errlen, "keep a snapshot of process %d: %s", (int)pid, strerror(-e));
    return e;
}

int profile_request_answer(struct daemon_ctx *ctx, const struct profile_query *q,
                           const struct caller *who, int default_alloc, struct profile_answer *out,
                           char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (!ctx->bpf) {
        snprintf(err, errlen, "BPF unavailable: %s", ctx->bpf_error);
        return -ENODEV;
    }
    if (q->pid)
        return answer_pid(ctx, q, who, default_alloc, out, err, errlen);
    if (process_selector_any(&q->sel))
        return answer_selected(ctx, q, who, default_alloc, out, err, errlen);
    uint64_t t0 = monotonic_ns();
    struct pprof_profile *p = NULL;
    int e = views_build(ctx, q, who, 0, default_alloc, &p, err, errlen);
    return e ? e : answer_built(ctx, q, default_alloc, p, t0, NULL, out, err, errlen);
}
