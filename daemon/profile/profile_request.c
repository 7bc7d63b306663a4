/*
 * profile_request.c - a profile request from its parameters to encoded
 * bytes (see profile_request.h).
 */
#include "profile_request.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "exited_profiles.h"
#include "profile_formats.h"
#include "views.h"

/* Makes sure process q->pid may be profiled by `who` and is attached,
 * within the caller's share of the targets if it is not trusted; an attach
 * is logged with who asked (the audit line). */
static int attach_for(struct daemon_ctx *ctx, const struct profile_query *q,
                      const struct caller *who, char *err, size_t errlen)
{
    int e = access_may_profile(who, q->pid);
    if (e == -EACCES || e == -EPERM) {
        snprintf(err, errlen, "uid %u may not profile process %d, which is %s", (unsigned)who->uid,
                 (int)q->pid,
                 e == -EACCES ? "not its own"
                              : "not dumpable (prctl PR_SET_DUMPABLE 0, or it gained ids or "
                                "capabilities at exec): ptrace would refuse too");
        return e;
    }
    struct target_info attached;
    e = targets_ensure_for(ctx->targets, q->pid, who->trusted ? NULL : &who->uid, -1, &attached,
                           err, errlen);
    if (e == 0 && attached.pid)
        access_audit_attach(stderr, who, attached.pid, attached.comm, attached.sampler);
    return e;
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
                         struct profile_answer *out, char *err, size_t errlen)
{
    struct profile_form form = {.q = q, .default_alloc = default_alloc};
    int e;
    if (q->format != FORMAT_PROTO) {
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
        snprintf(err, errlen, "write the last profile of process %d: %s", (int)q->pid,
                 strerror(-e));
        return e;
    }
    out->content_type = form.content_type;
    atomic_fetch_add(&ctx->profiles_served, 1);
    return 0;
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
    int e = q->pid ? attach_for(ctx, q, who, err, errlen) : 0;
    if (e == -ESRCH && may_read_kept(q, who))
        return answer_exited(ctx, q, default_alloc, out, err, errlen);
    if (e == -ENOEXEC) /* not the caller's mistake: the operator should hear of it */
        fprintf(stderr, "heapprofd: %s\n", err);
    if (e)
        return e;

    uint64_t t0 = monotonic_ns();
    struct pprof_profile *p = NULL;
    e = views_build(ctx, q, who, default_alloc, &p, err, errlen);
    if (e)
        return e;
    struct profile_form form = {.q = q, .default_alloc = default_alloc};
    e = profile_form_write(p, &form, &out->body);
    out->content_type = form.content_type;
    pprof_free(p);
    atomic_fetch_add(&ctx->profile_build_ns, monotonic_ns() - t0);
    atomic_fetch_add(&ctx->profile_builds, 1);
    if (e) {
        pprof_buf_free(&out->body);
        snprintf(err, errlen, "encode the profile: %s", strerror(-e));
        return e;
    }
    atomic_fetch_add(&ctx->profiles_served, 1);
    return 0;
}
