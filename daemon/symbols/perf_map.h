/*
 * perf_map.h - names of JIT-compiled code from the perf map a runtime
 * writes for its process: /tmp/perf-PID.map, one "START SIZE NAME" line per
 * piece of code, hex numbers (node --perf-basic-prof, the JVM's
 * `jcmd PID Compiler.perfmap`, Python 3.12+ -X perf, LuaJIT, .NET with
 * DOTNET_PerfMapEnabled=1). The format is perf's (tools/perf/Documentation/
 * jit-interface.txt); what a runtime puts in NAME is its own.
 *
 * The file is read inside the process's root (a container's /tmp), under
 * the pid the process has in its own pid namespace, and only if it is a
 * regular file, not a symlink, owned by root or by the process's owner,
 * and written since the process started (a pid reused after a runtime
 * exited finds that runtime's stale map). Runtimes only append to it, so a
 * map that grew is read on from where the last read stopped.
 *
 * Later lines win where code overlaps: a JIT reuses the addresses of code
 * it freed, and the newest code is what a recent sample most likely ran.
 *
 * Thread safety: the cache and each map have a lock; lookups copy names out.
 *
 * Ownership: perf_map_get() hands out a reference to a process's map that
 * the caller gives back with perf_map_put(); the map stays valid until then.
 */
#ifndef HEAPPROF_PERF_MAP_H
#define HEAPPROF_PERF_MAP_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Processes whose maps are kept: JIT runtimes among the profiled processes. */
#define PERF_MAP_CACHE_PROCS 64

/* Symbols kept per process. node --perf-basic-prof writes a line for each
 * function it compiles and each tier it compiles it to, a few thousand for
 * a small script and hundreds of thousands for a large service over days;
 * at ~100 bytes a symbol this bounds one map to ~100 MiB. */
#define PERF_MAP_MAX_SYMBOLS (1u << 20)

/* Bytes of one name kept (longer names are cut): JVM signatures with
 * generics reach a few hundred. */
#define PERF_MAP_MAX_NAME 512

/* Overlapping symbols looked at per lookup, newest first: code at one
 * address is replaced a few times at most (tiers of one function). */
#define PERF_MAP_OVERLAP_SCAN 32

/* A map unused this long is dropped (as the symbol cache's files). */
#define PERF_MAP_IDLE_SECONDS 300

/* One line of a map. */
struct perf_map_symbol {
    uint64_t start;
    uint64_t size;
    uint32_t seq;  /* line number: later lines win */
    uint32_t name; /* offset into the names */
};

/* One process's map as read so far. */
struct perf_map {
    pthread_mutex_t lock;  /* guards everything below but `pid`, `refs`, `last_used_ns` */
    pid_t pid;             /* set before sharing */
    uint64_t start_ticks;  /* the process's start time: a reused pid is another process */
    dev_t dev;             /* the file read, 0 if none yet */
    ino_t ino;
    uint64_t read_to;      /* bytes of the file parsed (whole lines) */
    struct perf_map_symbol *v; /* sorted by start, then seq */
    size_t n, cap;
    uint64_t max_size;     /* the largest symbol: how far back a lookup looks */
    char *names;           /* NUL-terminated names */
    size_t names_len, names_cap;
    uint32_t lines;        /* lines seen, good or not */
    uint32_t bad_lines;    /* lines that are not "START SIZE NAME" */
    unsigned refs;         /* under the cache lock */
    int64_t last_used_ns;  /* under the cache lock */
};

/* The maps of profiled processes. */
struct perf_map_cache {
    pthread_mutex_t lock;
    struct perf_map *maps[PERF_MAP_CACHE_PROCS];
    int64_t idle_ns;
};

void perf_map_cache_init(struct perf_map_cache *c);
void perf_map_cache_destroy(struct perf_map_cache *c);

/*
 * The perf map of process `pid`, read or read on from its file now. 0 with
 * a reference in *out; -ENOENT when the process has no usable map (none,
 * not a regular file, stale, or not owned by root or the process's owner),
 * -ESRCH when the process is gone, -ENOMEM, -EBUSY when every slot is in use.
 */
int perf_map_get(struct perf_map_cache *c, pid_t pid, struct perf_map **out);
void perf_map_put(struct perf_map_cache *c, struct perf_map *m);

/*
 * The perf map last read for process `pid` started at `start_ticks`, as it
 * was then, for a process that has exited: its file can no longer be
 * opened inside its root, and the names it gave while the process ran are
 * what its kept profile shows. 0 with a reference in *out, or -ENOENT.
 */
int perf_map_get_kept(struct perf_map_cache *c, pid_t pid, uint64_t start_ticks,
                      struct perf_map **out);

/* The name of the code at `addr` copied into `name` (cut to `len`): 1 if
 * found, 0 if no symbol covers it. */
int perf_map_lookup(struct perf_map *m, uint64_t addr, char *name, size_t len);

/*
 * Parses whole lines of `buf` into `m` (its lock held or not yet shared),
 * appended unsorted; returns the bytes consumed (up to the last newline),
 * or -ENOMEM. Lines past PERF_MAP_MAX_SYMBOLS are consumed and dropped.
 * perf_map_sort() makes them findable by perf_map_lookup().
 * Exposed for the unit tests and the fuzzer.
 */
long perf_map_parse(struct perf_map *m, const char *buf, size_t len);

/* Sorts the symbols by start, then by line (later lines win overlaps). */
void perf_map_sort(struct perf_map *m);

/* An empty map for perf_map_parse (tests); free with perf_map_free(). */
struct perf_map *perf_map_new(pid_t pid);
void perf_map_free(struct perf_map *m);

#endif
