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

#endif
