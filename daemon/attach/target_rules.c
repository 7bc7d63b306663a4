/*
 * target_rules.c - matches processes against the comm, exe and cgroup
 * rules of the configuration (see target_rules.h).
 */
#include "target_rules.h"

#include <errno.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proc_info.h"
#include "sampler_choice.h"
#include "strutil.h"

/* Whether `cgroup_path` is `rule` or below it. */
static int cgroup_under(const char *cgroup_path, const char *rule)
{
    size_t n = strlen(rule);
    while (n > 1 && rule[n - 1] == '/')
        n--;
    if (n == 1 && rule[0] == '/')
        return 1; /* the root holds every process */
    return strncmp(cgroup_path, rule, n) == 0 && (cgroup_path[n] == '\0' || cgroup_path[n] == '/');
}

/* The process's cgroup v2 path ("0::/..." line) into buf; -1 if none. */
static int read_cgroup(pid_t pid, char *buf, size_t len)
{
    char path[64], line[4096];
    snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    int found = -1;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "0::", 3) == 0) {
            line[strcspn(line, "\n")] = '\0';
            snprintf(buf, len, "%s", line + 3);
            found = 0;
            break;
        }
    }
    fclose(f);
    return found;
}

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
                /* The kernel keeps 15 bytes of a name: compare as much. */
                if (strncmp(comm, o->comms[i], 15) == 0 && strlen(o->comms[i]) >= strlen(comm)) {
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
                if (strcmp(exe, o->exes[i]) == 0) {
                    *sampler = o->exe_samplers[i];
                    return 1;
                }
            }
        }
    }
    if (o->ncgroups) {
        char cg[4096];
        if (read_cgroup(pid, cg, sizeof(cg)) == 0)
            for (size_t i = 0; i < o->ncgroups; i++) {
                if (cgroup_under(cg, o->cgroups[i])) {
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

size_t target_rules_scan(const struct target_rule_set *o, void (*found)(pid_t pid, void *arg), void *arg)
{
    if (!target_rules_any(o))
        return 0;
    DIR *d = opendir("/proc");
    if (!d)
        return 0;
    size_t n = 0;
    pid_t self = getpid();
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        uint64_t pid;
        if (parse_u64(de->d_name, 1, HP_MAX_PID, &pid) != 0 || (pid_t)pid == self ||
            !target_rules_match(o, (pid_t)pid))
            continue;
        found((pid_t)pid, arg);
        n++;
    }
    closedir(d);
    return n;
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
