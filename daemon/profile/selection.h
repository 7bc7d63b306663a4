/*
 * selection.h - the processes a request names by what they are rather
 * than by pid (comm=, exe=, cgroup=, unit=): those running now that the
 * caller may profile, the kept last profiles of those that exited, and the
 * guard a selector puts on a pid= request (the pid must still name the
 * process meant, not whatever process has the pid now).
 *
 * A caller learns nothing of processes it may not profile: they are left
 * out as if they did not match, so a selector that matches only such
 * processes answers the same empty profile as one that matches none.
 */
#ifndef HEAPPROF_SELECTION_H
#define HEAPPROF_SELECTION_H

#include <stddef.h>
#include <stdint.h>

#include "access.h"
#include "daemon_ctx.h"
#include "pprof.h"
#include "query.h"

/* Processes one selector request may name at once: every target there can be. */
#define SELECTION_MAX HP_MAX_TARGETS

/*
 * The guard of a pid= request with a selector: 0 if process q->pid, running
 * now, matches q->sel (its start time in *started, which the attach must
 * find again); -ESTALE with the reason in `err` if it does not; -ESRCH if
 * no such process runs. If none runs and `kept` is set, the kept last
 * profile of q->pid stands in: -ESTALE if it was of a process that does
 * not match, -ESRCH (and *started 0) if it was of one that does.
 */
int selection_guard(struct daemon_ctx *ctx, const struct profile_query *q, int kept,
                    uint64_t *started, char *err, size_t errlen);

/*
 * The processes running now that q->sel matches and `who` may profile, at
 * most SELECTION_MAX in `out` (allocated; free it). Returns how many, or
 * -errno with the reason in `err`.
 */
long selection_find(const struct profile_query *q, const struct caller *who,
                    struct process_found **out, char *err, size_t errlen);

/* "processes matching comm=redis-server" into buf. */
void selection_scope(const struct profile_query *q, char *buf, size_t len);

/*
 * Adds to `p` the kept last profiles of processes that exited and that
 * q->sel matches, each sample labelled pid and comm, with a comment for
 * each; processes among the `n` in `live` (the same pid and start time)
 * are not added twice. Returns how many were added, or -errno.
 */
int selection_add_exited(struct daemon_ctx *ctx, const struct profile_query *q,
                         struct pprof_profile *p, const struct process_found *live, size_t n);

#endif
