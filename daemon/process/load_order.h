/*
 * load_order.h - the ELF objects of a live process in the dynamic linker's
 * symbol search order.
 *
 * A symbol such as `malloc` binds to the first object in this order that
 * defines it: the executable, then LD_PRELOAD libraries, then DT_NEEDED
 * libraries breadth first. We read that order from the dynamic linker itself:
 * the executable's DT_DEBUG entry (in the process's memory) points at
 * `struct r_debug`, whose `r_map` chain lists the loaded objects in order.
 * When that is not available (a static executable, or r_debug not yet set
 * up) the order is the executable, then file mappings by first appearance in
 * /proc/PID/maps.
 *
 * Paths are as the process sees them (its mount namespace); open them through
 * /proc/PID/root or /proc/PID/map_files.
 */
#ifndef HEAPPROF_LOAD_ORDER_H
#define HEAPPROF_LOAD_ORDER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proc_maps.h"

/* One loaded object. */
struct loaded_object {
    char *path;           /* as in /proc/PID/maps (owned) */
    const struct proc_mapping *first_mapping; /* its lowest mapping, in the maps given */
    uint64_t load_bias;   /* l_addr: runtime address minus ELF vaddr (0 for ET_EXEC) */
};

/* The process's objects in search order. */
struct load_order {
    struct loaded_object *v;
    size_t n;
    int from_linker; /* 1 if read from r_debug, 0 if the maps fallback was used */
    int settled;     /* from_linker, and r_debug said RT_CONSISTENT: no object being loaded
                      * (right after exec the linker is still mapping libraries) */
    uint64_t r_debug; /* where the linker's struct r_debug is in the process, 0: unknown */
};

/*
 * Fills `out` for process `pid` whose maps are `maps` (which must outlive
 * `out`). -ESRCH if the process is gone.
 */
int load_order_read(pid_t pid, const struct proc_maps *maps, struct load_order *out);
/* Frees what load_order_read allocated. */
void load_order_free(struct load_order *lo);

#endif
