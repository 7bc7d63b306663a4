/*
 * http_history.h - the routes of memory over time and of diff bases:
 * GET /debug/pprof/history?pid=N (the JSON of history.h) and POST
 * /debug/pprof/snapshot?pid=N (keeps the current profile as a base; its
 * id comes back as JSON), and the body of a POST that uploads a base
 * profile to /debug/pprof/heap or /allocs, collected as MHD hands it over.
 * See docs/http-api.md.
 */
#ifndef HEAPPROF_HTTP_HISTORY_H
#define HEAPPROF_HTTP_HISTORY_H

#include <stdbool.h>
#include <stddef.h>

#include "access.h"
#include "daemon_ctx.h"
#include "pprof.h"
#include "strbuf.h"

/* A request's uploaded body, collected up to PROFILE_DIFF_MAX_BASE_BYTES. */
struct http_upload {
    struct pprof_buf body;
    bool too_big; /* more was sent than is kept: the request is refused */
};

/* Appends `n` bytes of a POST body to `u` (beyond the bound they are
 * dropped and too_big set). */
void http_upload_add(struct http_upload *u, const char *data, size_t n);
void http_upload_free(struct http_upload *u);

/* The answer of one of these routes: its status and body (JSON, or the
 * one-line reason from 400 on), into `out`. */
unsigned http_history_serve(struct daemon_ctx *ctx, const struct caller *who, const char *pid_arg,
                            struct strbuf *out);
unsigned http_snapshot_serve(struct daemon_ctx *ctx, const struct caller *who, const char *pid_arg,
                             struct strbuf *out);

#endif
