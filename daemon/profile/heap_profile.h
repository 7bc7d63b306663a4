/*
 * heap_profile.h - turns the BPF counts of one process into a pprof heap
 * profile: reads the stacks, turns their frames into locations
 * (profile_frames.h: mappings from /proc/PID/maps, names, files, lines and
 * inlined calls from the symbol cache), and sets the four heap sample
 * types, the period and the comments.
 */
#ifndef HEAPPROF_HEAP_PROFILE_H
#define HEAPPROF_HEAP_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bpf_state.h"
#include "pprof.h"
#include "symbol_cache.h"

/* What to build. */
struct heap_profile_spec {
    pid_t pid;                /* 0: several processes (see heap_profile_build_parts) */
    int default_alloc;        /* default sample type alloc_space (allocs) instead of inuse_space */
    int64_t duration_ns;      /* of a delta profile, else 0 */
    bool symbolize;           /* false: addresses and mappings only (symbolize=0) */
    const char *scope;        /* pid 0: which processes these are, for a comment (NULL: all) */
};

/* One process's share of a profile. */
struct heap_profile_part {
    pid_t pid;
    const char *comm;                  /* its command name, for the `comm` label */
    const struct proc_maps *maps;      /* its memory map; NULL: read /proc/PID/maps */
    const struct stack_counts *counts; /* fixed-point BPF values */
    size_t n;
    uint64_t exited_start;             /* an exited process's start time (0: it runs), */
    const char *exited_exe;            /* and executable: JIT names from what it left */
};

/*
 * Builds one profile from several processes' counts. With `label`, each
 * sample carries `pid` and `comm` labels (the all-process profile). A part
 * whose process is gone (and has no `maps`) is left out. Returns 0 and the
 * profile in *out, or -errno with a reason in `err`.
 */
int heap_profile_build_parts(struct bpf_state *bpf, struct symbol_cache *cache,
                             const struct heap_profile_spec *spec,
                             const struct heap_profile_part *parts, size_t nparts, int label,
                             struct pprof_profile **out, char *err, size_t errlen);

/*
 * The delta from `before` to `after`: allocations in between, in-use as in
 * `after`. Stacks with nothing to show are left out. *out is malloc'd.
 */
int heap_profile_delta(const struct stack_counts *before, size_t nbefore,
                       const struct stack_counts *after, size_t nafter, struct stack_counts **out,
                       size_t *nout);

#endif
