/*
 * visible_targets.h - the profiled processes a caller may see, with their
 * totals if asked: the one list the index page, its JSON, /metrics and the
 * all-process view show, filtered alike by access_may_profile().
 */
#ifndef HEAPPROF_VISIBLE_TARGETS_H
#define HEAPPROF_VISIBLE_TARGETS_H

#include <stdbool.h>
#include <stddef.h>

#include "access.h"
#include "daemon_ctx.h"

struct visible_targets {
    struct target_info *info; /* n of them, in the target table's order */
    struct hp_counts *totals; /* the same order; NULL unless asked for */
    size_t n;
};

/* Lists the targets `who` may profile (none when BPF did not load), with
 * their totals from the BPF maps if `with_totals`: 0, or -errno (then
 * `out` is empty). Free with visible_targets_free(). */
int visible_targets_get(struct daemon_ctx *ctx, const struct caller *who, bool with_totals,
                        struct visible_targets *out);

void visible_targets_free(struct visible_targets *v);

#endif
