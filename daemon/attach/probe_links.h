/*
 * probe_links.h - the allocator probes of one process as kernel links: a
 * perf-event uprobe (and uretprobe) per function in the classic layout
 * (libbpf), or one uprobe_multi or session link per object the allocator
 * lives in (uprobe_link.h). Each probe's cookie carries the function's
 * kind and the process's image slot (HP_COOKIE).
 */
#ifndef HEAPPROF_PROBE_LINKS_H
#define HEAPPROF_PROBE_LINKS_H

#include <stddef.h>
#include <sys/types.h>

#include "allocator.h"
#include "bpf_state.h"
#include "hp_limits.h"

struct bpf_link;

/* The links of one process; zeroed means none. */
struct probe_links {
    struct bpf_link *links[2 * HP_MAX_FUNCS]; /* classic layout: one per probe */
    size_t nlinks;
    int fds[2 * HP_MAX_FUNCS]; /* multi and session: per object */
    size_t nfds;
};

/*
 * Attaches every probe of `plan` for process `pid`, whose image slot is
 * `slot`, in the layout `bpf` was loaded for. 0, or -errno with a reason
 * naming the object and function in `err`; the links made before a
 * failure stay in `out` for probe_links_release().
 */
int probe_links_attach(struct bpf_state *bpf, pid_t pid, size_t slot,
                       const struct allocator_plan *plan, struct probe_links *out, char *err,
                       size_t errlen);

/* Destroys the links. Slow (each removal waits for RCU): call it without
 * holding locks others wait on. */
void probe_links_release(struct probe_links *l);

#endif
