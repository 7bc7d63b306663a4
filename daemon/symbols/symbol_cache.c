/*
 * symbol_cache.c - a bounded LRU of symbolizers shared across requests,
 * keyed by build ID (see symbol_cache.h).
 *
 * Files are opened and closed outside the cache lock: reading a large file
 * must not stall the requests that only need warm entries. Entries to close
 * are collected under the lock and closed after it is released.
 */
#include "symbol_cache.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "clock.h"
#include "proc_info.h"
#include "safe_open.h"

/* Entries taken out of the table, to close once the lock is released. */
struct victims {
    struct cached_elf *v[SYMBOL_CACHE_ENTRIES + 1];
    size_t n;
};

/* The cache's clock: monotonic nanoseconds, signed for the idle arithmetic. */
static int64_t now_ns(void)
{
    return (int64_t)monotonic_ns();
}

/* The entries the descriptor limit allows, after raising it as far as we may. */
static size_t entries_for_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return SYMBOL_CACHE_ENTRIES;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    if (rl.rlim_cur == RLIM_INFINITY)
        return SYMBOL_CACHE_ENTRIES;
    uint64_t spare = rl.rlim_cur > SYMBOL_CACHE_FDS_RESERVED + SYMBOL_CACHE_FDS_PER_ENTRY
                         ? rl.rlim_cur - SYMBOL_CACHE_FDS_RESERVED
                         : SYMBOL_CACHE_FDS_PER_ENTRY;
    uint64_t n = spare / SYMBOL_CACHE_FDS_PER_ENTRY;
    return n < SYMBOL_CACHE_ENTRIES ? (size_t)n : SYMBOL_CACHE_ENTRIES;
}

void symbol_cache_init(struct symbol_cache *c)
{
    memset(c, 0, sizeof(*c));
    pthread_mutex_init(&c->lock, NULL);
    c->max_entries = entries_for_fd_limit();
    c->max_bytes = SYMBOL_CACHE_MAX_BYTES;
    c->idle_ns = (int64_t)SYMBOL_CACHE_IDLE_SECONDS * 1000000000;
    perf_map_cache_init(&c->perf_maps);
}

void symbol_cache_set_limits(struct symbol_cache *c, size_t max_entries, uint64_t max_bytes,
                             int64_t idle_ns)
{
    pthread_mutex_lock(&c->lock);
    c->max_entries = max_entries < 1                      ? 1
                     : max_entries < SYMBOL_CACHE_ENTRIES ? max_entries
                                                          : SYMBOL_CACHE_ENTRIES;
    c->max_bytes = max_bytes;
    c->idle_ns = idle_ns;
    pthread_mutex_unlock(&c->lock);
}

/* Closes an entry nobody holds. */
static void entry_free(struct cached_elf *e)
{
    symbolizer_close(e->sym);
    pthread_mutex_destroy(&e->lock);
    free(e);
}

void symbol_cache_set_fetch(struct symbol_cache *c, struct debuginfod_fetch *fetch)
{
    c->fetch = fetch;
}

void symbol_cache_destroy(struct symbol_cache *c)
{
    for (size_t i = 0; i < SYMBOL_CACHE_ENTRIES; i++)
        if (c->entries[i])
            entry_free(c->entries[i]);
    perf_map_cache_destroy(&c->perf_maps);
    pthread_mutex_destroy(&c->lock);
}

/* Takes slot i out of the table into `out`; under the lock, refs == 0. */
static void evict(struct symbol_cache *c, size_t i, struct victims *out)
{
    struct cached_elf *e = c->entries[i];
    c->entries[i] = NULL;
    c->bytes -= e->bytes;
    c->evictions++;
    e->in_table = false;
    out->v[out->n++] = e;
}

/* Evicts idle entries past their time, then the least recently used idle
 * ones while the table holds more than `entries` or `bytes`. */
static void trim(struct symbol_cache *c, size_t entries, uint64_t bytes, struct victims *out)
{
    int64_t now = now_ns();
    size_t used = 0;
    for (size_t i = 0; i < SYMBOL_CACHE_ENTRIES; i++) {
        struct cached_elf *e = c->entries[i];
        if (e && e->refs == 0 && now - e->last_used_ns > c->idle_ns)
            evict(c, i, out);
        else if (e)
            used++;
    }
    while (used > entries || c->bytes > bytes) {
        size_t victim = SIZE_MAX;
        for (size_t i = 0; i < SYMBOL_CACHE_ENTRIES; i++) {
            struct cached_elf *e = c->entries[i];
            if (e && e->refs == 0 &&
                (victim == SIZE_MAX || e->last_used_ns < c->entries[victim]->last_used_ns))
                victim = i;
        }
        if (victim == SIZE_MAX)
            return; /* everything left is in use */
        evict(c, victim, out);
        used--;
    }
}

static void close_victims(struct victims *v)
{
    for (size_t i = 0; i < v->n; i++)
        entry_free(v->v[i]);
    v->n = 0;
}

/* Whether `e` is known to be held by file `id`; under the lock. */
static bool has_file(const struct cached_elf *e, const struct file_id *id)
{
    for (unsigned i = 0; i < e->nfiles; i++)
        if (e->files[i].dev == id->dev && e->files[i].ino == id->ino &&
            e->files[i].size == id->size && e->files[i].mtime_ns == id->mtime_ns)
            return true;
    return false;
}

/* Remembers that file `id` holds `e`, forgetting the oldest if full; under the lock. */
static void add_file(struct cached_elf *e, const struct file_id *id)
{
    if (has_file(e, id))
        return;
    if (e->nfiles == SYMBOL_CACHE_ALIASES) {
        memmove(&e->files[0], &e->files[1], (SYMBOL_CACHE_ALIASES - 1) * sizeof(e->files[0]));
        e->nfiles--;
    }
    e->files[e->nfiles++] = *id;
}

/* Takes slot i out of the table because its file is better opened anew:
 * debuginfod brought the debug file it lacked. Requests holding it keep
 * using it until their put; the last one frees it. Under the lock. */
static void retire(struct symbol_cache *c, size_t i, struct victims *out)
{
    struct cached_elf *e = c->entries[i];
    c->entries[i] = NULL;
    c->bytes -= e->bytes;
    c->reopened++;
    e->in_table = false;
    if (e->refs == 0)
        out->v[out->n++] = e;
}

/* The entry held by file `id` or, if `build_id` is not "", with that build
 * ID; takes a reference. An entry whose debug file has since arrived is
 * retired into `old` instead, so that the caller opens the file anew.
 * Under the lock. */
static struct cached_elf *find(struct symbol_cache *c, const struct file_id *id,
                               const char *build_id, struct victims *old)
{
    for (size_t i = 0; i < SYMBOL_CACHE_ENTRIES; i++) {
        struct cached_elf *e = c->entries[i];
        if (e && (has_file(e, id) || (build_id[0] && strcmp(e->build_id, build_id) == 0))) {
            if (symbolizer_debuginfod_arrived(e->sym)) {
                retire(c, i, old);
                continue;
            }
            add_file(e, id);
            e->refs++;
            e->last_used_ns = now_ns();
            return e;
        }
    }
    return NULL;
}

/* Stats `path` into *st: 0 or -errno. */
static int stat_path(const char *path, struct stat *st)
{
    return stat(path, st) == 0 ? 0 : -errno;
}

/*
 * A path that opens the file of mapping `m`, and the file's identity: its
 * map_files link; else (map_files needs CAP_CHECKPOINT_RESTORE or
 * CAP_SYS_ADMIN) the path inside the process's root; else, for a process
 * that has exited (its last profile is being kept), the path in our
 * namespace if it is still the very file mapped. When none works, the
 * first error that says more than "not there" (EACCES, ENAMETOOLONG, ...),
 * else -ENOENT.
 */
static int locate(pid_t pid, const struct proc_mapping *m, char *path, size_t len,
                  struct file_id *id)
{
    struct stat st;
    int e = proc_map_file_path(pid, m->start, m->end, path, len);
    if (e == 0)
        e = stat_path(path, &st);
    int first = e;
    if (e != 0) {
        int n = snprintf(path, len, "/proc/%d/root%s", (int)pid, m->path);
        e = n < 0 || (size_t)n >= len ? -ENAMETOOLONG : stat_path(path, &st);
        if (e == 0 && (st.st_ino != m->inode || st.st_dev != makedev(m->dev_major, m->dev_minor)))
            e = -ENOENT; /* another file by that name now */
        first = first == -ENOENT ? e : first;
    }
    if (e != 0) {
        int n = snprintf(path, len, "%s", m->path);
        e = n < 0 || (size_t)n >= len ? -ENAMETOOLONG : stat_path(path, &st);
        if (e == 0 && (st.st_ino != m->inode || st.st_dev != makedev(m->dev_major, m->dev_minor)))
            e = -ENOENT; /* another file by that name now */
        first = first == -ENOENT ? e : first;
    }
    if (e != 0)
        return first;
    if (!S_ISREG(st.st_mode))
        return -ENOEXEC; /* a device or the like: nothing to symbolize */
    *id = (struct file_id){
        .dev = st.st_dev,
        .ino = st.st_ino,
        .size = (int64_t)st.st_size,
        .mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec,
    };
    return 0;
}

/* A new entry for the file at `path` (opened outside the lock). */
static int entry_open(struct symbol_cache *c, pid_t pid, const struct proc_mapping *m,
                      const char *path, const struct file_id *id, struct cached_elf **out)
{
    struct cached_elf *e = calloc(1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    char root[64];
    snprintf(root, sizeof(root), "/proc/%d/root", (int)pid);
    /* Gone (its last profile is being kept): only debug files anyone may read. */
    struct safe_open_rule reader = {.reader_uid = (uid_t)-1, .reader_gid = (gid_t)-1};
    safe_open_reader_of(pid, &reader);
    int err = symbolizer_open_fetching(path, root, m->path, c->fetch, &e->sym);
    if (err) {
        free(e);
        return err;
    }
    /* The path may name another file now than when located: its links are
     * the process's to change. */
    if (!symbolizer_is_file(e->sym, id->dev, id->ino)) {
        symbolizer_close(e->sym);
        free(e);
        return -ENOENT;
    }
    symbolizer_set_reader(e->sym, reader.reader_uid, reader.reader_gid);
    snprintf(e->build_id, sizeof(e->build_id), "%s", symbolizer_build_id(e->sym));
    pthread_mutex_init(&e->lock, NULL);
    e->files[0] = *id;
    e->nfiles = 1;
    e->bytes = symbolizer_bytes(e->sym);
    e->refs = 1;
    *out = e;
    return 0;
}

int symbol_cache_get(struct symbol_cache *c, pid_t pid, const struct proc_mapping *m,
                     struct cached_elf **out)
{
    char path[PATH_MAX + 64];
    struct file_id id;
    struct victims old = {.n = 0};
    if (!proc_mapping_is_file(m))
        return -ENOENT;
    int err = locate(pid, m, path, sizeof(path), &id);
    if (err)
        return err;

    pthread_mutex_lock(&c->lock);
    trim(c, c->max_entries, c->max_bytes, &old);
    struct cached_elf *e = find(c, &id, "", &old);
    c->hits += e != NULL;
    c->misses += e == NULL;
    pthread_mutex_unlock(&c->lock);
    close_victims(&old);
    if (e) {
        *out = e;
        return 0;
    }

    struct cached_elf *fresh;
    err = entry_open(c, pid, m, path, &id, &fresh);
    if (err)
        return err;
    pthread_mutex_lock(&c->lock);
    /* Another file with this build ID, or another request that opened this file meanwhile. */
    e = find(c, &id, fresh->build_id, &old);
    if (!e) {
        e = fresh;
        fresh = NULL;
        e->last_used_ns = now_ns();
        trim(c, c->max_entries - 1, c->max_bytes > e->bytes ? c->max_bytes - e->bytes : 0, &old);
        for (size_t i = 0; i < SYMBOL_CACHE_ENTRIES && !e->in_table; i++) {
            if (!c->entries[i]) {
                c->entries[i] = e;
                e->in_table = true;
                c->bytes += e->bytes;
            }
        }
        /* Not in the table (every slot busy): it lives until its last put. */
    }
    pthread_mutex_unlock(&c->lock);
    if (fresh)
        entry_free(fresh);
    close_victims(&old);
    *out = e;
    return 0;
}

void symbol_cache_put(struct symbol_cache *c, struct cached_elf *e)
{
    struct victims old = {.n = 0};
    pthread_mutex_lock(&c->lock);
    e->refs--;
    e->last_used_ns = now_ns();
    bool orphan = !e->in_table && e->refs == 0;
    /* DWARF read during the request may have put the cache over its bound. */
    if (c->bytes > c->max_bytes)
        trim(c, c->max_entries, c->max_bytes, &old);
    pthread_mutex_unlock(&c->lock);
    if (orphan)
        entry_free(e);
    close_victims(&old);
}

int symbol_cache_symbolize(struct symbol_cache *c, struct cached_elf *e, uint64_t offset,
                           struct sym_frame *out)
{
    uint64_t vaddr;
    out->n = 0;
    out->from_dwarf = false;
    if (symbolizer_offset_to_vaddr(e->sym, offset, &vaddr) != 0)
        return 0;
    pthread_mutex_lock(&e->lock);
    int err = symbolizer_lookup(e->sym, vaddr, out);
    uint64_t bytes = symbolizer_bytes(e->sym);
    pthread_mutex_unlock(&e->lock);

    pthread_mutex_lock(&c->lock);
    if (bytes != e->bytes) { /* a debug file was opened */
        if (e->in_table)
            c->bytes += bytes - e->bytes;
        e->bytes = bytes;
    }
    pthread_mutex_unlock(&c->lock);
    return err;
}

void symbol_cache_stats(struct symbol_cache *c, struct symbol_cache_stats *out)
{
    pthread_mutex_lock(&c->lock);
    out->entries = 0;
    for (size_t i = 0; i < SYMBOL_CACHE_ENTRIES; i++)
        out->entries += c->entries[i] != NULL;
    out->bytes = c->bytes;
    out->hits = c->hits;
    out->misses = c->misses;
    out->evictions = c->evictions;
    out->reopened = c->reopened;
    out->max_entries = c->max_entries;
    out->max_bytes = c->max_bytes;
    pthread_mutex_unlock(&c->lock);
}
