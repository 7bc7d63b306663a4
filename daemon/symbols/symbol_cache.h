/*
 * symbol_cache.h - the ELF files of profiled processes, each opened once
 * with its symbolizer (symbolizer.h) and shared by the requests that name
 * their frames, across processes and scrapes.
 *
 * Entries are keyed by GNU build ID, so one library mapped by many
 * processes, or by containers from different paths, is read once; a file
 * without a build ID is its own key. Each entry also remembers the files
 * (device, inode, size, mtime, from stat) known to hold it, so a warm
 * lookup costs one stat() and no read, and a file replaced in place is a
 * new entry.
 *
 * A file whose debug file was not there when it was opened, and that
 * debuginfod brings later (debuginfod_fetch.h), is opened anew at its next
 * lookup: the entry is taken out of the table, and freed when the last
 * request holding it gives it back.
 *
 * It also holds the perf maps of JIT runtimes (perf_map.h), by process:
 * names for code that no ELF file holds.
 *
 * The cache is bounded: at most SYMBOL_CACHE_ENTRIES files and
 * SYMBOL_CACHE_MAX_BYTES of mapped file and debug file bytes; entries idle
 * for SYMBOL_CACHE_IDLE_SECONDS are closed. The least recently used idle
 * entries go first. Entries in use are never closed, so while a request
 * holds more than the bound the cache exceeds it until they are given back.
 *
 * Thread safety: the table is under the cache's lock; each entry has a lock
 * of its own that serializes lookups through its symbolizer (libdw is not
 * safe for concurrent use of one file).
 *
 * Ownership: symbol_cache_get() hands out a reference that the caller gives
 * back with symbol_cache_put(); the entry stays valid until then.
 */
#ifndef HEAPPROF_SYMBOL_CACHE_H
#define HEAPPROF_SYMBOL_CACHE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "build_id.h"
#include "perf_map.h"
#include "proc_maps.h"
#include "symbolizer.h"

/* Files kept open: a process maps a few hundred libraries at most, and
 * each entry costs little until its DWARF is read (the bytes bound below
 * governs that). */
#define SYMBOL_CACHE_ENTRIES 512

/*
 * Bytes of ELF and debug files kept mapped. libdw maps whole files and
 * keeps what it parsed (compile unit headers, line tables, abbreviations)
 * on the heap, a fraction of their size; 512 MiB holds the files of a large
 * C++ service with debug information while keeping a host daemon's
 * footprint bounded when it profiles processes with hundreds of libraries.
 */
#define SYMBOL_CACHE_MAX_BYTES (512ULL << 20)

/* An entry unused this long is closed: scrapes come every 10 to 60 s, so
 * the files of a profiled process stay warm, and those of processes no
 * longer scraped are given back. */
#define SYMBOL_CACHE_IDLE_SECONDS 300

/* Descriptors an entry may hold open: libdw keeps the file, its debug file
 * and a dwz supplementary file open while they are mapped. */
#define SYMBOL_CACHE_FDS_PER_ENTRY 3

/* Descriptors left for everything else (sockets, BPF objects, /proc files):
 * with a low RLIMIT_NOFILE the cache keeps fewer files rather than starve
 * the HTTP server. */
#define SYMBOL_CACHE_FDS_RESERVED 256

/* Distinct files remembered per build ID (containers mapping one library
 * from several image layers); beyond that the oldest is forgotten, which
 * costs one extra open at its next lookup. */
#define SYMBOL_CACHE_ALIASES 4

/* The identity of a file as stat() sees it. */
struct file_id {
    dev_t dev;
    ino_t ino;
    int64_t size;
    int64_t mtime_ns;
};

/* One open file. */
struct cached_elf {
    char build_id[BUILD_ID_HEX_SIZE]; /* hex, "" if the file has none; set before sharing */
    struct symbolizer *sym;    /* set before sharing; used under `lock` */
    pthread_mutex_t lock;      /* one lookup at a time through `sym` */
    struct file_id files[SYMBOL_CACHE_ALIASES]; /* under the cache lock */
    unsigned nfiles;                            /* under the cache lock */
    uint64_t bytes;                             /* under the cache lock */
    unsigned refs;                              /* under the cache lock */
    int64_t last_used_ns;                       /* under the cache lock */
    bool in_table; /* under the cache lock; false: freed at the last put */
};

/* The cache: a table of entries under one lock. */
struct symbol_cache {
    pthread_mutex_t lock;
    struct cached_elf *entries[SYMBOL_CACHE_ENTRIES];
    size_t max_entries; /* SYMBOL_CACHE_ENTRIES unless tests lower it */
    uint64_t max_bytes; /* SYMBOL_CACHE_MAX_BYTES unless tests lower it */
    int64_t idle_ns;    /* SYMBOL_CACHE_IDLE_SECONDS in ns */
    uint64_t bytes;     /* sum of the entries' bytes */
    uint64_t hits, misses, evictions;
    uint64_t reopened; /* entries opened anew for a debug file that debuginfod brought */
    struct debuginfod_fetch *fetch; /* NULL: no debuginfod; set before sharing */
    struct perf_map_cache perf_maps; /* names of JIT code, per process; its own locks */
};

/* Counters for /metrics and tests. */
struct symbol_cache_stats {
    uint64_t entries, bytes, hits, misses, evictions, reopened;
    uint64_t max_entries, max_bytes; /* the bounds in force */
};

/* An empty cache with the default bounds. It raises the soft RLIMIT_NOFILE
 * to the hard one, and keeps fewer files if descriptors are still short. */
void symbol_cache_init(struct symbol_cache *c);
/* Lowers the bounds (tests); max_entries is at most SYMBOL_CACHE_ENTRIES. */
void symbol_cache_set_limits(struct symbol_cache *c, size_t max_entries, uint64_t max_bytes,
                             int64_t idle_ns);
void symbol_cache_destroy(struct symbol_cache *c);

struct debuginfod_fetch;

/* Files opened from now on ask `fetch` for debug files they lack (NULL:
 * none). Call before the cache is shared; `fetch` outlives the cache's
 * use. */
void symbol_cache_set_fetch(struct symbol_cache *c, struct debuginfod_fetch *fetch);

/*
 * The file behind mapping `m` of process `pid`, opened through
 * /proc/PID/map_files (so deleted and replaced files and other mount
 * namespaces work), else /proc/PID/root/PATH. Returns 0 or -errno
 * (-ENOENT: not a file mapping or not there, -ENOEXEC: not ELF or not a
 * regular file, -EACCES and others as the kernel said on the first path
 * that failed for a reason other than ENOENT).
 */
int symbol_cache_get(struct symbol_cache *c, pid_t pid, const struct proc_mapping *m,
                     struct cached_elf **out);
/* Gives back a reference from symbol_cache_get(). */
void symbol_cache_put(struct symbol_cache *c, struct cached_elf *e);

/*
 * Names the code at file offset `offset` of entry `e` into *out (free with
 * sym_frame_free; out->n is 0 when nothing is known). 0 or -ENOMEM.
 */
int symbol_cache_symbolize(struct symbol_cache *c, struct cached_elf *e, uint64_t offset,
                           struct sym_frame *out);

void symbol_cache_stats(struct symbol_cache *c, struct symbol_cache_stats *out);

#endif
