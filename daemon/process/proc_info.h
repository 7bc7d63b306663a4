/*
 * proc_info.h - small facts about a process from /proc: its start time
 * (which tells a reused pid from the process we attached to), its name,
 * its executable, the paths that open the files it maps, and its pid
 * inside its own pid namespace, its cgroup; and every process there is.
 */
#ifndef HEAPPROF_PROC_INFO_H
#define HEAPPROF_PROC_INFO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Start time in clock ticks since boot (field 22 of /proc/PID/stat); -ESRCH if
 * gone or a zombie (which has no memory left). */
int proc_start_time(pid_t pid, uint64_t *ticks);

/* Whether process `pid` is exiting: PF_EXITING in the flags of
 * /proc/PID/stat (the ninth field), set as do_exit() starts, well before
 * the process is a zombie; true when they cannot be read (it is gone). */
bool proc_is_exiting(pid_t pid);
/* The CPU time (user and system) all threads of the process have used,
 * in ns, at the clock tick's resolution; a zombie's too. -ESRCH if gone. */
int proc_cpu_time_ns(pid_t pid, uint64_t *ns);

/* The command name (/proc/PID/comm, without newline); -ESRCH if gone. */
int proc_comm(pid_t pid, char *buf, size_t len);

/* The pid the process has in its own pid namespace (the last NSpid of
 * /proc/PID/status): what it calls itself, e.g. in /tmp/perf-PID.map. */
int proc_ns_pid(pid_t pid, pid_t *ns_pid);

/* The executable's path as the process sees it (the target of
 * /proc/PID/exe, without the " (deleted)" of an unlinked file); -errno. */
int proc_exe_path(pid_t pid, char *buf, size_t len);

/* The process's cgroup v2 path (its "0::" line of /proc/PID/cgroup,
 * "/system.slice/redis.service"); -ESRCH if gone, -ENOENT if it has none
 * (no cgroup v2 hierarchy), -ENAMETOOLONG if `len` is too small. */
int proc_cgroup(pid_t pid, char *buf, size_t len);

/* Calls `fn(pid, arg)` for every process in /proc but this one, until it
 * returns non-zero; returns that, or 0. -errno if /proc cannot be read. */
int proc_each_pid(int (*fn)(pid_t pid, void *arg), void *arg);

/* The device and inode of the process's executable (stat of
 * /proc/PID/exe); -errno if it cannot be read. */
int proc_exe_identity(pid_t pid, dev_t *dev, ino_t *ino);

/* Whether process `pid` is still the one recorded as started at
 * `start_time` running an executable whose inode's low 32 bits are
 * `exe_ino`: not gone, its pid not reused, and not exec'd meanwhile (an
 * executable that cannot be read is taken as unchanged). */
bool proc_is_same_process(pid_t pid, uint64_t start_time, uint32_t exe_ino);

/*
 * Writes the path "/proc/PID/map_files/START-END" into `buf`: opening it
 * opens the very file mapped at [start, end) of the process, even one
 * deleted, replaced or in another mount namespace (the open needs
 * CAP_CHECKPOINT_RESTORE or CAP_SYS_ADMIN). -ENAMETOOLONG if `len` is too
 * small.
 */
int proc_map_file_path(pid_t pid, uint64_t start, uint64_t end, char *buf, size_t len);

/*
 * The real, effective and saved uids and gids of `pid` (the "Uid:" and
 * "Gid:" lines of /proc/PID/status), and the owner of that file: the
 * effective uid while the process is dumpable, root (of its user
 * namespace) once it is not. That is how the kernel shows another process
 * the dumpable flag (task_dump_owner()). 0 or -ESRCH.
 */
int proc_status_ids(pid_t pid, unsigned uids[3], unsigned gids[3], uid_t *owner);

#endif
