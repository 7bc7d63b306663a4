/*
 * base_request.c - the base of a diff request, checked (see base_request.h).
 */
#include "base_request.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "proc_info.h"
#include "profile_diff.h"
#include "snapshots.h"

/* Snapshot q->base_id into `base`, if it is of process q->pid (the same
 * one: a pid reused since has another start time). */
static int load_snapshot(struct daemon_ctx *ctx, const struct profile_query *q,
                         struct pprof_buf *base, char *err, size_t errlen)
{
    pid_t pid = 0;
    uint64_t started = 0, now_started;
    int64_t time_ms;
    int e = snapshots_get(ctx->snapshots, q->base_id, &pid, &started, &time_ms, base);
    if (e == -ENOENT) {
        snprintf(err, errlen,
                 "no snapshot %s: never taken, or pushed out by newer ones (at "
                 "most %d are kept)",
                 q->base_id, SNAPSHOT_MAX);
    } else if (e) {
        snprintf(err, errlen, "read snapshot %s: %s", q->base_id, strerror(-e));
    } else if (pid != q->pid) {
        snprintf(err, errlen, "snapshot %s is of process %d, not of process %d", q->base_id,
                 (int)pid, (int)q->pid);
        e = -EXDEV;
    } else if (proc_start_time(pid, &now_started) == 0 && now_started != started &&
               exited_profiles_start_time(ctx->exited, pid) != started) {
        snprintf(err, errlen, "snapshot %s is of an earlier process with pid %d", q->base_id,
                 (int)pid);
        e = -EXDEV;
    }
    if (e)
        pprof_buf_free(base);
    return e;
}

int base_request_load(struct daemon_ctx *ctx, const struct profile_query *q, struct pprof_buf *base,
                      char *err, size_t errlen)
{
    if (q->base_id[0])
        return load_snapshot(ctx, q, base, err, errlen);
    if (!q->base_upload)
        return 0;
    int e = profile_diff_check_base(q->base_upload, q->base_upload_len, err, errlen);
    if (e == 0)
        e = pprof_buf_append(base, q->base_upload, q->base_upload_len);
    if (e == 0 && !base->data) /* an empty upload decodes as an empty profile: refused above */
        e = -EBADMSG;
    if (e)
        pprof_buf_free(base);
    return e;
}
