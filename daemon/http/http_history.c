/*
 * http_history.c - memory over time and diff bases over HTTP (see
 * http_history.h).
 */
#include "http_history.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

#include "http_server.h"
#include "profile_diff.h"
#include "profile_request.h"
#include "strutil.h"

void http_upload_add(struct http_upload *u, const char *data, size_t n)
{
    if (u->too_big || u->body.len + n > PROFILE_DIFF_MAX_BASE_BYTES ||
        pprof_buf_append(&u->body, data, n) != 0) {
        u->too_big = true;
        pprof_buf_free(&u->body);
    }
}

void http_upload_free(struct http_upload *u)
{
    pprof_buf_free(&u->body);
    free(u);
}

/* The pid= of a request into *pid; else the status and reason in `out`. */
static unsigned parse_pid(const char *arg, pid_t *pid, struct strbuf *out)
{
    uint64_t v;
    if (!arg || parse_u64(arg, 1, HP_MAX_PID, &v) != 0) {
        strbuf_printf(out, "bad or missing pid: want pid=N, a process id in 1..%d", HP_MAX_PID);
        return MHD_HTTP_BAD_REQUEST;
    }
    *pid = (pid_t)v;
    return 0;
}

unsigned http_history_serve(struct daemon_ctx *ctx, const struct caller *who, const char *pid_arg,
                            struct strbuf *out)
{
    pid_t pid;
    unsigned status = parse_pid(pid_arg, &pid, out);
    if (status)
        return status;
    if (!ctx->bpf) {
        strbuf_printf(out, "no history is kept: BPF unavailable: %s", ctx->bpf_error);
        return MHD_HTTP_SERVICE_UNAVAILABLE;
    }
    if (!ctx->history) {
        strbuf_printf(out, "no history of process %d: none is kept (--history-interval 0)",
                      (int)pid);
        return MHD_HTTP_NOT_FOUND;
    }
    int e = history_write_json(ctx->history, pid, who, out);
    if (e == 0)
        return MHD_HTTP_OK;
    strbuf_free(out);
    if (e == -EACCES || e == -EPERM) {
        strbuf_printf(out, "uid %u may not profile process %d", (unsigned)who->uid, (int)pid);
        return MHD_HTTP_FORBIDDEN;
    }
    if (e == -ENOENT) {
        strbuf_printf(out,
                      "no history of process %d: it is not profiled, and no profile of it "
                      "is kept",
                      (int)pid);
        return MHD_HTTP_NOT_FOUND;
    }
    strbuf_printf(out, "write the history of process %d: %s", (int)pid, strerror(-e));
    return MHD_HTTP_INTERNAL_SERVER_ERROR;
}

unsigned http_snapshot_serve(struct daemon_ctx *ctx, const struct caller *who, const char *pid_arg,
                             struct strbuf *out)
{
    pid_t pid;
    unsigned status = parse_pid(pid_arg, &pid, out);
    if (status)
        return status;
    char id[SNAPSHOT_ID_LEN + 1], err[1024];
    int e = profile_request_snapshot(ctx, pid, who, id, err, sizeof(err));
    if (e) {
        strbuf_printf(out, "%s", err);
        return http_status_of(e);
    }
    strbuf_printf(out, "{\"id\": \"%s\", \"pid\": %d}\n", id, (int)pid);
    return MHD_HTTP_OK;
}
