/*
 * process_events.h - the kernel's news of process lifetimes (an exec, a fork
 * of a watched process, a watched process's exit), from the BPF programs
 * of bpf/proc_events.bpf.c through a ring buffer. The event source of
 * process_watch.c; targets.c keeps its watch list (each target and, put
 * there by the kernel at the fork, the children of targets).
 *
 * process_events_poll() is for one thread; watch, unwatch and the stats may
 * be called from any (map updates are system calls).
 */
#ifndef HEAPPROF_PROCESS_EVENTS_H
#define HEAPPROF_PROCESS_EVENTS_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

#include "proc_events.h"

struct process_events;

/* Called with each event, on the polling thread. */
typedef void (*process_event_fn)(void *arg, const struct hp_proc_event *ev);

/* Loads and attaches the programs; 0, or -errno with why in `err` (a
 * kernel without BTF tracepoints or ring buffers: the 1 s scan alone). */
int process_events_open(struct process_events **out, char *err, size_t errlen);
void process_events_close(struct process_events *pe);

/* Waits up to `timeout_ms` for events and hands each to `fn`; returns
 * how many, or -errno. */
int process_events_poll(struct process_events *pe, int timeout_ms, process_event_fn fn, void *arg);

/* Adds `pid` to the processes whose forks and exit are reported, or takes
 * it out. */
void process_events_watch(struct process_events *pe, pid_t pid);
void process_events_unwatch(struct process_events *pe, pid_t pid);

/* Whether every exec is reported (there are target rules), or only those
 * of watched processes. */
void process_events_report_all_execs(struct process_events *pe, bool on);

/* What the BPF side could not do. */
struct process_events_stats {
    uint64_t lost;       /* events dropped, the ring buffer full */
    uint64_t watch_full; /* processes not watched, the watch list full */
};
void process_events_stats(struct process_events *pe, struct process_events_stats *out);

#endif
