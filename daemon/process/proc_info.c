/*
 * proc_info.c - reads a process's start time, name and namespaced pid from /proc.
 */
#include "proc_info.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Reads a small /proc file into buf (NUL-terminated); -ESRCH if the process is gone. */
static int read_proc_file(pid_t pid, const char *name, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? -ESRCH : -errno;
    ssize_t n = read(fd, buf, len - 1);
    int e = errno;
    close(fd);
    if (n < 0)
        return e == ESRCH ? -ESRCH : -e;
    buf[n] = '\0';
    return 0;
}

int proc_start_time(pid_t pid, uint64_t *ticks)
{
    char buf[1024];
    int e = read_proc_file(pid, "stat", buf, sizeof(buf));
    if (e)
        return e;
    /* The name in parentheses may hold spaces and ')': fields start after the last ')'. */
    char *p = strrchr(buf, ')');
    if (!p)
        return -EINVAL;
    p++;
    /* A zombie has no memory left to profile: it is gone for us. */
    if (p[0] == ' ' && (p[1] == 'Z' || p[1] == 'X'))
        return -ESRCH;
    /* p is at the space before field 3 (state); step to the one before field 22. */
    for (int field = 3; field < 22 && p; field++)
        p = strchr(p + 1, ' ');
    if (!p)
        return -EINVAL;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(p + 1, &end, 10);
    if (errno || end == p + 1)
        return -EINVAL;
    *ticks = v;
    return 0;
}

int proc_comm(pid_t pid, char *buf, size_t len)
{
    int e = read_proc_file(pid, "comm", buf, len);
    if (e)
        return e;
    buf[strcspn(buf, "\n")] = '\0';
    return 0;
}

int proc_ns_pid(pid_t pid, pid_t *ns_pid)
{
    char buf[4096];
    int e = read_proc_file(pid, "status", buf, sizeof(buf));
    if (e)
        return e;
    const char *p = strstr(buf, "\nNSpid:");
    if (!p) {
        *ns_pid = pid; /* kernels before 4.1 have no NSpid: one namespace */
        return 0;
    }
    p += strlen("\nNSpid:");
    const char *last = NULL;
    while (*p && *p != '\n') {
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p >= '0' && *p <= '9')
            last = p;
        while (*p >= '0' && *p <= '9')
            p++;
        if (*p && *p != '\n' && *p != ' ' && *p != '\t')
            return -EINVAL;
    }
    if (!last)
        return -EINVAL;
    long v = strtol(last, NULL, 10);
    if (v <= 0 || v > INT32_MAX)
        return -EINVAL;
    *ns_pid = (pid_t)v;
    return 0;
}
