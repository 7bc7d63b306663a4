/*
 * process_match.h - which processes a description picks: by command name
 * (/proc/PID/comm), executable (/proc/PID/exe), cgroup v2 path or systemd
 * unit. The one copy of these comparisons: the target rules of the
 * configuration (target_rules.h, any rule may match) and the selectors of
 * a profile request (`heap?comm=redis-server`, every one given must match)
 * both use it.
 *
 * A unit is found by its cgroup, not asked of systemd over D-Bus: systemd
 * puts each unit's processes in a cgroup named after the unit
 * (/system.slice/redis.service, or deeper with Slice= or under a user's
 * manager), so a process is in unit U if a component of its cgroup path
 * is U, and the unit's cgroup is that path up to U.
 */
#ifndef HEAPPROF_PROCESS_MATCH_H
#define HEAPPROF_PROCESS_MATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The longest systemd unit name (systemd's UNIT_NAME_MAX, with its NUL). */
#define PROCESS_UNIT_MAX 256

/* What picks processes: each field given must match (NULL: any). Strings
 * are borrowed: the selector owns none of them. */
struct process_selector {
    const char *comm;   /* the command name, as the kernel keeps it (15 bytes) */
    const char *exe;    /* the executable's path */
    const char *cgroup; /* a cgroup v2 path: processes in it or below */
    const char *unit;   /* a systemd unit ("redis.service"): processes in its cgroup or below */
};

/* What a selector is matched against: what /proc says of a process, or
 * said of one that has exited. Owns `exe` and `cgroup` ("" if unknown). */
struct process_facts {
    uint64_t start_time; /* clock ticks since boot: tells a reused pid */
    char comm[17];
    char *exe;
    char *cgroup;
};

/* Whether command name `comm` (as /proc/PID/comm shows it) is `name`: the
 * kernel keeps 15 bytes of a name, so a longer `name` matches its cut. */
bool match_comm(const char *comm, const char *name);

/* Whether executable path `exe` (as proc_exe_path() gives it, without
 * " (deleted)") is a selector's `path`: one read from /proc/PID/exe by
 * another tool (Alloy's discovery.process) ends in " (deleted)" if the
 * program was replaced on disk since it started, and is the same path. (A
 * configured exe rule is a path as written: target_rules.c compares it as
 * it is.) */
bool match_exe(const char *exe, const char *path);

/* Whether cgroup v2 path `path` is `cgroup` or below it. */
bool match_cgroup(const char *path, const char *cgroup);

/* Whether cgroup v2 path `path` is in unit `unit`'s cgroup or below it;
 * if so, and `unit_cgroup` is not NULL, that cgroup goes there. */
bool match_unit(const char *path, const char *unit, char *unit_cgroup, size_t len);

/* Reads the facts of process `pid`; 0, or -ESRCH (gone, or a zombie) or
 * -ENOMEM. A kernel thread has no executable: its exe is "". */
int process_facts_read(pid_t pid, struct process_facts *out);

/* Makes `dst` a copy of `src`; 0 or -ENOMEM (and `dst` empty). */
int process_facts_copy(struct process_facts *dst, const struct process_facts *src);

/* Frees the strings of `f` and empties it. */
void process_facts_free(struct process_facts *f);

/* Whether `s` gives any field. */
bool process_selector_any(const struct process_selector *s);

/* Writes `s` as query parameters ("comm=redis-server&unit=redis.service")
 * into buf; returns what snprintf would. */
int process_selector_describe(const struct process_selector *s, char *buf, size_t len);

/*
 * Whether the process described by `f` matches every field of `s`. If not,
 * `why` (if not NULL) says which field and what the process has instead
 * ("its exe is /usr/bin/python3, not /usr/bin/redis-server").
 */
bool process_selector_matches(const struct process_selector *s, const struct process_facts *f,
                              char *why, size_t whylen);

/* A process a selector found. */
struct process_found {
    pid_t pid;
    uint64_t start_time;
    char comm[17];
};

/*
 * The processes running now that `s` matches (not this one, nor kernel
 * threads, which have no executable to profile), at most `cap` of them in
 * `out`; returns how many matched (more than `cap` if some did not fit),
 * or -errno if /proc cannot be read.
 */
long process_selector_find(const struct process_selector *s, struct process_found *out,
                           size_t cap);

#endif
