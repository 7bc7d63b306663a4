/*
 * perf_map.c - reads, caches and looks up the perf maps of JIT runtimes
 * (see perf_map.h).
 *
 * Why not a library: elfutils names ELF files only, and perf's own reader
 * lives inside perf. The format is one line per symbol and a few dozen
 * lines of code; what needs care is where the file is opened from (inside
 * the process's root, with openat2's RESOLVE_IN_ROOT, so a container's
 * symlinks cannot lead outside it) and whose file it is.
 */
#include "perf_map.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "array_grow.h"
#include "clock.h"
#include "proc_info.h"
#include "search.h"

/* Bytes read from the file per read() call. */
#define READ_CHUNK (256 * 1024)

struct perf_map *perf_map_new(pid_t pid)
{
    struct perf_map *m = calloc(1, sizeof(*m));
    if (!m)
        return NULL;
    pthread_mutex_init(&m->lock, NULL);
    m->pid = pid;
    return m;
}

void perf_map_free(struct perf_map *m)
{
    if (!m)
        return;
    pthread_mutex_destroy(&m->lock);
    free(m->v);
    free(m->names);
    free(m);
}

/* Empties a map to be read again from the start (another file). */
static void perf_map_reset(struct perf_map *m)
{
    m->n = 0;
    m->names_len = 0;
    m->max_size = 0;
    m->read_to = 0;
    m->lines = m->bad_lines = 0;
    m->dev = 0;
    m->ino = 0;
}

/* A hex number, with or without 0x; the end in *end, NULL if none. */
static uint64_t parse_hex(const char *p, const char *limit, const char **end)
{
    uint64_t v = 0;
    int digits = 0;
    if (limit - p > 2 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
        p += 2;
    for (; p < limit && digits <= 16; p++, digits++) {
        int d;
        if (*p >= '0' && *p <= '9')
            d = *p - '0';
        else if (*p >= 'a' && *p <= 'f')
            d = *p - 'a' + 10;
        else if (*p >= 'A' && *p <= 'F')
            d = *p - 'A' + 10;
        else
            break;
        v = v << 4 | (uint64_t)d;
    }
    *end = digits > 0 && digits <= 16 ? p : NULL;
    return v;
}

/* Appends a name (cut to PERF_MAP_MAX_NAME - 1 bytes); its offset, or -ENOMEM. */
static long add_name(struct perf_map *m, const char *s, size_t len)
{
    if (len >= PERF_MAP_MAX_NAME)
        len = PERF_MAP_MAX_NAME - 1;
    if (m->names_len + len + 1 > UINT32_MAX)
        return -ENOMEM;
    char *nn = array_grow(m->names, &m->names_cap, m->names_len + len + 1, 1, 4096);
    if (!nn)
        return -ENOMEM;
    m->names = nn;
    long off = (long)m->names_len;
    memcpy(m->names + m->names_len, s, len);
    m->names[m->names_len + len] = '\0';
    m->names_len += len + 1;
    return off;
}

/* Parses one line (without its newline) into a new symbol; 0, 1 if it
 * was not a symbol line, or -ENOMEM. */
static int parse_line(struct perf_map *m, const char *p, const char *end)
{
    const char *q;
    uint64_t start = parse_hex(p, end, &q);
    if (!q || q >= end || *q != ' ')
        return 1;
    uint64_t size = parse_hex(q + 1, end, &q);
    if (!q || q >= end || *q != ' ' || size == 0 || start + size < start)
        return 1;
    q++;
    size_t len = (size_t)(end - q);
    while (len > 0 && (q[len - 1] == '\r' || q[len - 1] == ' '))
        len--;
    if (len == 0)
        return 1;
    struct perf_map_symbol *nv = array_grow(m->v, &m->cap, m->n + 1, sizeof(*nv), 1024);
    if (!nv)
        return -ENOMEM;
    m->v = nv;
    long name = add_name(m, q, len);
    if (name < 0)
        return (int)name;
    m->v[m->n++] = (struct perf_map_symbol){
        .start = start, .size = size, .seq = m->lines, .name = (uint32_t)name};
    if (size > m->max_size)
        m->max_size = size;
    return 0;
}

static int by_start_then_seq(const void *a, const void *b)
{
    const struct perf_map_symbol *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

long perf_map_parse(struct perf_map *m, const char *buf, size_t len)
{
    size_t used = 0;
    for (;;) {
        const char *nl = memchr(buf + used, '\n', len - used);
        if (!nl)
            break;
        if (m->n < PERF_MAP_MAX_SYMBOLS && m->lines < UINT32_MAX) {
            int e = parse_line(m, buf + used, nl);
            if (e < 0)
                return e;
            m->bad_lines += e;
        }
        m->lines += m->lines < UINT32_MAX;
        used = (size_t)(nl - buf) + 1;
    }
    return (long)used;
}

void perf_map_sort(struct perf_map *m)
{
    if (m->n > 1)
        qsort(m->v, m->n, sizeof(*m->v), by_start_then_seq);
}

/* What perf_map_lookup's search compares with. */
struct lookup_key {
    const struct perf_map *m;
    uint64_t addr;
};

static bool starts_at_or_before(const void *ctx, size_t i)
{
    const struct lookup_key *k = ctx;
    return k->m->v[i].start <= k->addr;
}

int perf_map_lookup(struct perf_map *m, uint64_t addr, char *name, size_t len)
{
    pthread_mutex_lock(&m->lock);
    /* The first symbol starting after addr; candidates are just before it. */
    struct lookup_key key = {.m = m, .addr = addr};
    size_t lo = search_partition(0, m->n, starts_at_or_before, &key);
    const struct perf_map_symbol *best = NULL;
    for (size_t i = lo, k = 0; i > 0 && k < PERF_MAP_OVERLAP_SCAN; i--, k++) {
        const struct perf_map_symbol *s = &m->v[i - 1];
        if (addr - s->start >= m->max_size)
            break; /* no symbol this far back reaches addr */
        if (addr - s->start < s->size && (!best || s->seq > best->seq))
            best = s;
    }
    if (best && len > 0)
        snprintf(name, len, "%s", m->names + best->name);
    pthread_mutex_unlock(&m->lock);
    return best != NULL;
}

/*
 * Opens the map of `pid` inside its root, as a regular file (no symlink,
 * no FIFO) owned by root or the process's owner and written since the
 * process started. A descriptor, or -errno (-ENOENT for all refusals).
 */
static int open_map_file(pid_t pid, uint64_t start_ticks, struct stat *st)
{
    char root[64], name[64], self[32];
    pid_t ns_pid;
    struct stat owner;
    int e = proc_ns_pid(pid, &ns_pid);
    if (e)
        return e;
    snprintf(self, sizeof(self), "/proc/%d", (int)pid);
    if (stat(self, &owner) != 0)
        return errno == ENOENT ? -ESRCH : -errno;
    snprintf(root, sizeof(root), "/proc/%d/root", (int)pid);
    snprintf(name, sizeof(name), "tmp/perf-%d.map", (int)ns_pid);
    int dir = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return errno == ENOENT ? -ESRCH : -errno;
    struct open_how how = {
        .flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC,
        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
    };
    int fd = (int)syscall(SYS_openat2, dir, name, &how, sizeof(how));
    e = fd < 0 ? -errno : 0;
    close(dir);
    if (fd < 0)
        return e == -ELOOP ? -ENOENT : e;
    /* Written since the process started: else a runtime that had this pid before left it. */
    struct timespec real, boot;
    clock_gettime(CLOCK_REALTIME, &real);
    clock_gettime(CLOCK_BOOTTIME, &boot);
    long hz = sysconf(_SC_CLK_TCK);
    int64_t started = (int64_t)real.tv_sec - (int64_t)boot.tv_sec +
                      (int64_t)(start_ticks / (uint64_t)(hz > 0 ? hz : 100));
    if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode) ||
        (st->st_uid != 0 && st->st_uid != owner.st_uid) || (int64_t)st->st_mtime < started - 1) {
        close(fd);
        return -ENOENT;
    }
    return fd;
}

/* Reads what the file holds past m->read_to (all of it if it is another
 * file or shrank), and sorts once what it read (a large map is read in
 * many chunks); m's lock held. */
static int refresh(struct perf_map *m)
{
    struct stat st;
    int fd = open_map_file(m->pid, m->start_ticks, &st);
    if (fd < 0)
        return fd;
    if (st.st_dev != m->dev || st.st_ino != m->ino || (uint64_t)st.st_size < m->read_to)
        perf_map_reset(m);
    m->dev = st.st_dev;
    m->ino = st.st_ino;
    int e = 0;
    char *buf = NULL;
    size_t have = 0, symbols_before = m->n;
    while (e == 0 && m->read_to + have < (uint64_t)st.st_size) {
        if (!buf && !(buf = malloc(READ_CHUNK))) {
            e = -ENOMEM;
            break;
        }
        ssize_t got = pread(fd, buf + have, READ_CHUNK - have, (off_t)(m->read_to + have));
        if (got <= 0) {
            e = got < 0 ? -errno : 0;
            break;
        }
        have += (size_t)got;
        long used = perf_map_parse(m, buf, have);
        if (used < 0) {
            e = (int)used;
            perf_map_reset(m); /* half-parsed: start afresh next time */
            break;
        }
        if (used == 0 && have == READ_CHUNK)
            used = (long)have; /* a line longer than a chunk: skipped */
        memmove(buf, buf + used, have - (size_t)used);
        have -= (size_t)used;
        m->read_to += (uint64_t)used;
    }
    if (m->n != symbols_before)
        perf_map_sort(m);
    free(buf);
    close(fd);
    return e;
}

void perf_map_cache_init(struct perf_map_cache *c)
{
    memset(c, 0, sizeof(*c));
    pthread_mutex_init(&c->lock, NULL);
    c->idle_ns = (int64_t)PERF_MAP_IDLE_SECONDS * 1000000000;
}

void perf_map_cache_destroy(struct perf_map_cache *c)
{
    for (size_t i = 0; i < PERF_MAP_CACHE_PROCS; i++)
        perf_map_free(c->maps[i]);
    pthread_mutex_destroy(&c->lock);
}

/* The slot of `pid`'s map (a new one if there is none and room), dropping
 * idle maps and maps of processes that were replaced; cache lock held. */
static struct perf_map **slot_of(struct perf_map_cache *c, pid_t pid, uint64_t start_ticks)
{
    struct perf_map **found = NULL, **empty = NULL;
    int64_t now = (int64_t)monotonic_ns();
    for (size_t i = 0; i < PERF_MAP_CACHE_PROCS; i++) {
        struct perf_map *m = c->maps[i];
        if (m && m->refs == 0 &&
            (now - m->last_used_ns > c->idle_ns ||
             (m->pid == pid && m->start_ticks != start_ticks))) {
            perf_map_free(m);
            c->maps[i] = m = NULL;
        }
        if (m && m->pid == pid && m->start_ticks == start_ticks)
            found = &c->maps[i];
        if (!m && !empty)
            empty = &c->maps[i];
    }
    return found ? found : empty;
}

int perf_map_get(struct perf_map_cache *c, pid_t pid, struct perf_map **out)
{
    uint64_t ticks;
    int e = proc_start_time(pid, &ticks);
    if (e)
        return e;
    pthread_mutex_lock(&c->lock);
    struct perf_map **slot = slot_of(c, pid, ticks);
    if (!slot) {
        pthread_mutex_unlock(&c->lock);
        return -EBUSY;
    }
    if (!*slot) {
        *slot = perf_map_new(pid);
        if (!*slot) {
            pthread_mutex_unlock(&c->lock);
            return -ENOMEM;
        }
        (*slot)->start_ticks = ticks;
    }
    struct perf_map *m = *slot;
    m->refs++;
    m->last_used_ns = (int64_t)monotonic_ns();
    pthread_mutex_unlock(&c->lock);

    pthread_mutex_lock(&m->lock);
    e = refresh(m);
    int empty = m->n == 0;
    pthread_mutex_unlock(&m->lock);
    if (e == 0 && empty)
        e = -ENOENT;
    if (e && e != -ENOMEM && e != -ESRCH)
        e = -ENOENT; /* no usable map: refused, unreadable or empty */
    if (e) {
        perf_map_put(c, m);
        return e;
    }
    *out = m;
    return 0;
}

int perf_map_get_kept(struct perf_map_cache *c, pid_t pid, uint64_t start_ticks,
                      struct perf_map **out)
{
    struct perf_map *m = NULL;
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < PERF_MAP_CACHE_PROCS && !m; i++)
        if (c->maps[i] && c->maps[i]->pid == pid && c->maps[i]->start_ticks == start_ticks)
            m = c->maps[i];
    if (m) {
        m->refs++;
        m->last_used_ns = (int64_t)monotonic_ns();
    }
    pthread_mutex_unlock(&c->lock);
    if (!m)
        return -ENOENT;
    pthread_mutex_lock(&m->lock);
    int empty = m->n == 0;
    pthread_mutex_unlock(&m->lock);
    if (empty) {
        perf_map_put(c, m);
        return -ENOENT;
    }
    *out = m;
    return 0;
}

void perf_map_put(struct perf_map_cache *c, struct perf_map *m)
{
    pthread_mutex_lock(&c->lock);
    m->refs--;
    m->last_used_ns = (int64_t)monotonic_ns();
    pthread_mutex_unlock(&c->lock);
}
