/*
 * target_rules.c - matches processes against the comm, exe and cgroup
 * rules of the configuration (see target_rules.h); the comparisons are
 * process_match.c's.
 */
#include "target_rules.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proc_info.h"
#include "process_match.h"
#include "sampler_choice.h"

int target_rules_any(const struct target_rule_set *o)
{
    return o->ncomms || o->nexes || o->ncgroups;
}

/* Whether a rule of `o` matches `pid`; the first match's sampler in *sampler. */
static int match(const struct target_rule_set *o, pid_t pid, int *sampler)
{
    if (o->ncomms) {
        char comm[64];
        if (proc_comm(pid, comm, sizeof(comm)) == 0) {
            for (size_t i = 0; i < o->ncomms; i++) {
                if (match_comm(comm, o->comms[i])) {
                    *sampler = o->comm_samplers[i];
                    return 1;
                }
            }
        }
    }
    if (o->nexes) {
        char exe[4096];
        if (proc_exe_path(pid, exe, sizeof(exe)) == 0) {
            for (size_t i = 0; i < o->nexes; i++) {
                if (strcmp(exe, o->exes[i]) == 0) { /* a path as configured, never "... (deleted)" */
                    *sampler = o->exe_samplers[i];
                    return 1;
                }
            }
        }
    }
    if (o->ncgroups) {
        char cg[4096];
        if (proc_cgroup(pid, cg, sizeof(cg)) == 0)
            for (size_t i = 0; i < o->ncgroups; i++) {
                if (match_cgroup(cg, o->cgroups[i])) {
                    *sampler = o->cgroup_samplers[i];
                    return 1;
                }
            }
    }
    return 0;
}

int target_rules_match(const struct target_rule_set *o, pid_t pid)
{
    int sampler;
    return match(o, pid, &sampler);
}

int target_rules_sampler(const struct target_rule_set *o, pid_t pid)
{
    int sampler = -1;
    return match(o, pid, &sampler) ? sampler : -1;
}

int target_rules_add(char **list, int *samplers, size_t *n, const char *value)
{
    static const char key[] = " sampler=";
    const char *at = strstr(value, key);
    size_t len = at ? (size_t)(at - value) : strlen(value);
    int sampler = -1;
    if (at) {
        enum sampler_kind k;
        if (sampler_parse(at + sizeof(key) - 1, &k) != 0)
            return -EINVAL;
        sampler = (int)k;
    }
    if (len == 0)
        return -EINVAL;
    if (*n == TARGET_RULES_MAX)
        return -ENOSPC;
    list[*n] = strndup(value, len);
    if (!list[*n])
        return -ENOMEM;
    samplers[*n] = sampler;
    (*n)++;
    return 0;
}

/* What a scan with the rules passes on. */
struct rule_scan {
    const struct target_rule_set *o;
    void (*found)(pid_t pid, void *arg);
    void *arg;
    size_t n;
};

/* Passes `pid` on if a rule matches it (a proc_each_pid callback). */
static int scan_one(pid_t pid, void *arg)
{
    struct rule_scan *s = arg;
    if (target_rules_match(s->o, pid)) {
        s->found(pid, s->arg);
        s->n++;
    }
    return 0;
}

size_t target_rules_scan(const struct target_rule_set *o, void (*found)(pid_t pid, void *arg), void *arg)
{
    struct rule_scan s = {.o = o, .found = found, .arg = arg};
    if (target_rules_any(o))
        proc_each_pid(scan_one, &s);
    return s.n;
}

/* Copies `n` strings into `dst`; -ENOMEM if one could not be. */
static int copy_strings(char **dst, char *const *src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!(dst[i] = strdup(src[i])))
            return -ENOMEM;
    return 0;
}

int target_rules_copy(struct target_rule_set *dst, const struct target_rule_set *src)
{
    *dst = *src; /* the counts and the samplers; the strings are copied below */
    memset(dst->comms, 0, sizeof(dst->comms));
    memset(dst->exes, 0, sizeof(dst->exes));
    memset(dst->cgroups, 0, sizeof(dst->cgroups));
    int e = copy_strings(dst->comms, src->comms, src->ncomms);
    if (e == 0)
        e = copy_strings(dst->exes, src->exes, src->nexes);
    if (e == 0)
        e = copy_strings(dst->cgroups, src->cgroups, src->ncgroups);
    if (e)
        target_rules_free(dst); /* free(NULL) for the ones not copied */
    return e;
}

void target_rules_free(struct target_rule_set *r)
{
    for (size_t i = 0; i < r->ncomms; i++)
        free(r->comms[i]);
    for (size_t i = 0; i < r->nexes; i++)
        free(r->exes[i]);
    for (size_t i = 0; i < r->ncgroups; i++)
        free(r->cgroups[i]);
    r->ncomms = r->nexes = r->ncgroups = 0;
}
