/*
 * base_request.h - the base a diff request names: a kept snapshot
 * (base=ID, snapshots.h), which must be of the same process, or a profile
 * uploaded with the request, which must read as one. Checked before the
 * process is attached, so that bad input costs the target nothing.
 */
#ifndef HEAPPROF_BASE_REQUEST_H
#define HEAPPROF_BASE_REQUEST_H

#include <stddef.h>

#include "daemon_ctx.h"
#include "pprof.h"
#include "query.h"

/*
 * The base `q` names, copied into `base` (left empty if none): 0, or with
 * a one-line reason in `err` -ENOENT (no snapshot of that id: never taken,
 * or pushed out), -EXDEV (a snapshot of another process), -EBADMSG (an
 * upload that is not a profile), -EFBIG (an upload too large).
 */
int base_request_load(struct daemon_ctx *ctx, const struct profile_query *q, struct pprof_buf *base,
                      char *err, size_t errlen);

#endif
