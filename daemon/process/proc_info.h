/*
 * proc_info.h - small facts about a process from /proc: its start time
 * (which tells a reused pid from the process we attached to), its name and
 * its pid inside its own pid namespace.
 */
#ifndef HEAPPROF_PROC_INFO_H
#define HEAPPROF_PROC_INFO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Start time in clock ticks since boot (field 22 of /proc/PID/stat); -ESRCH if
 * gone or a zombie (which has no memory left). */
int proc_start_time(pid_t pid, uint64_t *ticks);
/* The pid the process has in its own pid namespace (the last NSpid of
 * /proc/PID/status): what it calls itself, e.g. in /tmp/perf-PID.map. */
int proc_ns_pid(pid_t pid, pid_t *ns_pid);
/* The command name (/proc/PID/comm, without newline); -ESRCH if gone. */
int proc_comm(pid_t pid, char *buf, size_t len);

#endif
