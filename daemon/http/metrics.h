/*
 * metrics.h - /metrics in Prometheus text format: BPF counters (samples,
 * drops by cause), map fill, targets, attach errors, requests.
 */
#ifndef HEAPPROF_METRICS_H
#define HEAPPROF_METRICS_H

#include <stddef.h>

#include "daemon_ctx.h"
#include "pprof.h"

/* Appends the metrics text to `out`; 0, or -errno (-ENOMEM, or a BPF map
 * that could not be read). */
int metrics_write(struct daemon_ctx *ctx, struct pprof_buf *out);

#endif
