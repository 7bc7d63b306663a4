/*
 * views.h - the profiles a request can ask for, built from the BPF maps:
 * one process or every profiled one (labelled pid and comm), cumulative,
 * a delta over the next S seconds, or the leak view of allocations still
 * alive and older than min_age; and the last profile of a process when it
 * exits or is let go. Profiles of one process say in a comment what
 * heapprofd's probes cost it.
 */
#ifndef HEAPPROF_VIEWS_H
#define HEAPPROF_VIEWS_H

#include <stddef.h>
#include <sys/types.h>

#include "access.h"
#include "daemon_ctx.h"
#include "pprof.h"
#include "proc_maps.h"
#include "query.h"
#include "targets.h"

/*
 * Builds the profile `q` asks for (q->pid 0: every profiled process `who`
 * may see). The process must be attached already; `started` is the start
 * time of the process at q->pid that `who` was allowed (0: read it here).
 * Every read is checked against that identity and `who`'s access after
 * it, and a process that changed is left out (docs/security.md). 0 and
 * *out, or -errno with a reason in `err` (-ESRCH: the process is gone, or
 * is another).
 */
int views_build(struct daemon_ctx *ctx, const struct profile_query *q, const struct caller *who,
                uint64_t started, int default_alloc, struct pprof_profile **out, char *err,
                size_t errlen);

/*
 * Builds the profile of the `n` processes `procs` (attached already), as
 * `q` asks but whatever its pid, each sample labelled pid and comm; a
 * comment says they are `scope` ("processes matching comm=redis").
 * Processes that exited meanwhile, or are no longer the ones `procs` names
 * (pid and start time) and `who` may read, are left out.
 */
int views_build_set(struct daemon_ctx *ctx, const struct profile_query *q, const struct caller *who,
                    const struct process_found *procs, size_t n, const char *scope,
                    int default_alloc, struct pprof_profile **out, char *err, size_t errlen);

/* Keeps the last profile of a target that exited or was let go (a
 * targets_farewell_fn; `arg` is the daemon_ctx), with why, what it was
 * (its facts, which a selector picks it by) and what heapprofd cost it in
 * its comments. Its BPF counts are still there; /proc may not be. */
void views_keep_last_profile(void *arg, const struct target_farewell *f);

#endif
