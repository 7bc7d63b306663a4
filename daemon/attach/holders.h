/*
 * holders.h - why a process is profiled: the set of its holders. Each
 * holder is a reason with its own end: named by --pid or matched by a
 * target rule (until the process exits), forked by a profiled process
 * (until its parent's holders would have let go at the fork), named by an
 * HTTP request (until --idle-detach passes without another), read by a
 * delta profile (until its window closes). A target no holder holds any
 * more is detached (targets_expire()), so a quick look costs nothing once
 * it is over.
 *
 * Kinds with a deadline expire by the clock; a window is dropped by the
 * request that opened it (a slow build must not lose the counts it reads
 * at the end). A request by selector (comm=, unit=, ...) holds each
 * process it picks as a request by pid does. New reasons are new kinds
 * here: the rest of the daemon only asks whether a target is held, by
 * what, and until when.
 *
 * Plain data, no locking: the target table's lock guards each target's set.
 */
#ifndef HEAPPROF_HOLDERS_H
#define HEAPPROF_HOLDERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The reasons a process is profiled. */
enum hold_kind {
    HOLD_PID = 0, /* named by --pid */
    HOLD_RULE,    /* matched a --comm, --exe or --cgroup rule */
    HOLD_FORK,    /* forked by a profiled process */
    HOLD_REQUEST, /* named by an HTTP request (no seconds=) */
    HOLD_WINDOW,  /* a delta profile (seconds=) is reading it */
    HOLD_KINDS,
};

/* A holder's end that never comes: held while the process lives. */
#define HOLD_FOREVER UINT64_MAX

/* The holders of one target. Zeroed: held by nothing. */
struct holders {
    uint32_t count[HOLD_KINDS];    /* holds of each kind: windows overlap, the others are 0 or 1 */
    uint64_t until_ns[HOLD_KINDS]; /* CLOCK_MONOTONIC end of each kind (HOLD_FOREVER: none) */
};

/* Adds a hold of `kind` ending at `until_ns` (HOLD_FOREVER: no end). A
 * later end replaces an earlier one; a window counts one more. */
void holders_add(struct holders *h, enum hold_kind kind, uint64_t until_ns);

/* Drops one hold of `kind`: a window that closed, or a fork hold that an
 * exec ends (the new program pays nothing for its parent's probes). */
void holders_drop(struct holders *h, enum hold_kind kind);

/* Whether a hold of `kind` is in force at `now_ns`. */
bool holders_holds(const struct holders *h, enum hold_kind kind, uint64_t now_ns);

/* Whether anything holds the target at `now_ns`. */
bool holders_held(const struct holders *h, uint64_t now_ns);

/* When the target will be let go, as now known: HOLD_FOREVER if a holder
 * has no end, else the latest end of those in force (a window's is when
 * it should close), or 0 if nothing holds it. */
uint64_t holders_until(const struct holders *h, uint64_t now_ns);

/* The same as seconds from `now_ns`, as the index and /metrics say it:
 * INFINITY while a holder has no end, 0 if nothing holds the target. */
double holders_seconds_left(const struct holders *h, uint64_t now_ns);

/* Adds every hold of `src` to `dst` (a target that exec'd keeps them). */
void holders_merge(struct holders *dst, const struct holders *src);

/* The holders to give a child forked now: one fork hold that ends when
 * its parent's holders would have. */
struct holders holders_for_child(const struct holders *parent, uint64_t now_ns);

/* "pid", "rule", "fork", "request" or "window". */
const char *hold_kind_name(enum hold_kind kind);

/* The kinds in force at `now_ns`, as "rule,request" ("" if none); returns
 * what snprintf would. */
int holders_describe(const struct holders *h, uint64_t now_ns, char *buf, size_t len);

#endif
