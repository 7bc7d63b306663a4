/*
 * safe_open.c - opens files whose paths a profiled process controls (see
 * safe_open.h).
 *
 * Why O_PATH first and not O_NOFOLLOW alone: distributions link debug
 * files by build ID with symlinks (Fedora's .build-id tree), so the last
 * component must be followed; RESOLVE_IN_ROOT keeps every link inside the
 * process's root, and an O_PATH descriptor opens no FIFO or device (no
 * wait for a writer, no driver's open), so the checks run on the very
 * inode before anything reads it. It is then opened for reading through
 * /proc/self/fd, which reopens that inode and no other.
 */
#include "safe_open.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/openat2.h>

/* Whether `r`'s reader may read the file `st` describes (ptrace-like: the
 * owner's, group's or others' read bit, whichever applies to it). */
static int reader_may_read(const struct stat *st, const struct safe_open_rule *r)
{
    if (r->reader_uid == 0)
        return 1;
    if (st->st_uid == r->reader_uid)
        return (st->st_mode & S_IRUSR) != 0;
    if (st->st_gid == r->reader_gid)
        return (st->st_mode & S_IRGRP) != 0;
    return (st->st_mode & S_IROTH) != 0;
}

/* Checks the file `path_fd` (an O_PATH descriptor, closed here) and opens
 * it for reading. */
static int check_and_reopen(int path_fd, const struct safe_open_rule *r, struct stat *st)
{
    char self[64];
    int fd = -ENOENT;
    if (fstat(path_fd, st) != 0) {
        fd = -errno;
        goto out;
    }
    if (!S_ISREG(st->st_mode) || !reader_may_read(st, r))
        goto out;
    if ((uint64_t)st->st_size > r->max_bytes) {
        fd = -EFBIG;
        goto out;
    }
    snprintf(self, sizeof(self), "/proc/self/fd/%d", path_fd);
    fd = open(self, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        fd = -errno;
out:
    close(path_fd);
    return fd;
}

int safe_open_in_root(const char *root, const char *path, const struct safe_open_rule *r,
                      struct stat *st)
{
    int dir = open(root && root[0] ? root : "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return errno == ENOENT ? -ESRCH : -errno;
    struct open_how how = {
        .flags = O_PATH | O_CLOEXEC,
        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
    };
    while (*path == '/')
        path++;
    int fd = (int)syscall(SYS_openat2, dir, path[0] ? path : ".", &how, sizeof(how));
    int e = fd < 0 ? -errno : 0;
    close(dir);
    if (fd < 0)
        return e == -ELOOP || e == -EXDEV ? -ENOENT : e;
    return check_and_reopen(fd, r, st);
}

int safe_open_path(const char *path, const struct safe_open_rule *r, struct stat *st)
{
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    return check_and_reopen(fd, r, st);
}

int safe_open_reader_of(pid_t pid, struct safe_open_rule *r)
{
    char self[32];
    struct stat st;
    snprintf(self, sizeof(self), "/proc/%d", (int)pid);
    if (stat(self, &st) != 0)
        return -ESRCH;
    r->reader_uid = st.st_uid;
    r->reader_gid = st.st_gid;
    return 0;
}
