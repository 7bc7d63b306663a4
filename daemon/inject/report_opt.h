/*
 * report_opt.h - the in-process sampler's optimized report function
 * (sampler/report.S: hp_report_alloc_opt, a 5-byte nop): whether this
 * kernel turns a uprobe on it into a call to a [uprobes-trampoline]
 * (Linux 6.18 on x86-64), found once at start, and the flag that lets one
 * process use it, set only where that is safe.
 *
 * The trampoline mapping is not copied into a forked child while the call
 * in the probed page is: the flag lives in a page the installer marks
 * MADV_WIPEONFORK (struct hp_fork_page), so a child reads 0 and reports
 * through the plain function until report_opt_enable() has checked it.
 */
#ifndef HEAPPROF_REPORT_OPT_H
#define HEAPPROF_REPORT_OPT_H

#include <stdint.h>
#include <sys/types.h>

#include "bpf_state.h"

/* Calls of each report function timed at start, to give the cost of a
 * hit each way: ~10 ms at ~500 ns a hit. */
#define REPORT_OPT_CALLS 20000

/* What the start-up probe found. */
struct report_opt_kernel {
    int optimizes;        /* 1: a probe on a 5-byte nop became a trampoline call; 0: no;
                           * -1: not known (not probed: the classic layout, an error) */
    uint64_t plain_ns;    /* CPU ns a hit on the plain report function adds (0: unknown) */
    uint64_t optimized_ns; /* and on the optimized one, as this kernel runs it */
};

/*
 * Probes the kernel with the report program of `bpf` (cookie
 * HP_REPORT_FREE of a null pointer, which finds nothing; the daemon's own
 * pid counted as reporting meanwhile, so that the hits take the path a
 * target's do and no report counts as dropped) on a memfd of this
 * process's own, and times a hit on each function. Not in the classic
 * layout (its report program is not loaded for uprobe_multi links).
 * HEAPPROFD_OPT_REPORT=0 turns the optimized path off (then `optimizes` is
 * 0). Keeps the result for report_opt_get(). 0 or -errno.
 */
int report_opt_probe(struct bpf_state *bpf, struct report_opt_kernel *out);

/* What report_opt_probe() found (optimizes -1 before it ran). */
struct report_opt_kernel report_opt_get(void);

/*
 * Sets the flag of the sampler at `base` in process `pid` that selects the
 * optimized report function, if this kernel optimizes and the process's
 * copy of that function is a 5-byte nop, a breakpoint, or a call into a
 * [uprobes-trampoline] mapping of its own (a child forked after its
 * parent's probe was optimized holds a call to a trampoline it does not
 * have: it keeps the plain function). `wipeonfork` is what the installer's
 * madvise returned: the flag is set only where it is 0. Returns 1 if set,
 * 0 if not, -errno. A failure is counted by its errno and logged once per
 * errno, not once per process (a storm of short-lived fork children each
 * gone before its flag is written would otherwise fill the log).
 */
int report_opt_enable(pid_t pid, uint64_t base, int64_t wipeonfork);

/* How many report_opt_enable() calls failed with one errno. */
struct report_opt_failure {
    int err;        /* the positive errno */
    uint64_t count;
};

/* The most distinct errnos counted; others are counted under the last. */
#define REPORT_OPT_CAUSES 8

/* Copies the failures counted so far, by errno, into `out` (at most
 * REPORT_OPT_CAUSES); returns how many. */
size_t report_opt_failures(struct report_opt_failure *out);

#endif
