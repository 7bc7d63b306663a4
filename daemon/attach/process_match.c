/*
 * process_match.c - matches processes by comm, exe, cgroup and unit (see
 * process_match.h).
 */
#include "process_match.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proc_info.h"

/* The kernel keeps TASK_COMM_LEN - 1 bytes of a command name. */
#define COMM_KEPT 15

bool match_comm(const char *comm, const char *name)
{
    return strncmp(comm, name, COMM_KEPT) == 0 && strlen(name) >= strlen(comm);
}

bool match_exe(const char *exe, const char *path)
{
    static const char deleted[] = " (deleted)";
    size_t n = strlen(path), d = sizeof(deleted) - 1;
    if (n > d && strcmp(path + n - d, deleted) == 0)
        n -= d;
    return strlen(exe) == n && strncmp(exe, path, n) == 0;
}

bool match_cgroup(const char *path, const char *cgroup)
{
    size_t n = strlen(cgroup);
    while (n > 1 && cgroup[n - 1] == '/')
        n--;
    if (n == 1 && cgroup[0] == '/')
        return true; /* the root holds every process */
    return strncmp(path, cgroup, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

bool match_unit(const char *path, const char *unit, char *unit_cgroup, size_t len)
{
    size_t ulen = strlen(unit);
    if (ulen == 0)
        return false;
    for (const char *c = path; (c = strchr(c, '/')) != NULL;) {
        c++; /* the start of a component */
        if (strncmp(c, unit, ulen) == 0 && (c[ulen] == '\0' || c[ulen] == '/')) {
            if (unit_cgroup)
                snprintf(unit_cgroup, len, "%.*s", (int)(c + ulen - path), path);
            return true;
        }
    }
    return false;
}

void process_facts_free(struct process_facts *f)
{
    free(f->exe);
    free(f->cgroup);
    memset(f, 0, sizeof(*f));
}

int process_facts_read(pid_t pid, struct process_facts *out)
{
    char exe[PATH_MAX], cgroup[PATH_MAX];
    memset(out, 0, sizeof(*out));
    int e = proc_start_time(pid, &out->start_time);
    if (e == 0)
        e = proc_comm(pid, out->comm, sizeof(out->comm));
    if (e)
        return e == -ESRCH ? -ESRCH : e;
    if (proc_exe_path(pid, exe, sizeof(exe)) != 0)
        exe[0] = '\0'; /* a kernel thread */
    if (proc_cgroup(pid, cgroup, sizeof(cgroup)) != 0)
        cgroup[0] = '\0'; /* no cgroup v2 hierarchy */
    out->exe = strdup(exe);
    out->cgroup = strdup(cgroup);
    if (!out->exe || !out->cgroup) {
        process_facts_free(out);
        return -ENOMEM;
    }
    /* Read last, so that facts of a pid reused meanwhile are not taken
     * for the process that started first. */
    uint64_t again;
    if (proc_start_time(pid, &again) != 0 || again != out->start_time) {
        process_facts_free(out);
        return -ESRCH;
    }
    return 0;
}

int process_facts_copy(struct process_facts *dst, const struct process_facts *src)
{
    *dst = *src;
    dst->exe = strdup(src->exe ? src->exe : "");
    dst->cgroup = strdup(src->cgroup ? src->cgroup : "");
    if (!dst->exe || !dst->cgroup) {
        process_facts_free(dst);
        return -ENOMEM;
    }
    return 0;
}

bool process_selector_any(const struct process_selector *s)
{
    return s->comm || s->exe || s->cgroup || s->unit;
}

int process_selector_describe(const struct process_selector *s, char *buf, size_t len)
{
    const struct {
        const char *key, *value;
    } fields[] = {{"comm", s->comm}, {"exe", s->exe}, {"cgroup", s->cgroup}, {"unit", s->unit}};
    int total = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        if (!fields[i].value)
            continue;
        size_t used = (size_t)total < len ? (size_t)total : len;
        total += snprintf(buf + used, len - used, "%s%s=%s", total ? "&" : "", fields[i].key,
                          fields[i].value);
    }
    return total;
}

bool process_selector_matches(const struct process_selector *s, const struct process_facts *f,
                              char *why, size_t whylen)
{
    const char *exe = f->exe ? f->exe : "", *cgroup = f->cgroup ? f->cgroup : "";
    if (s->comm && !match_comm(f->comm, s->comm)) {
        if (why)
            snprintf(why, whylen, "its comm is %s, not %s", f->comm, s->comm);
        return false;
    }
    if (s->exe && !match_exe(exe, s->exe)) {
        if (why)
            snprintf(why, whylen, "its exe is %s, not %s", exe[0] ? exe : "unknown (none)",
                     s->exe);
        return false;
    }
    if (s->cgroup && !match_cgroup(cgroup, s->cgroup)) {
        if (why)
            snprintf(why, whylen, "its cgroup is %s, not %s or below", cgroup[0] ? cgroup : "unknown",
                     s->cgroup);
        return false;
    }
    if (s->unit && !match_unit(cgroup, s->unit, NULL, 0)) {
        if (why)
            snprintf(why, whylen, "its cgroup %s is not in unit %s", cgroup[0] ? cgroup : "(unknown)",
                     s->unit);
        return false;
    }
    return true;
}

/* What a scan of /proc collects. */
struct finding {
    const struct process_selector *s;
    struct process_found *out;
    size_t cap;
    long n;
};

/* Adds `pid` to the finding if it matches (a proc_each_pid callback). */
static int consider(pid_t pid, void *arg)
{
    struct finding *f = arg;
    struct process_facts facts;
    if (process_facts_read(pid, &facts) != 0)
        return 0; /* gone meanwhile */
    if (facts.exe[0] && process_selector_matches(f->s, &facts, NULL, 0)) {
        if ((size_t)f->n < f->cap) {
            struct process_found *p = &f->out[f->n];
            p->pid = pid;
            p->start_time = facts.start_time;
            memcpy(p->comm, facts.comm, sizeof(p->comm));
        }
        f->n++;
    }
    process_facts_free(&facts);
    return 0;
}

long process_selector_find(const struct process_selector *s, struct process_found *out,
                           size_t cap)
{
    struct finding f = {.s = s, .out = out, .cap = cap};
    int e = proc_each_pid(consider, &f);
    return e < 0 ? e : f.n;
}
