/*
 * probe_cost.h - what heapprofd's probes cost a profiled process, as an
 * estimate: the BPF side counts every probe run per target (each a trap
 * into the kernel, `target_hits`), and the CPU time one run adds is
 * measured once at start-up on this machine by probe_cost_calibrate(); the
 * product is the CPU time added. Sampled calls cost more than that (the
 * stack walk, the map updates); at the default interval they are one per
 * 512 KiB allocated, so the estimate leaves them out.
 *
 * A hit costs more when other processes have links on the same functions:
 * each target has its own links on its allocator's functions (its
 * library's, shared with every other target of that library), and the
 * kernel runs every link's handler at every hit, whichever process it is
 * for. Measured here: with any other such process, every call also takes
 * a return trap (a uprobe session's handler for another process asks for
 * the return, so the session layout's saving is gone), ~300 ns a hit, and
 * each further process adds ~20 ns. So a hit costs the calibrated cost,
 * plus ns_when_shared and ns_per_sharer for each other target probing the
 * same file (its links are counted; other tools' are not).
 *
 * The cost of one hit belongs to the sampler: under the uprobe sampler
 * every allocator call is a hit, and this is what the calibration times.
 * Under the in-process sampler only sampled calls reach the kernel, through
 * its report probe, which does not count hits yet: its targets get no
 * estimate (targets.c, ns_per_hit_of()).
 */
#ifndef HEAPPROF_PROBE_COST_H
#define HEAPPROF_PROBE_COST_H

#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>

#include "bpf_state.h"

/* Pairs of calls timed per run of the calibration: ~10 ms per run at ~1 us
 * a pair, enough for CPU-time clocks, short enough for start-up. */
#define PROBE_COST_CALLS 10000
/* Runs of the probed and the bare calls, in turn; the median difference is
 * taken (a shared machine). */
#define PROBE_COST_RUNS 7
/* Processes given links, after the first, to time what each costs a hit:
 * 6 are enough to see ~20 ns each above the noise of a run, and attaching
 * them waits for an RCU grace period each. */
#define PROBE_COST_SHARERS 6

/* What the calibration measured. */
struct probe_cost {
    uint64_t ns_per_hit;  /* CPU ns one probe run adds to the calling thread (0: unknown) */
    uint64_t bare_ns;     /* CPU ns of a pair of calls without the probes */
    double hits_per_pair; /* probe runs per pair: 2 (the entries), 3 with a return probe */
    uint64_t ns_when_shared; /* CPU ns a hit costs more once any other process has links
                              * on the same functions (another target of the same library) */
    uint64_t ns_per_sharer;  /* and each such process adds */
};

/*
 * Measures the CPU time a probe hit adds, with heapprofd's own programs in
 * the layout `bpf` was loaded for: a pair of do-nothing functions in a
 * memfd of the calibration's own (their first instruction one the kernel emulates, as the allocator's probes are
 * placed) is called PROBE_COST_CALLS times, probed as calloc (an
 * overflowing size: the program returns at once) and free (a pointer never
 * sampled: one lookup), as a malloc+free pair is, and an unprobed twin pair
 * as often, in turn, PROBE_COST_RUNS times, in the daemon's own thread.
 * `stop` is read before each run: set, the calibration gives up (-ECANCELED)
 * within one run, so that a daemon told to stop does not wait for it (under
 * qemu without KVM a hit costs ~50 us and the whole took ~50 s).
 * 0, or -errno with why in `err`.
 */
int probe_cost_calibrate(struct bpf_state *bpf, const atomic_int *stop, struct probe_cost *out,
                         char *err, size_t errlen);

/* The estimate for one process. */
struct cost_estimate {
    double added_cpu_seconds; /* hits times the cost of one */
    double percent;           /* added over what the process would have used bare */
    int percent_known;        /* 0 if its CPU time is unknown or smaller than the estimate */
};

/* The estimate from `hits`, the cost of one, and the CPU time the process
 * used meanwhile (probes included). */
void probe_cost_estimate(uint64_t hits, uint64_t ns_per_hit, uint64_t cpu_ns,
                         struct cost_estimate *out);

/* "heapprofd added ~12% CPU to this process (~0.35 CPU s: 610000 probe
 * hits at ~580 ns)", or why it cannot say; returns what snprintf would. */
int probe_cost_describe(uint64_t hits, uint64_t ns_per_hit, uint64_t cpu_ns, char *buf,
                        size_t len);

#endif
