/*
 * release_pool.h - the probes of many targets released at once, on a few
 * threads. Removing a process's probes waits for RCU (tens of ms per
 * link), and so does taking the in-process sampler out, which stops a
 * thread of the process: one after the other, 256 targets took over ten
 * seconds, so a SIGTERM or a burst of exits waited on the sum of them.
 * The waits overlap; the work is small.
 */
#ifndef HEAPPROF_RELEASE_POOL_H
#define HEAPPROF_RELEASE_POOL_H

#include <stddef.h>
#include <stdint.h>

struct targets;
struct target;

/* Threads that release at once: the waits are for grace periods, not CPU,
 * so more threads than cores shorten the whole; each costs a stack. */
#define RELEASE_THREADS 16

/* target_release_probes(t, tgs[k], 1) for each of the `n` targets, several
 * at once, keeping their BPF state (the caller forgets it in one pass, or
 * leaves it pinned). Without the lock: the targets are the caller's to
 * release (marked, or the daemon stopping). Returns the longest release. */
uint64_t release_pool_run(struct targets *t, struct target *const *tgs, size_t n);

#endif
