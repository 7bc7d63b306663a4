/*
 * daemon_ctx.h - the state of a running heapprofd, passed to the modules
 * that need it (no global mutable state). Each member guards itself:
 * targets and the symbol cache have their own locks, the BPF maps are
 * thread-safe, and the counters are atomic.
 */
#ifndef HEAPPROF_DAEMON_CTX_H
#define HEAPPROF_DAEMON_CTX_H

#include <stdatomic.h>
#include <stdint.h>

#include "bpf_state.h"
#include "exited_profiles.h"
#include "free_drain.h"
#include "history.h"
#include "process_watch.h"
#include "snapshots.h"
#include "symbol_cache.h"
#include "targets.h"

struct daemon_ctx {
    struct bpf_state *bpf;        /* NULL when BPF could not load */
    char bpf_error[1024];         /* why, when it could not */
    struct targets *targets;      /* NULL when BPF could not load */
    struct unwind_manager *unwind; /* NULL when BPF could not load */
    struct process_watch *watch;  /* NULL when BPF could not load */
    struct free_drain *free_drain; /* the rings of frees' timer; NULL: none */
    struct symbol_cache *cache;
    struct exited_profiles *exited; /* last profiles of processes that exited */
    struct history *history;      /* memory over time per process */
    struct snapshots *snapshots;  /* profiles kept as diff bases */
    atomic_uint_fast64_t requests;
    atomic_uint_fast64_t request_errors;
    atomic_uint_fast64_t profiles_served;
    atomic_uint_fast64_t profile_build_ns; /* total time spent building profiles */
    atomic_uint_fast64_t profile_builds;   /* profiles built (the count of that time) */
    atomic_uint_fast64_t delta_windows_open; /* seconds= profiles between their two reads */
};

#endif
