/*
 * target_info.h - what callers may read of the target table (targets.h):
 * a copy of one target or of all of them, with what each costs, and the
 * settings requests need. Reading takes the table's lock only to copy;
 * the counters that need a system call (probe hits, CPU time) are read
 * after it is let go.
 */
#ifndef HEAPPROF_TARGET_INFO_H
#define HEAPPROF_TARGET_INFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "holders.h"
#include "probe_cost.h"

struct targets;
struct targets_counters;

/* A copy of what a caller may know about one target. */
struct target_info {
    pid_t pid;
    char comm[17];
    char allocator[256];   /* the object whose malloc is probed */
    size_t nfuncs;         /* allocator functions probed */
    size_t emulated;       /* of which probed on an instruction the kernel emulates */
    uint32_t families;     /* entry families interposed on: probed, or whose slots the
                            * in-process sampler took at its attach (entry_families.h) */
    uint64_t attached_ns;  /* CLOCK_MONOTONIC when this daemon attached (or adopted) it */
    const char *sampler;   /* "uprobe" or "inprocess": the one in use (static string) */
    char sampler_note[256]; /* why the in-process sampler was not used, or "" */
    struct holders holders; /* why it is profiled */
    uint64_t attach_delay_ns; /* from its exec or fork to attached; 0: not attached on one */
    uint64_t probe_hits;   /* probe runs in it since attach (each a trap) */
    uint64_t ns_per_hit;   /* CPU ns one costs, for its sampler and the other targets of its
                            * allocator's library (0: not calibrated) */
    uint64_t cpu_ns;       /* CPU time the process used since attach, its probes' included */
    uint64_t cpu_ns_at_attach; /* its CPU time when attached (what cpu_ns counts from) */
    uint64_t forks_unprofiled; /* children it forked that could not be profiled */
};

/* A copy of target `pid` (false if it is not one). */
bool targets_info(struct targets *t, pid_t pid, struct target_info *out);

/* Sets the calibrated cost of a probe hit (probe_cost.h). */
void targets_set_cost(struct targets *t, const struct probe_cost *cost);

/* --idle-detach: how long a request holds a process (0: for ever). */
uint64_t targets_idle_ns(struct targets *t);

/* Copies up to `cap` targets into `out`; returns how many there are. */
size_t targets_list(struct targets *t, struct target_info *out, size_t cap);

/* What the table has done since start, and the calibrated cost of a probe
 * hit, as of one moment (for /metrics). */
void targets_read_counters(struct targets *t, struct targets_counters *counters,
                           struct probe_cost *cost);

#endif
