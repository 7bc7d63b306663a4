/*
 * thread_choice.h - the choice of the one thread thread_stop.c stops: the
 * threads of a process in order of preference, read from /proc, and the
 * fields of a thread's status that the stop checks again once it holds
 * the thread. Internal to inject/.
 */
#ifndef HEAPPROF_THREAD_CHOICE_H
#define HEAPPROF_THREAD_CHOICE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* One field of /proc/PID/task/TID/status as a decimal number (TracerPid,
 * Seccomp): -1 if absent or unreadable. */
long task_status_field(pid_t pid, pid_t tid, const char *field);

/* A mask field of /proc/PID/task/TID/status (SigPnd, ShdPnd, SigBlk,
 * SigIgn): 0 if absent or unreadable. */
uint64_t task_status_mask(pid_t pid, pid_t tid, const char *field);

/*
 * The threads of `pid` that may be stopped, best first, at most `cap`
 * into `out`: running, blocked outside a system call, blocked in a call
 * that restarts, blocked in one that restarts from its restart block.
 * Threads left out are counted: under seccomp in `*skipped_seccomp`,
 * blocked in a call a stop would fail with EINTR in `*skipped_syscall`;
 * a traced one sets `*tracer` to its tracer's pid. Returns how many.
 */
size_t thread_candidates(pid_t pid, pid_t *out, size_t cap, int *skipped_seccomp, int *tracer,
                         int *skipped_syscall);

#endif
