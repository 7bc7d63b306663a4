/*
 * proc_events.h - the events of proc_events.bpf.c as the daemon reads them
 * from its ring buffer: a process exec'd, a profiled process forked, a
 * watched process exited. Plain fixed-width types, shared by both sides.
 */
#ifndef HEAPPROF_PROC_EVENTS_H
#define HEAPPROF_PROC_EVENTS_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* Bytes of the ring buffer: ~5,400 events of 40 bytes (48 with the
 * ring's header), a burst of execs far larger than the daemon drains in
 * one wake-up. A full buffer drops events, counted; the 1 s scan and the
 * reaper then find what was missed. */
#define HP_EVENTS_RING_BYTES (256 * 1024)

/* Processes watched at once: the targets (HP_MAX_TARGETS) and the
 * children they fork before the daemon attaches them. */
#define HP_MAX_WATCHED 4096

enum hp_event_type {
    HP_EVENT_EXEC = 1, /* pid exec'd a new program (every process, or only watched ones) */
    HP_EVENT_FORK,     /* pid was forked by ppid, a watched process */
    HP_EVENT_EXIT,     /* pid, a watched process, exited: its last thread is gone */
};

/* One event. */
struct hp_proc_event {
    __u32 type;    /* enum hp_event_type */
    __u32 pid;     /* the process (thread group id) */
    __u32 ppid;    /* fork: the parent */
    __u32 pad;
    __u64 time_ns; /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
    char comm[16]; /* exec: the new program's comm */
};

/* Per-CPU counters of the event programs. */
enum hp_event_stat {
    HP_EVSTAT_LOST = 0,     /* events dropped: the ring buffer was full */
    HP_EVSTAT_WATCH_FULL,   /* a forked child could not be watched: the map was full */
    HP_EVSTAT_COUNT,
};

#endif
