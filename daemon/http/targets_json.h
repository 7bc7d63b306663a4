/*
 * targets_json.h - the list of profiled processes as JSON, for the web
 * page's index (GET /debug/pprof/?format=json; docs/http-api.md):
 *   {"targets": [{"pid": 42, "comm": "redis-server", "allocator": "...",
 *                 "profiled_seconds": 12.5, "inuse_bytes": 1048576,
 *                 "allocated_bytes": 8388608, "held_by": ["request"],
 *                 "detach_in_seconds": 587.5, "probe_hits": 610000,
 *                 "cost_cpu_seconds": 0.35, "cost_percent": 12.1,
 *                 "attach_delay_seconds": null, "forks_unprofiled": 0}, ...]}
 * A field per column of the page: a new column is a field here and an entry
 * in web/index.js's COLUMNS.
 */
#ifndef HEAPPROF_TARGETS_JSON_H
#define HEAPPROF_TARGETS_JSON_H

#include "access.h"
#include "daemon_ctx.h"
#include "strbuf.h"

/* Appends the targets `who` may profile (as views_build lets it see them); 0 or -errno. */
int targets_json_write(struct daemon_ctx *ctx, const struct caller *who, struct strbuf *out);

#endif
