// SPDX-License-Identifier: GPL-2.0
/*
 * floor.bpf.c - the overhead floor of a uprobe heap profiler.
 *
 * Three programs that do nothing, attached where a classic tool (bcc
 * memleak and its kin) attaches: malloc entry, malloc return and free
 * entry. What the benchmark measures under them is only the kernel's cost
 * of trapping into a uprobe (including single-stepping free's first
 * instruction out of line) and of hijacking the return address; heapprofd's
 * cost per unsampled call is judged against it (tests/bench/run_bench.py).
 * In the `emulated` layout floor_malloc_entry alone serves as the entry
 * program of one uprobe_multi link on malloc and on free's emulated site;
 * in the `session` layout floor_session_entry takes that place in a uprobe
 * session link, asking for no return probe.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "GPL";

/* Runs at malloc's first instruction (and free's probe site in the emulated layout). */
SEC("uprobe")
int floor_malloc_entry(struct pt_regs *ctx)
{
    return 0;
}

/* Runs when malloc returns. */
SEC("uretprobe")
int floor_malloc_return(struct pt_regs *ctx)
{
    return 0;
}

/* Runs at free's first instruction. */
SEC("uprobe")
int floor_free_entry(struct pt_regs *ctx)
{
    return 0;
}

/* Session entry on malloc and free: 1 = no return probe for this call. */
SEC("uprobe")
int floor_session_entry(struct pt_regs *ctx)
{
    return 1;
}
