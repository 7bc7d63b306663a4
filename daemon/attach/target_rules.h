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

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* Target rules of each kind (comm, exe, cgroup) at most. */
#define TARGET_RULES_MAX 64

/* The owner a rule is limited to (" uid=USER"). Zeroed: none, the rule
 * matches anyone's processes, and those not root's count against their
 * owner's cap (docs/security.md). */
struct rule_owner {
    bool named;
    uid_t uid;
};

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
    /* The owner each rule is limited to, if it names one. */
    struct rule_owner comm_owners[TARGET_RULES_MAX];
    struct rule_owner exe_owners[TARGET_RULES_MAX];
    struct rule_owner cgroup_owners[TARGET_RULES_MAX];
};

/* Makes `dst` a copy of `src` with its own strings; -ENOMEM (and `dst`
 * empty) if they could not all be copied. */
int target_rules_copy(struct target_rule_set *dst, const struct target_rule_set *src);

/*
 * Adds a rule to `list` (of `n`, with `samplers` and `owners` beside it)
 * from a value "NAME", then optionally " sampler=uprobe|inprocess" (the
 * sampler for the processes it matches) and " uid=USER" (a user name or
 * number: only that user's processes match). -EINVAL for an empty name,
 * an unknown sampler or user, -ENOSPC for a full list.
 */
int target_rules_add(char **list, int *samplers, struct rule_owner *owners, size_t *n,
                     const char *value);

/*
 * Whether a rule of `o` matches process `pid`: 1 with the sampler the rule
 * asks for (-1: the default) in *sampler and, in *owned and *owner, the
 * owner whose cap the process counts against: its real uid, unless that
 * is root or the rule named that owner (then *owned is false). 0 if none
 * matches.
 */
int target_rules_match_owner(const struct target_rule_set *o, pid_t pid, int *sampler, bool *owned,
                             uid_t *owner);

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
