/*
 * uprobe_link.h - uprobe_multi and uprobe session links, created with the
 * bpf() syscall because Debian 12's libbpf (1.1) predates both.
 *
 * One link puts one program on many offsets of one file for one process,
 * each offset with its own cookie: one syscall to attach a process's whole
 * allocator and one close() to detach it, instead of a perf event per probe.
 * A session link (Linux 6.13+) runs the program at entry and, only when the
 * entry returned 0, at return.
 */
#ifndef HEAPPROF_UPROBE_LINK_H
#define HEAPPROF_UPROBE_LINK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The kernel's attach types (enum bpf_attach_type, Linux 6.6 and 6.13). */
#define HP_BPF_TRACE_UPROBE_MULTI 48
#define HP_BPF_TRACE_UPROBE_SESSION 57
/* uprobe_multi flag: return probes (BPF_F_UPROBE_MULTI_RETURN). */
#define HP_BPF_F_UPROBE_MULTI_RETURN 1

/*
 * Attaches `prog_fd` (loaded with expected attach type `attach_type`) to
 * `cnt` offsets of the file at `path`, for process `pid` only. Returns the
 * link's file descriptor (close it to detach) or -errno.
 */
int uprobe_link_create(int prog_fd, uint32_t attach_type, const char *path,
                       const uint64_t *offsets, const uint64_t *cookies, uint32_t cnt,
                       uint32_t flags, pid_t pid);

/* 0 if a link of `attach_type` can be made on this kernel, else the -errno of the
 * try: one on a function of this very process. `prog_fd` must be loaded
 * for that attach type. */
int uprobe_link_supported(int prog_fd, uint32_t attach_type);

#endif
