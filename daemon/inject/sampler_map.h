/*
 * sampler_map.h - maps the sampler object into a process through system
 * calls run in one of its stopped threads, its segments at a free base:
 * from the shared sampler file (sampler_file.h) where the process can
 * open it, else from a memfd of its own holding the object (so that
 * uprobes can attach to its report functions, and a restarted daemon can
 * find it by name).
 *
 * The shared file is opened by the process, by its path in the process's
 * own mount namespace: what gets mapped is then checked to be the very
 * inode the daemon published, and anything else is unmapped again.
 *
 * The memfd is created inside the process, but the daemon never opens it
 * by a path the process could redirect (/proc/PID/fd/N can name any file
 * the process swaps onto that number): it takes the descriptor with
 * pidfd_getfd(), checks that it is a fresh memfd of ours (no links, empty,
 * unsealed, our name), fills and seals it, and checks after the mapping
 * that what is mapped is that inode.
 */
#ifndef HEAPPROF_SAMPLER_MAP_H
#define HEAPPROF_SAMPLER_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "proc_maps.h"
#include "sampler_file.h"
#include "sampler_image.h"
#include "thread_stop.h"

/* A free place in `maps` for `span` bytes, the nearest to `near` (the
 * allocator); 0 if there is none. */
uint64_t sampler_map_choose_base(const struct proc_maps *maps, uint64_t span, uint64_t near);

/*
 * Maps `img` at `base` in the process of the stopped thread `st`, with
 * system calls run through the stub at `stub` (remote_stub.h): from
 * `shared` (may be NULL) if the process can open it, and then `*memfd` is
 * -1; else from a new memfd, and `*memfd` is the daemon's own descriptor
 * of it, sealed. Returns 0, or -errno with the reason in `err`; on failure
 * whatever was mapped is unmapped again.
 */
int sampler_map_into(struct stopped_thread *st, uint64_t stub, const struct sampler_image *img,
                     uint64_t base, const struct sampler_file *shared, int *memfd, char *err,
                     size_t errlen);

/* Whether the mapping of the sampler's code at `base` in `pid` is the
 * inode of `memfd`. */
int sampler_map_is_ours(pid_t pid, const struct sampler_image *img, uint64_t base, int memfd);

#endif
