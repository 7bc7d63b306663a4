/*
 * target_rules.c - matches processes against the comm, exe and cgroup
 * rules of the configuration (see target_rules.h); the comparisons are
 * process_match.c's.
 */
#include "target_rules.h"

#include <errno.h>
#include <pwd.h>
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

/* What the first rule that matches a process asks. */
struct rule_match {
    int sampler;
    bool names_owner;
};

/* Whether rule `i` of a kind (its `samplers` and `owners`) matches a
 * process owned by `owner`; fills *m if so. */
static int take(const int *samplers, const struct rule_owner *owners, size_t i, uid_t owner,
                struct rule_match *m)
{
    if (owners[i].named && owners[i].uid != owner)
        return 0;
    *m = (struct rule_match){.sampler = samplers[i], .names_owner = owners[i].named};
    return 1;
}

/* Whether a rule of `o` matches `pid`, owned by `owner`; the first
 * match's request in *m. */
static int match(const struct target_rule_set *o, pid_t pid, uid_t owner, struct rule_match *m)
{
    if (o->ncomms) {
        char comm[64];
        if (proc_comm(pid, comm, sizeof(comm)) == 0) {
            for (size_t i = 0; i < o->ncomms; i++)
                if (match_comm(comm, o->comms[i]) &&
                    take(o->comm_samplers, o->comm_owners, i, owner, m))
                    return 1;
        }
    }
    if (o->nexes) {
        char exe[4096];
        if (proc_exe_path(pid, exe, sizeof(exe)) == 0) {
            for (size_t i = 0; i < o->nexes; i++) /* a path as configured, never "... (deleted)" */
                if (strcmp(exe, o->exes[i]) == 0 &&
                    take(o->exe_samplers, o->exe_owners, i, owner, m))
                    return 1;
        }
    }
    if (o->ncgroups) {
        char cg[4096];
        if (proc_cgroup(pid, cg, sizeof(cg)) == 0)
            for (size_t i = 0; i < o->ncgroups; i++)
                if (match_cgroup(cg, o->cgroups[i]) &&
                    take(o->cgroup_samplers, o->cgroup_owners, i, owner, m))
                    return 1;
    }
    return 0;
}

/* The owner of `pid`: its real uid, the user who runs it. Not the owner
 * of /proc/PID, which is root once a process makes itself not dumpable,
 * as a user's namesakes could to escape its cap. -ESRCH. */
static int owner_of(pid_t pid, uid_t *owner)
{
    unsigned uids[3], gids[3];
    uid_t shown;
    int e = proc_status_ids(pid, uids, gids, &shown);
    if (e == 0)
        *owner = (uid_t)uids[0];
    return e;
}

int target_rules_match_owner(const struct target_rule_set *o, pid_t pid, int *sampler, bool *owned,
                             uid_t *owner)
{
    struct rule_match m;
    uid_t uid;
    if (owner_of(pid, &uid) != 0 || !match(o, pid, uid, &m))
        return 0;
    *sampler = m.sampler;
    /* A rule that names no owner must not let one user take every slot. */
    *owned = uid != 0 && !m.names_owner;
    *owner = uid;
    return 1;
}

int target_rules_match(const struct target_rule_set *o, pid_t pid)
{
    int sampler;
    bool owned;
    uid_t owner;
    return target_rules_match_owner(o, pid, &sampler, &owned, &owner);
}

int target_rules_sampler(const struct target_rule_set *o, pid_t pid)
{
    int sampler = -1;
    bool owned;
    uid_t owner;
    return target_rules_match_owner(o, pid, &sampler, &owned, &owner) ? sampler : -1;
}

/* The uid " uid=VALUE" names (a number or a user); -EINVAL if none. */
static int parse_uid(const char *value, size_t len, uid_t *uid)
{
    char name[256];
    if (len == 0 || len >= sizeof(name))
        return -EINVAL;
    memcpy(name, value, len);
    name[len] = '\0';
    char *end;
    unsigned long n = strtoul(name, &end, 10);
    if (*end == '\0' && n < (uid_t)-1) {
        *uid = (uid_t)n;
        return 0;
    }
    struct passwd pw, *found = NULL;
    char buf[4096];
    if (getpwnam_r(name, &pw, buf, sizeof(buf), &found) != 0 || !found)
        return -EINVAL;
    *uid = found->pw_uid;
    return 0;
}

int target_rules_add(char **list, int *samplers, struct rule_owner *owners, size_t *n,
                     const char *value)
{
    static const char skey[] = " sampler=", ukey[] = " uid=";
    const char *sat = strstr(value, skey), *uat = strstr(value, ukey);
    size_t len = strlen(value);
    if (sat && (size_t)(sat - value) < len)
        len = (size_t)(sat - value);
    if (uat && (size_t)(uat - value) < len)
        len = (size_t)(uat - value);
    int sampler = -1;
    struct rule_owner owner = {0};
    if (sat) {
        const char *v = sat + sizeof(skey) - 1;
        size_t vlen = uat > sat ? (size_t)(uat - v) : strlen(v);
        char word[32];
        enum sampler_kind k;
        if (vlen >= sizeof(word))
            return -EINVAL;
        memcpy(word, v, vlen);
        word[vlen] = '\0';
        if (sampler_parse(word, &k) != 0)
            return -EINVAL;
        sampler = (int)k;
    }
    if (uat) {
        const char *v = uat + sizeof(ukey) - 1;
        size_t vlen = sat > uat ? (size_t)(sat - v) : strlen(v);
        if (parse_uid(v, vlen, &owner.uid) != 0)
            return -EINVAL;
        owner.named = true;
    }
    if (len == 0)
        return -EINVAL;
    if (*n == TARGET_RULES_MAX)
        return -ENOSPC;
    list[*n] = strndup(value, len);
    if (!list[*n])
        return -ENOMEM;
    samplers[*n] = sampler;
    owners[*n] = owner;
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
