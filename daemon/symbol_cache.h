/*
 * symbol_cache.h - the ELF files of profiled processes, opened once and
 * shared by the requests that symbolize their frames.
 *
 * Files are keyed by device and inode as /proc/PID/maps shows them, so two
 * processes mapping one library share an entry, and a replaced file is a
 * new entry. At most SYMBOL_CACHE_ENTRIES files stay open; the least
 * recently used one not in use is closed to make room.
 *
 * Ownership: symbol_cache_get() hands out a reference that the caller gives
 * back with symbol_cache_put(); the entry stays valid until then.
 */
#ifndef HEAPPROF_SYMBOL_CACHE_H
#define HEAPPROF_SYMBOL_CACHE_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "elf_file.h"
#include "proc_maps.h"

/* Open ELF files kept: enough for a process with many libraries; each holds
 * a sorted symbol table (about 40 bytes a symbol). */
#define SYMBOL_CACHE_ENTRIES 256

/* One open file. */
struct cached_elf {
    uint32_t dev_major, dev_minor;
    uint64_t inode;
    struct elf_file *ef;
    char build_id[65];    /* hex, "" if the file has none */
    unsigned refs;        /* under the cache lock */
    uint64_t last_used;   /* under the cache lock */
};

struct symbol_cache {
    pthread_mutex_t lock;
    struct cached_elf *entries[SYMBOL_CACHE_ENTRIES];
    uint64_t clock;
    uint64_t hits, misses; /* under the lock */
};

void symbol_cache_init(struct symbol_cache *c);
void symbol_cache_destroy(struct symbol_cache *c);

/*
 * The file behind mapping `m` of process `pid`, opened through
 * /proc/PID/map_files (so deleted files and other mount namespaces work).
 * Returns 0 or -errno (-ENOENT: not a file mapping, or it cannot be opened).
 */
int symbol_cache_get(struct symbol_cache *c, pid_t pid, const struct proc_mapping *m,
                     struct cached_elf **out);
/* Gives back a reference from symbol_cache_get(). */
void symbol_cache_put(struct symbol_cache *c, struct cached_elf *e);

#endif
