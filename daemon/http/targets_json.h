/*
 * targets_json.h - the list of profiled processes as JSON, for the web
 * page's index (GET /debug/pprof/?format=json; docs/http-api.md):
 *   {"targets": [{"pid": 42, "comm": "redis-server", "allocator": "...",
 *                 "profiled_seconds": 12.5, "inuse_bytes": 1048576,
 *                 "allocated_bytes": 8388608}, ...]}
 * A field per column of the page: a new column is a field here and an entry
 * in web/index.js's COLUMNS.
 */
#ifndef HEAPPROF_TARGETS_JSON_H
#define HEAPPROF_TARGETS_JSON_H

#include "access.h"
#include "daemon_ctx.h"
#include "pprof.h"

/* Appends the targets `who` may profile (as views_build lets it see them); 0 or -errno. */
int targets_json_write(struct daemon_ctx *ctx, const struct caller *who, struct pprof_buf *out);

#endif
