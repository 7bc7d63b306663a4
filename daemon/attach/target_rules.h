/*
 * target_rules.h - which running processes the configuration asks to
 * profile: by command name (/proc/PID/comm), executable path
 * (/proc/PID/exe) or cgroup (/proc/PID/cgroup, v2: a systemd unit's
 * processes are in /system.slice/NAME.service). The daemon scans /proc with
 * these rules every second, so a matching process is picked up within about
 * a second of its start (two at most).
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
};

/* Makes `dst` a copy of `src` with its own strings; -ENOMEM (and `dst`
 * empty) if they could not all be copied. */
int target_rules_copy(struct target_rule_set *dst, const struct target_rule_set *src);

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
