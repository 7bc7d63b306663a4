/*
 * profile_request.h - answers a request for a heap profile, whoever asks
 * (the HTTP server): who may profile which process (access.h), attaching a
 * process not yet profiled (synchronously: once this answers, every later
 * allocation of it is seen), the kept last profile of a process that has
 * exited, the processes a selector picks (selection.h: comm=, exe=,
 * cgroup=, unit=, merged into one profile labelled by pid, or a guard on
 * pid=), the build (views.h) and the form asked for (profile_formats.h:
 * gzipped profile.proto, Go's debug=1 text, the top table, folded stacks).
 * The caller turns an -errno into its status code.
 */
#ifndef HEAPPROF_PROFILE_REQUEST_H
#define HEAPPROF_PROFILE_REQUEST_H

#include <stddef.h>

#include "access.h"
#include "daemon_ctx.h"
#include "pprof.h"
#include "query.h"
#include "snapshots.h"

/* The answer: its bytes (owned: free with pprof_buf_free) and their type. */
struct profile_answer {
    struct pprof_buf body;
    const char *content_type; /* a static string */
};

/*
 * Answers query `q` of caller `who` (`default_alloc`: /allocs, whose
 * default sample type is alloc_space). 0 and *out, or -errno with a
 * one-line reason in `err`: -ENODEV (BPF unavailable), -EACCES (not the
 * caller's process), -ESRCH (no such process, and no kept last profile),
 * -ENOSPC (too many targets), -EDQUOT (an untrusted caller holds its share
 * of the targets), -ESTALE (pid= with a selector the process does not
 * match: nothing attached), and the errors of attaching and building. A
 * selector without pid= answers the processes it matches, none of which
 * could be attached (the first error), or else a profile, empty if none
 * matches.
 */
int profile_request_answer(struct daemon_ctx *ctx, const struct profile_query *q,
                           const struct caller *who, int default_alloc, struct profile_answer *out,
                           char *err, size_t errlen);

/*
 * Keeps the current profile of process `pid` (attached first, as a request
 * for it would; the kept last profile if it exited) as a snapshot, a base
 * for later diffs; its id into `id`. 0, or -errno with a one-line reason
 * in `err`: those of profile_request_answer(), and -EFBIG (a profile over
 * SNAPSHOT_MAX_BYTES).
 */
int profile_request_snapshot(struct daemon_ctx *ctx, pid_t pid, const struct caller *who,
                             char id[SNAPSHOT_ID_LEN + 1], char *err, size_t errlen);

#endif
