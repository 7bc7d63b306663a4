/*
 * sampler_file.h - the sampler as one file that every target maps: one
 * inode, so that the report probes are registered once, at start, for
 * every process that maps it (the kernel puts them into a process as it
 * maps the file), instead of once per process (a registration costs ~10 ms
 * of the kernel's time, which bounded how fast a burst of new processes
 * could be attached).
 *
 * The file is root's, read-only, in a directory only root can write
 * (DIR/sampler-BUILDID.so): no local user can change what a target maps.
 * A target that cannot open it (another mount namespace, a chroot) gets a
 * memfd of its own as before (sampler_map.h), and per-process probes.
 *
 * Ownership: struct sampler_file owns its descriptor; sampler_file_close().
 */
#ifndef HEAPPROF_SAMPLER_FILE_H
#define HEAPPROF_SAMPLER_FILE_H

#include <stddef.h>
#include <sys/types.h>

#include "sampler_image.h"

struct sampler_file {
    int fd;          /* ours, read-only; -1: none (per-process memfds only) */
    char path[256];  /* what targets open */
    char fd_path[40]; /* /proc/self/fd/N: where the report probes go */
    dev_t dev;
    ino_t ino;
};

/*
 * Makes `dir`/sampler-BUILDID.so hold the image (or finds it there,
 * byte for byte, from another daemon of this build) and opens it. `dir` is
 * made if missing; it and the file must be root's and writable by no one
 * else. 0, or -errno with the reason in `err` (the caller goes on with
 * per-process memfds).
 */
int sampler_file_publish(const char *dir, const struct sampler_image *img,
                         struct sampler_file *out, char *err, size_t errlen);

/* Whether descriptor `fd` (ours) is that file's inode. */
int sampler_file_is(const struct sampler_file *f, int fd);

void sampler_file_close(struct sampler_file *f);

#endif
