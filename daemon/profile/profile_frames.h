/*
 * profile_frames.h - turns the return addresses of a process's stacks into
 * pprof locations, for one profile build: each address gets its mapping
 * (every location has one: file mappings with their build IDs, anonymous
 * ones and [uprobes] as /proc/PID/maps names them, and a gap between
 * mappings for an address in none), and, when symbolizing, its lines from
 * the symbol cache. Allocator frames are dropped from the leaf end of each
 * stack, and allocator lines from the innermost end of each location.
 * Mappings get honest has_* flags: true only when every location in them
 * got functions, file names, line numbers and inlined calls.
 *
 * Not thread-safe: one per profile build.
 *
 * Ownership: the frame table holds cache references until
 * profile_frames_free(); the profile and maps it was given must outlive it.
 */
#ifndef HEAPPROF_PROFILE_FRAMES_H
#define HEAPPROF_PROFILE_FRAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pprof.h"
#include "proc_maps.h"
#include "symbol_cache.h"
#include "symbolizer.h"

struct profile_frames;

/* A frame table for process `pid` with memory map `maps`, adding to `p`.
 * With `symbolize` false, locations carry addresses and mappings only. */
int profile_frames_new(pid_t pid, const struct proc_maps *maps, struct symbol_cache *cache,
                       struct pprof_profile *p, bool symbolize, struct profile_frames **out);

/* Tells the table that process `pid` has exited, started at `start_time`
 * (clock ticks) from executable `exe` (its path; kept by the caller):
 * JIT code is named from the perf map read while it ran, and unnamed JIT
 * code after `exe`, since /proc has neither any more. */
void profile_frames_set_exited(struct profile_frames *t, uint64_t start_time, const char *exe);

/* Adds the mapping of the executable first: pprof takes the first mapping
 * as the main binary. Best effort. */
void profile_frames_add_main(struct profile_frames *t);

/*
 * The location ids of a stack of return addresses (leaf first) into
 * `locs` (room for n), without the allocator's frames at the leaf end (one
 * frame always stays); *nlocs says how many. 0 or -errno.
 */
int profile_frames_stack(struct profile_frames *t, const uint64_t *ret, size_t n, uint64_t *locs,
                         size_t *nlocs);

/* Sets the has_* flags of every mapping added; call after the last stack. */
int profile_frames_finish(struct profile_frames *t);

void profile_frames_free(struct profile_frames *t);

/* Whether a line is the allocator's: an allocator entry point, operator
 * new or new[] in any form, or a Rust allocation shim. */
bool profile_frames_is_allocator_line(const struct sym_line *l);

#endif
