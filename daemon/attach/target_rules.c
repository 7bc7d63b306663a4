/*
 * target_rules.c - matches processes against the comm, exe and cgroup
 * rules of the configuration (see target_rules.h).
 */
#include "target_rules.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "proc_info.h"
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

int target_rules_match(const struct target_rule_set *o, pid_t pid)
{
    if (o->ncomms) {
        char comm[64];
        if (proc_comm(pid, comm, sizeof(comm)) == 0) {
            for (size_t i = 0; i < o->ncomms; i++) {
                /* The kernel keeps 15 bytes of a name: compare as much. */
                if (strncmp(comm, o->comms[i], 15) == 0 && strlen(o->comms[i]) >= strlen(comm))
                    return 1;
            }
        }
    }
    if (o->nexes) {
        char exe[4096];
        if (proc_exe_path(pid, exe, sizeof(exe)) == 0) {
            for (size_t i = 0; i < o->nexes; i++)
                if (strcmp(exe, o->exes[i]) == 0)
                    return 1;
        }
    }
    if (o->ncgroups) {
        char cg[4096];
        if (read_cgroup(pid, cg, sizeof(cg)) == 0)
            for (size_t i = 0; i < o->ncgroups; i++)
                if (cgroup_under(cg, o->cgroups[i]))
                    return 1;
    }
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
