/*
 * allocator.h - finds the allocator functions a process's calls really bind
 * to: for each name (malloc, calloc, ..., free), the first object in the
 * dynamic linker's search order that defines it. That is libc.so.6 usually,
 * a preloaded or linked jemalloc/tcmalloc/mimalloc, or the executable itself
 * when it is statically linked (from its debug file if it is stripped).
 *
 * Ownership: a `struct allocator_plan` owns its strings; free with
 * allocator_plan_free().
 */
#ifndef HEAPPROF_ALLOCATOR_H
#define HEAPPROF_ALLOCATOR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "heapprof.h"
#include "proc_maps.h"

/* One function to probe. */
struct allocator_func {
    const char *name;        /* "malloc" (static string) */
    enum hp_kind kind;
    char *object_path;       /* the object defining it, as the process sees it */
    char *open_path;         /* a path the kernel can open: /proc/PID/map_files/... */
    uint64_t symbol_offset;  /* file offset of the function's entry */
    uint64_t file_offset;    /* where the uprobe goes: the entry or a cheaper site (probe_site.h) */
    int emulated;            /* the kernel emulates the probed instruction */
    const char *site_reason; /* why the probe is where it is (static string) */
    uint64_t inode;          /* of the object's file, as /proc/PID/maps shows it */
    uint64_t runtime_start;  /* the function's code in the process */
    uint64_t runtime_end;
};

/* Where calls to a name bind in the process: an entry point (aliases
 * included: glibc's memalign is aligned_alloc), or a function of the
 * dynamic linker that the in-process sampler calls. */
struct allocator_binding {
    const char *name; /* static string */
    uint64_t addr;
};

/* The dynamic linker's functions the in-process sampler needs. */
#define ALLOCATOR_LOADER_NAMES {"dlopen", "dlmopen", "dl_iterate_phdr"}
/* Every row of alloc_entries.h, and the loader functions. */
#define ALLOCATOR_MAX_BINDINGS (HP_ENTRY_COUNT + 3)

/* Everything to probe in one process. */
struct allocator_plan {
    struct allocator_func funcs[HP_MAX_FUNCS];
    size_t n;
    int settled; /* the objects are all loaded: a static executable, or the dynamic linker's
                  * list is complete (not so in the first milliseconds after an exec) */
    struct allocator_binding bound[ALLOCATOR_MAX_BINDINGS];
    size_t nbound;
    uint64_t r_debug; /* the linker's struct r_debug in the process, 0: unknown (static) */
    int malloc_in_executable; /* malloc is the executable's own: its calls to it go through
                               * no relocation slot */
};

/*
 * Resolves the allocator of process `pid` (whose maps are `maps`). A
 * static executable stripped of its symbols is resolved from its debug
 * file when one with its build ID is found (debug_link.h). Returns, with a
 * reason in `err`: -ENOEXEC if the process can never be profiled (a static
 * executable without a symbol for malloc), -ENOENT if no object defines
 * malloc and free (yet: a process caught right after exec has no libc
 * mapped), -ENOEXEC also for an allocator that is not x86-64 code (a
 * qemu-user guest), -ESRCH if the process is gone, and the error of the first
 * object that could not be opened (-EACCES, ...), naming it, if no object
 * we could read defines them.
 */
int allocator_resolve(pid_t pid, const struct proc_maps *maps, struct allocator_plan *plan,
                      char *err, size_t errlen);
void allocator_plan_free(struct allocator_plan *plan);

/* The address calls to `name` bind to (allocator_plan.bound), 0 if none. */
uint64_t allocator_bound(const struct allocator_plan *plan, const char *name);

#endif
