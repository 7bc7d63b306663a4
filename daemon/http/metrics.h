/*
 * metrics.h - /metrics in Prometheus text format: BPF counters (samples,
 * drops by cause), map fill, targets, attach errors, requests.
 */
#ifndef HEAPPROF_METRICS_H
#define HEAPPROF_METRICS_H

#include <stddef.h>

#include "access.h"
#include "daemon_ctx.h"
#include "strbuf.h"

/* Appends the metrics text to `out`, with per-process series only for the
 * processes `who` may profile; 0, or -errno (-ENOMEM, or a BPF map that
 * could not be read). */
int metrics_write(struct daemon_ctx *ctx, const struct caller *who, struct strbuf *out);

#endif
