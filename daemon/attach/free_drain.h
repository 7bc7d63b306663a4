/*
 * free_drain.h - when the rings of frees of processes on the in-process
 * sampler are drained (daemon/inject/free_ring.h does one drain): before
 * every profile of a process is read, and every FREE_RING_DRAIN_MS on a
 * thread of its own, so that in-use stays current between scrapes and a
 * ring seldom fills.
 *
 * Ownership: free_drain_start() returns a struct free_drain that
 * free_drain_stop() stops and frees.
 */
#ifndef HEAPPROF_FREE_DRAIN_H
#define HEAPPROF_FREE_DRAIN_H

#include <sys/types.h>

#include "targets.h"

struct free_drain;

/* Drains the ring of process `pid` if it is a live target on the
 * in-process sampler, or of every such target when `pid` is 0. The
 * targets' lock is held only to copy who they are and where their
 * sampler is; the drains run outside it. */
/* Returns the most entries one ring held. */
unsigned targets_drain_frees(struct targets *t, pid_t pid);

/* Starts the timer's thread; NULL (and nothing started) if the drain
 * program is not loaded or no thread could be made. */
struct free_drain *free_drain_start(struct targets *t);

/* Stops the thread (waits for its drain in progress) and frees `d`. */
void free_drain_stop(struct free_drain *d);

#endif
