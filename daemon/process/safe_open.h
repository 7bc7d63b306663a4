/*
 * safe_open.h - opens, as root, a file whose path a profiled process
 * controls (a debug link, a dwz file, a file under its root), so that the
 * process can neither block the daemon nor make it read what it may not
 * read itself (docs/security.md, "Paths a target controls").
 */
#ifndef HEAPPROF_SAFE_OPEN_H
#define HEAPPROF_SAFE_OPEN_H

#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

/*
 * The largest separate debug file opened: Debian's largest (libLLVM's) is
 * about 600 MiB; the CRC check of a file without a build ID reads all of
 * it, so a bound is what keeps a planted sparse file from costing minutes.
 */
#define SAFE_OPEN_MAX_DEBUG_BYTES (1024ull << 20)

/* Who the file is opened for, and how large it may be. */
struct safe_open_rule {
    uint64_t max_bytes; /* a larger file is refused (-EFBIG) */
    uid_t reader_uid;   /* the file must be readable by this uid (0: anyone) ... */
    gid_t reader_gid;   /* ... or by this group */
};

/*
 * Opens `path` for reading inside the directory `root` ("/proc/PID/root",
 * or "" or "/" for ours): symlinks and ".." are resolved inside it
 * (openat2 RESOLVE_IN_ROOT, no /proc magic links), and the file is first
 * looked up with O_PATH, which opens nothing, and opened for reading
 * (O_NONBLOCK) only if it is a regular file within `r`. A descriptor with
 * *st, or -errno: -ENOENT also for a file that is not regular, or that
 * `r`'s reader could not read; -EFBIG for one too large.
 */
int safe_open_in_root(const char *root, const char *path, const struct safe_open_rule *r,
                      struct stat *st);

/*
 * As safe_open_in_root(), for a path the daemon made and whose links it
 * trusts (/proc/PID/map_files/..., which are magic links to the mapped
 * file): only the file at the end is checked.
 */
int safe_open_path(const char *path, const struct safe_open_rule *r, struct stat *st);

/* The uid and gid that own process `pid` (its /proc directory): the reader
 * of a safe_open_rule for files opened for it. 0 or -ESRCH. */
int safe_open_reader_of(pid_t pid, struct safe_open_rule *r);

#endif
