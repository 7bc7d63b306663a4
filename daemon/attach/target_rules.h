/*
 * target_rules.h - which running processes the configuration asks to
 * profile: by command name (/proc/PID/comm), executable path
 * (/proc/PID/exe) or cgroup (/proc/PID/cgroup, v2: a systemd unit's
 * processes are in /system.slice/NAME.service). The daemon matches them at
 * each exec (process_watch.c) and scans /proc with them every second for
 * what the exec events missed.
 */
#ifndef HEAPPROF_TARGET_RULES_H
#define HEAPPROF_TARGET_RULES_H

#include <stddef.h>
#include <sys/types.h>

/* Target rules of each kind (comm, exe, cgroup) at most. */
#define TARGET_RULES_MAX 64

/* Which processes the configuration asks for; owns its strings. */
struct target_rule_set {
    char *comms[TARGET_RULES_MAX];   /* processes whose comm is this */
    size_t ncomms;
    char *exes[TARGET_RULES_MAX];    /* processes running this executable */
    size_t nexes;
    char *cgroups[TARGET_RULES_MAX]; /* processes in this cgroup (v2 path) or below */
    size_t ncgroups;
    /* The sampler each rule asks for (enum sampler_kind), -1: the default. */
    int comm_samplers[TARGET_RULES_MAX];
    int exe_samplers[TARGET_RULES_MAX];
    int cgroup_samplers[TARGET_RULES_MAX];
};

/* Makes `dst` a copy of `src` with its own strings; -ENOMEM (and `dst`
 * empty) if they could not all be copied. */
int target_rules_copy(struct target_rule_set *dst, const struct target_rule_set *src);

/*
 * Adds a rule to `list` (of `n`, with `samplers` beside it) from a value
 * "NAME" or "NAME sampler=uprobe|inprocess" (the sampler for the processes
 * it matches). -EINVAL for an empty name or an unknown sampler, -ENOSPC
 * for a full list.
 */
int target_rules_add(char **list, int *samplers, size_t *n, const char *value);

/* The sampler the first matching rule of `o` that names one asks for
 * process `pid` (enum sampler_kind), or -1. */
int target_rules_sampler(const struct target_rule_set *o, pid_t pid);

/* Frees the strings of `r` and empties it. */
void target_rules_free(struct target_rule_set *r);

/* Whether process `pid` matches a comm, exe or cgroup rule of `o`. */
int target_rules_match(const struct target_rule_set *o, pid_t pid);

/* Whether `o` has any rule to scan for. */
int target_rules_any(const struct target_rule_set *o);

/*
 * Calls `found(pid, arg)` for every process in /proc (but this one) that a
 * rule matches. Returns how many matched.
 */
size_t target_rules_scan(const struct target_rule_set *o, void (*found)(pid_t pid, void *arg), void *arg);

#endif
