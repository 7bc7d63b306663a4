/*
 * proc_info.c - reads a process's start time, name, executable and
 * namespaced pid and cgroup from /proc, names the paths of its mapped
 * files, and walks the list of processes (see proc_info.h).
 */
#include "proc_info.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proc_maps.h"
#include "strutil.h"

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

/* Field `field` (1-based, >= 3) of /proc/PID/stat as a number, after the
 * parenthesized name, which may hold spaces and ')'. Zombies are -ESRCH
 * unless `zombies`. */
static int stat_field(pid_t pid, int field, bool zombies, uint64_t *value)
{
    char buf[1024];
    int e = read_proc_file(pid, "stat", buf, sizeof(buf));
    if (e)
        return e;
    char *p = strrchr(buf, ')');
    if (!p)
        return -EINVAL;
    p++;
    /* A zombie has no memory left to profile: it is gone for us. */
    if (!zombies && p[0] == ' ' && (p[1] == 'Z' || p[1] == 'X'))
        return -ESRCH;
    /* p is at the space before field 3 (state); step to the one before `field`. */
    for (int f = 3; f < field && p; f++)
        p = strchr(p + 1, ' ');
    if (!p)
        return -EINVAL;
    const char *digits = p + 1;
    return parse_decimal(&digits, NULL, value);
}

int proc_start_time(pid_t pid, uint64_t *ticks)
{
    return stat_field(pid, 22, false, ticks);
}

int proc_cpu_time_ns(pid_t pid, uint64_t *ns)
{
    uint64_t utime, stime;
    long hz = sysconf(_SC_CLK_TCK);
    int e = stat_field(pid, 14, true, &utime);
    if (e == 0)
        e = stat_field(pid, 15, true, &stime);
    if (e == 0 && hz <= 0)
        e = -EINVAL;
    if (e == 0)
        *ns = (utime + stime) * (1000000000u / (uint64_t)hz);
    return e;
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
    /* "NSpid:\t42\t7": the last is the innermost namespace's. */
    p += strlen("\nNSpid:");
    size_t len = strcspn(p, "\n");
    const char *last = p + len;
    while (last > p && last[-1] >= '0' && last[-1] <= '9')
        last--;
    char digits[16];
    size_t n = (size_t)(p + len - last);
    if (n == 0 || n >= sizeof(digits))
        return -EINVAL;
    memcpy(digits, last, n);
    digits[n] = '\0';
    uint64_t v;
    if (parse_u64(digits, 1, HP_MAX_PID, &v) != 0)
        return -EINVAL;
    *ns_pid = (pid_t)v;
    return 0;
}

int proc_exe_path(pid_t pid, char *buf, size_t len)
{
    char link[64];
    snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
    ssize_t n = readlink(link, buf, len - 1);
    if (n < 0)
        return -errno;
    if ((size_t)n == len - 1)
        return -ENAMETOOLONG; /* perhaps cut short */
    buf[proc_path_without_deleted(buf, (size_t)n, NULL)] = '\0';
    return 0;
}

int proc_exe_identity(pid_t pid, dev_t *dev, ino_t *ino)
{
    char path[64];
    struct stat st;
    snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
    if (stat(path, &st) != 0)
        return -errno;
    *dev = st.st_dev;
    *ino = st.st_ino;
    return 0;
}

bool proc_is_same_process(pid_t pid, uint64_t start_time, uint32_t exe_ino)
{
    uint64_t start;
    dev_t dev;
    ino_t ino;
    if (proc_start_time(pid, &start) != 0 || start != start_time)
        return false;
    return proc_exe_identity(pid, &dev, &ino) != 0 || (uint32_t)ino == exe_ino;
}

int proc_map_file_path(pid_t pid, uint64_t start, uint64_t end, char *buf, size_t len)
{
    int n = snprintf(buf, len, "/proc/%d/map_files/%llx-%llx", (int)pid,
                     (unsigned long long)start, (unsigned long long)end);
    return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int proc_cgroup(pid_t pid, char *buf, size_t len)
{
    char path[64], line[4096];
    snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return errno == ENOENT ? -ESRCH : -errno;
    int e = -ENOENT;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "0::", 3) != 0)
            continue;
        line[strcspn(line, "\n")] = '\0';
        e = strlen(line + 3) < len ? 0 : -ENAMETOOLONG;
        if (e == 0)
            memcpy(buf, line + 3, strlen(line + 3) + 1);
        break;
    }
    fclose(f);
    return e;
}

int proc_each_pid(int (*fn)(pid_t pid, void *arg), void *arg)
{
    DIR *d = opendir("/proc");
    if (!d)
        return -errno;
    pid_t self = getpid();
    int r = 0;
    struct dirent *de;
    while (r == 0 && (de = readdir(d)) != NULL) {
        uint64_t pid;
        if (parse_u64(de->d_name, 1, HP_MAX_PID, &pid) == 0 && (pid_t)pid != self)
            r = fn((pid_t)pid, arg);
    }
    closedir(d);
    return r;
}

int proc_status_ids(pid_t pid, unsigned uids[3], unsigned gids[3], uid_t *owner)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -ESRCH;
    struct stat st;
    if (fstat(fileno(f), &st) != 0) {
        fclose(f);
        return -ESRCH;
    }
    *owner = st.st_uid;
    int found = 0;
    while (fgets(line, sizeof(line), f)) {
        if (sscanf(line, "Uid: %u %u %u", &uids[0], &uids[1], &uids[2]) == 3)
            found |= 1;
        else if (sscanf(line, "Gid: %u %u %u", &gids[0], &gids[1], &gids[2]) == 3)
            found |= 2;
    }
    fclose(f);
    return found == 3 ? 0 : -ESRCH;
}

bool proc_is_exiting(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return true;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the comm may hold anything */
    unsigned long flags;
    if (!p || sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %lu", &flags) != 1)
        return true;
    return flags & 0x4; /* PF_EXITING, include/linux/sched.h */
}
