/*
 * process_events.c - loads bpf/proc_events.bpf.c, attaches its tracepoint
 * programs, and reads their ring buffer (see process_events.h). libbpf's
 * ring_buffer does the reading: it sleeps in epoll until the kernel has
 * events and hands them over without a copy.
 */
#include "process_events.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpf_state.h"
#include "proc_events.skel.h"

struct process_events {
    struct proc_events *skel;
    struct ring_buffer *ring;
    process_event_fn fn; /* the poller's, during a poll */
    void *arg;
    uint64_t watch_errors; /* atomic: watch list updates the kernel refused (full) */
};

/* ring_buffer's callback: one event to ours. */
static int take_event(void *ctx, void *data, size_t len)
{
    struct process_events *pe = ctx;
    if (len >= sizeof(struct hp_proc_event))
        pe->fn(pe->arg, data);
    return 0;
}

int process_events_open(struct process_events **out, char *err, size_t errlen)
{
    struct process_events *pe = calloc(1, sizeof(*pe));
    if (!pe)
        return -ENOMEM;
    const char *step = "load";
    int e = 0;
    pe->skel = proc_events__open_and_load();
    if (!pe->skel)
        e = errno ? -errno : -EINVAL;
    if (e == 0) {
        step = "attach to the sched_process_exec/fork/exit tracepoints";
        e = proc_events__attach(pe->skel);
    }
    if (e == 0) {
        step = "open the ring buffer";
        pe->ring = ring_buffer__new(bpf_map__fd(pe->skel->maps.events), take_event, pe, NULL);
        if (!pe->ring)
            e = errno ? -errno : -EINVAL;
    }
    if (e) {
        snprintf(err, errlen, "process events (BPF on sched_process_exec/fork/exit): %s: %s",
                 step, strerror(-e));
        process_events_close(pe);
        return e;
    }
    *out = pe;
    return 0;
}

void process_events_close(struct process_events *pe)
{
    if (!pe)
        return;
    ring_buffer__free(pe->ring);
    proc_events__destroy(pe->skel);
    free(pe);
}

int process_events_poll(struct process_events *pe, int timeout_ms, process_event_fn fn, void *arg)
{
    pe->fn = fn;
    pe->arg = arg;
    int n = ring_buffer__poll(pe->ring, timeout_ms);
    return n == -EINTR ? 0 : n;
}

void process_events_watch(struct process_events *pe, pid_t pid)
{
    uint32_t key = (uint32_t)pid, one = 1;
    if (bpf_map_update_elem(bpf_map__fd(pe->skel->maps.watched), &key, &one, BPF_ANY) != 0)
        __atomic_add_fetch(&pe->watch_errors, 1, __ATOMIC_RELAXED);
}

void process_events_unwatch(struct process_events *pe, pid_t pid)
{
    uint32_t key = (uint32_t)pid;
    bpf_map_delete_elem(bpf_map__fd(pe->skel->maps.watched), &key);
}

void process_events_report_all_execs(struct process_events *pe, bool on)
{
    __atomic_store_n(&pe->skel->bss->report_all_execs, on ? 1u : 0u, __ATOMIC_RELAXED);
}

void process_events_stats(struct process_events *pe, struct process_events_stats *out)
{
    int fd = bpf_map__fd(pe->skel->maps.event_stats);
    memset(out, 0, sizeof(*out));
    bpf_percpu_sum(fd, HP_EVSTAT_LOST, &out->lost);
    bpf_percpu_sum(fd, HP_EVSTAT_WATCH_FULL, &out->watch_full);
    out->watch_full += __atomic_load_n(&pe->watch_errors, __ATOMIC_RELAXED);
}
