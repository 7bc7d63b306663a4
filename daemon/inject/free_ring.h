/*
 * free_ring.h - the daemon's side of the in-process sampler's ring of
 * frees (sampler/hp_sampler.h, struct hp_free_ring): a free wrapper that
 * finds a sampled pointer writes it there instead of trapping into the
 * kernel, and the daemon drains it, at every scrape and on a timer, into
 * the BPF maps through the drain program (bpf/inprocess.bpf.h,
 * hp_drain_frees). Why the order of frees and allocations of one address
 * comes out right is in docs/sampler.md, "Frees through a ring".
 *
 * Every word read from the process is untrusted: positions are checked
 * against the ring's bounds and against what the process says it wrote,
 * pointers are only looked up in the live map under the process's own
 * tgid, never followed.
 */
#ifndef HEAPPROF_FREE_RING_H
#define HEAPPROF_FREE_RING_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* How often the daemon drains the rings of processes on the in-process
 * sampler: often enough that in-use is current to a tenth of a second,
 * rarely enough that draining costs nothing measurable (one
 * process_vm_readv of ~65 KiB, another of the entries, and one BPF
 * program run per process). */
#define FREE_RING_DRAIN_MS 100
/* And while a ring was more than a quarter full at its last drain: a
 * process making that many sampled frees would otherwise fill it (and
 * trap) between two drains. */
#define FREE_RING_BUSY_DRAIN_MS 10
/* How long a process is profiled before its frees go through the ring
 * (struct hp_fork_page's ring_on): the frees still in a ring when its
 * process exits are never applied (its memory is gone), so a process that
 * lives less than this traps them all, and one that lives longer can lose
 * at most one drain interval's frees at its exit. Most short-lived
 * processes (a server's fork children, a shell's commands) live less. */
#define FREE_RING_AFTER_MS 2000

/* What the drains did, since the daemon started (for /metrics). */
struct free_ring_counters {
    uint64_t drains;       /* drains that read a ring */
    uint64_t entries;      /* ring entries applied (frees, and realloc's no-ops) */
    uint64_t errors;       /* rings that could not be read, written, or made no sense */
};

/* Whether frees go through the ring: the drain program is loaded (`prog_fd`
 * >= 0) and HEAPPROFD_FREE_RING is not "0" (the benchmarks' switch to
 * measure the trap path). */
bool free_ring_wanted(int prog_fd);

/*
 * Reads the ring of the sampler mapped at `base` in process `pid`, applies
 * every entry written since the last drain through the drain program
 * `prog_fd`, and moves the process's consumer past them. Drains of one
 * process are serialized; those of different processes run at once.
 * Returns the number of entries applied, or -errno (-ESRCH: the process
 * is gone). With `enable`, the process's frees go through the ring from
 * now on (ring_on is set), if they do not already.
 */
int free_ring_drain(int prog_fd, pid_t pid, uint64_t base, bool enable);

/* A copy of the counters. */
void free_ring_counters(struct free_ring_counters *out);

#endif
