// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * proc_events.bpf.c - tells the daemon of process lifetimes as they happen
 * (daemon/attach/proc_events.c), so that it attaches to a matching process
 * right after its exec instead of at the next 1 s scan, follows forks of
 * profiled processes, and keeps a process's last profile the moment it
 * exits. A BPF object of its own: nothing here runs on the allocator's
 * path. BTF tracepoints (tp_btf), which need no tracefs.
 *
 * `watched` holds the processes whose forks and exits matter: the daemon
 * adds each target; a fork of a watched process adds the child here, at
 * once, so that the child's own forks and exit are not missed while the
 * daemon attaches it.
 */
#include "vmlinux.h"
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "proc_events.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Set by the daemon: report every exec (there are target rules to match),
 * not only those of watched processes. */
__u32 report_all_execs = 0;

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, HP_MAX_WATCHED);
    __type(key, __u32);
    __type(value, __u32);
} watched SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, HP_EVENTS_RING_BYTES);
} events SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, HP_EVSTAT_COUNT);
    __type(key, __u32);
    __type(value, __u64);
} event_stats SEC(".maps");

static __always_inline void count_event_stat(__u32 stat)
{
    __u64 *v = bpf_map_lookup_elem(&event_stats, &stat);
    if (v)
        *v += 1;
}

/* Puts one event in the ring, or counts it lost. */
static __always_inline void emit(__u32 type, __u32 pid, __u32 ppid, bool with_comm)
{
    struct hp_proc_event *ev = bpf_ringbuf_reserve(&events, sizeof(*ev), 0);
    if (!ev) {
        count_event_stat(HP_EVSTAT_LOST);
        return;
    }
    ev->type = type;
    ev->pid = pid;
    ev->ppid = ppid;
    ev->pad = 0;
    ev->time_ns = bpf_ktime_get_ns();
    __builtin_memset(ev->comm, 0, sizeof(ev->comm));
    if (with_comm)
        bpf_get_current_comm(ev->comm, sizeof(ev->comm));
    bpf_ringbuf_submit(ev, 0);
}

static __always_inline bool is_watched(__u32 tgid)
{
    return bpf_map_lookup_elem(&watched, &tgid) != NULL;
}

/* The new program is mapped (the executable and its dynamic linker); the
 * libraries are not yet: the daemon waits for the linker's list. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(hp_on_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
    __u32 tgid = BPF_CORE_READ(p, tgid);
    if (report_all_execs || is_watched(tgid))
        emit(HP_EVENT_EXEC, tgid, 0, true);
    return 0;
}

/*
 * A new process (not a thread) forked by a watched one. A child that
 * shares its parent's memory (vfork, posix_spawn) runs only until its exec,
 * which is reported then: it is not followed.
 */
SEC("tp_btf/sched_process_fork")
int BPF_PROG(hp_on_fork, struct task_struct *parent, struct task_struct *child)
{
    __u32 ptgid = BPF_CORE_READ(parent, tgid);
    __u32 ctgid = BPF_CORE_READ(child, tgid);
    if (ptgid == ctgid || !is_watched(ptgid))
        return 0;
    if (BPF_CORE_READ(child, mm) == BPF_CORE_READ(parent, mm))
        return 0;
    __u32 one = 1;
    if (bpf_map_update_elem(&watched, &ctgid, &one, BPF_ANY) != 0)
        count_event_stat(HP_EVSTAT_WATCH_FULL);
    emit(HP_EVENT_FORK, ctgid, ptgid, false);
    return 0;
}

/* Every thread's exit passes here; the process has exited when the last
 * one goes (signal->live reaches 0 before this tracepoint). */
SEC("tp_btf/sched_process_exit")
int BPF_PROG(hp_on_exit, struct task_struct *p)
{
    __u32 tgid = BPF_CORE_READ(p, tgid);
    if (!is_watched(tgid) || BPF_CORE_READ(p, signal, live.counter) != 0)
        return 0;
    bpf_map_delete_elem(&watched, &tgid);
    emit(HP_EVENT_EXIT, tgid, 0, false);
    return 0;
}
