/*
 * unwind_manager.h - keeps the BPF unwinder supplied with tables: builds
 * the unwind table of each executable file a profiled process maps (once
 * per file, shared by every process that maps it, keyed by build ID or
 * else device and inode), places it in the shared rows array, and gives
 * each process the sorted list of its mappings with tables. A file no
 * process maps any more keeps its rows UNWIND_KEEP_UNUSED_NS, so that a
 * short-lived program started again (a batch job, a CLI tool under a
 * target rule) is attached without building its tables again, or until
 * another table needs the room.
 *
 * A file whose table cannot be built or does not fit is unwound by frame
 * pointers (counted in /metrics); a process whose maps change (dlopen,
 * exec) is updated by unwind_manager_update() on the next scan.
 *
 * Tables are built and their rows written without the manager's lock (a
 * large library takes tens of milliseconds to build and hundreds to
 * write): the lock guards the tables of files and processes only, so
 * /metrics and other processes' updates go on meanwhile. An update that
 * needs a file another update is building waits for it.
 */
#ifndef HEAPPROF_UNWIND_MANAGER_H
#define HEAPPROF_UNWIND_MANAGER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bpf_state.h"
#include "hp_limits.h"

/* Distinct files with tables at once. */
#define UNWIND_MAX_FILES 4096

/* How long a table no process uses is kept: building libc's takes ~5-30 ms
 * on a busy 2-vCPU VM (tests/bench/unwind_table_bench times it), which an
 * exec-time attach would otherwise pay at every start of a program that
 * runs often. */
#define UNWIND_KEEP_UNUSED_NS (60 * 1000000000ull)

struct unwind_file;
struct unwind_process;

/* Counters for /metrics (read under the lock). */
struct unwind_stats {
    uint64_t tables_built;       /* tables built from CFI */
    uint64_t build_failures;     /* files without usable CFI, or unreadable */
    uint64_t rows_full;          /* tables that did not fit the rows array */
    uint64_t update_errors;      /* processes whose tables could not all be given (see update) */
    uint64_t build_ns;           /* total time spent building */
    size_t rows_used;            /* rows in use now */
    size_t files;                /* files with tables now (some kept for no process) */
};

struct unwind_manager {
    pthread_mutex_t lock;
    pthread_cond_t built; /* broadcast when a file's table is built (or given up) */
    struct bpf_state *bpf;
    struct unwind_file *files[UNWIND_MAX_FILES];   /* under lock */
    struct unwind_process *procs[HP_MAX_TARGETS]; /* under lock */
    /* Free ranges of the rows array, sorted by start; under lock. */
    struct row_range {
        uint32_t start, len;
    } *free_ranges;
    size_t nfree, free_cap;
    struct unwind_stats stats; /* under lock */
};

int unwind_manager_init(struct unwind_manager *m, struct bpf_state *bpf);
void unwind_manager_destroy(struct unwind_manager *m);

/*
 * Gives process `pid` tables for its executable mappings now, building
 * what is missing; does nothing if they have not changed since the last
 * call. Returns 0 or -errno with the reason in `err`: -ESRCH (the process
 * is gone), -E2BIG (more executable mappings than HP_MAX_UNWIND_MAPPINGS:
 * the first ones got their tables), -ENOMEM, or the error of the BPF map.
 * A file without a usable table is not an error (see unwind_stats).
 */
int unwind_manager_update(struct unwind_manager *m, pid_t pid, char *err, size_t errlen);

/* Drops the process's tables (and frees files nobody maps any more). */
void unwind_manager_forget(struct unwind_manager *m, pid_t pid);

/* A copy of the counters. */
void unwind_manager_stats(struct unwind_manager *m, struct unwind_stats *out);

/*
 * The allocator of the shared rows array, which the functions above use
 * (exported for tests/unit/test_unwind_manager.c); the caller holds m->lock.
 * unwind_manager_rows_alloc() takes `n` consecutive rows, the first free
 * range that fits: 0 and the first row in *first, or -ENOSPC.
 * unwind_manager_rows_free() gives them back, merged with the free ranges
 * beside them.
 */
int unwind_manager_rows_alloc(struct unwind_manager *m, uint32_t n, uint32_t *first);
void unwind_manager_rows_free(struct unwind_manager *m, uint32_t first, uint32_t n);

#endif
