/*
 * probe_cost.h - what heapprofd's probes cost a profiled process, as an
 * estimate: the BPF side counts every probe run per target (each a trap
 * into the kernel, `target_hits`), and the CPU time one run adds is
 * measured once at start-up on this machine by probe_cost_calibrate(); the
 * product is the CPU time added. Sampled calls cost more than that (the
 * stack walk, the map updates); at the default interval they are one per
 * 512 KiB allocated, so the estimate leaves them out.
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
#include <stdint.h>

#include "bpf_state.h"

/* Calls timed per run of the calibration: ~10 ms per run at ~1 us a call,
 * enough for CPU-time clocks, short enough for start-up. */
#define PROBE_COST_CALLS 10000
/* Runs with the probe in; the median is taken (a shared machine). */
#define PROBE_COST_RUNS 5

/* What the calibration measured. */
struct probe_cost {
    uint64_t ns_per_hit;  /* CPU ns one probe run adds to the calling thread (0: unknown) */
    uint64_t bare_ns;     /* CPU ns of a call without the probe */
    double hits_per_call; /* probe runs per call: 1 (an entry), 2 with a return probe */
};

/*
 * Measures the CPU time a probe hit adds, with heapprofd's own programs in
 * the layout `bpf` was loaded for: a function of the daemon (its first
 * instruction one the kernel emulates, as the allocator's probes are
 * placed) is called PROBE_COST_CALLS times bare and with a probe of an
 * allocating kind whose arguments the BPF program turns away at once
 * (calloc with an overflowing size), in the daemon's own thread. 0, or
 * -errno with why in `err`.
 */
int probe_cost_calibrate(struct bpf_state *bpf, struct probe_cost *out, char *err,
                         size_t errlen);

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
