/*
 * sampler_map.h - maps the sampler object into a stopped process with
 * system calls run inside it: a memfd holding the object (so that uprobes
 * can attach to its report functions, and a restarted daemon can find it
 * by name), its segments mapped at a base within a rel32 jump of the
 * allocator's functions.
 */
#ifndef HEAPPROF_SAMPLER_MAP_H
#define HEAPPROF_SAMPLER_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "proc_maps.h"
#include "sampler_image.h"
#include "thread_stop.h"

/* A free place in `maps` for `span` bytes from which every address in
 * [lo, hi) is within a rel32 jump; 0 if there is none. */
uint64_t sampler_map_choose_base(const struct proc_maps *maps, uint64_t span, uint64_t lo,
                                 uint64_t hi);

/*
 * Maps `img` at `base` in the stopped process `sp` (its memory open as
 * `memfd`, /proc/PID/mem), with system calls run through a stub written at
 * `stub` (remote_stub.h) and erased again. Returns 0, or -errno with the
 * reason in `err`; on failure whatever was mapped is unmapped again.
 */
int sampler_map_into(struct stopped_process *sp, int memfd, uint64_t stub,
                     const struct sampler_image *img, uint64_t base, char *err, size_t errlen);

#endif
