/*
 * index_html.h - the index of profiled processes as an HTML table
 * (GET /debug/pprof/): a row per process the caller may profile, with what
 * holds it, when it is let go, what it costs, and links to its profiles.
 * The web page at / reads the same list as JSON (targets_json.h).
 */
#ifndef HEAPPROF_INDEX_HTML_H
#define HEAPPROF_INDEX_HTML_H

#include "access.h"
#include "daemon_ctx.h"
#include "strbuf.h"

/* Appends the page listing the targets `who` may profile; 0 or -errno
 * (-ENOMEM: `out` holds part of a page, for the caller to free). */
int index_html_write(struct daemon_ctx *ctx, const struct caller *who, struct strbuf *out);

#endif
