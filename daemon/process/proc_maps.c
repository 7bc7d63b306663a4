/*
 * proc_maps.c - parse /proc/PID/maps into a sorted array of mappings.
 *
 * The kernel prints one line per VMA:
 *   start-end perms offset major:minor inode   path
 * with the path (possibly empty, possibly holding spaces) running to the end
 * of the line after some padding. The parser is strict about the fixed fields
 * so that a bad input shows up as -EINVAL instead of a wrong mapping.
 */
#include "proc_maps.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "array_grow.h"
#include "search.h"
#include "strutil.h"

/* First read buffer; most processes' maps fit (a few hundred lines). */
#define MAPS_READ_CHUNK 65536

/* Upper bound on the size of a maps file we accept: a process at the default
 * vm.max_map_count (65530) with long paths stays well below this. */
#define MAPS_MAX_BYTES (256u << 20)

/* The suffix the kernel appends to the path of an unlinked file. */
static const char DELETED_SUFFIX[] = " (deleted)";

/* A read position in the text being parsed; `end` is one past the last byte. */
struct cursor {
    const char *p;
    const char *end;
};

/* Parses hex digits at the cursor into `out`; fails on none or on overflow. */
static int parse_hex(struct cursor *c, uint64_t *out)
{
    uint64_t v = 0;
    const char *start = c->p;

    while (c->p < c->end) {
        char ch = *c->p;
        unsigned d;
        if (ch >= '0' && ch <= '9')
            d = (unsigned)(ch - '0');
        else if (ch >= 'a' && ch <= 'f')
            d = (unsigned)(ch - 'a' + 10);
        else if (ch >= 'A' && ch <= 'F')
            d = (unsigned)(ch - 'A' + 10);
        else
            break;
        if (v >> 60)
            return -EINVAL;
        v = v << 4 | d;
        c->p++;
    }
    if (c->p == start)
        return -EINVAL;
    *out = v;
    return 0;
}

/* Consumes one expected character. */
static int expect(struct cursor *c, char ch)
{
    if (c->p >= c->end || *c->p != ch)
        return -EINVAL;
    c->p++;
    return 0;
}

/* Parses the four permission characters "rwxp" / "---s" and friends. */
static int parse_perms(struct cursor *c, struct proc_mapping *pm)
{
    if (c->end - c->p < 4)
        return -EINVAL;
    const char *s = c->p;
    if ((s[0] != 'r' && s[0] != '-') || (s[1] != 'w' && s[1] != '-') ||
        (s[2] != 'x' && s[2] != '-') || (s[3] != 'p' && s[3] != 's'))
        return -EINVAL;
    pm->readable = s[0] == 'r';
    pm->writable = s[1] == 'w';
    pm->executable = s[2] == 'x';
    pm->shared = s[3] == 's';
    c->p += 4;
    return 0;
}

/* Parses one line (without its newline) into `pm`, allocating its path. */
static int parse_line(struct cursor c, struct proc_mapping *pm)
{
    uint64_t major, minor;

    memset(pm, 0, sizeof(*pm));
    if (parse_hex(&c, &pm->start) || expect(&c, '-') || parse_hex(&c, &pm->end) ||
        expect(&c, ' ') || parse_perms(&c, pm) || expect(&c, ' ') || parse_hex(&c, &pm->offset) ||
        expect(&c, ' ') || parse_hex(&c, &major) || expect(&c, ':') || parse_hex(&c, &minor) ||
        expect(&c, ' ') || parse_decimal(&c.p, c.end, &pm->inode))
        return -EINVAL;
    if (pm->start >= pm->end || major > UINT32_MAX || minor > UINT32_MAX)
        return -EINVAL;
    pm->dev_major = (uint32_t)major;
    pm->dev_minor = (uint32_t)minor;

    /* Anonymous mappings end right after the inode; others pad with spaces. */
    if (c.p < c.end && *c.p != ' ')
        return -EINVAL;
    while (c.p < c.end && *c.p == ' ')
        c.p++;

    size_t len = proc_path_without_deleted(c.p, (size_t)(c.end - c.p), &pm->deleted);
    if (memchr(c.p, '\0', len))
        return -EINVAL;
    pm->path = strndup(c.p, len);
    return pm->path ? 0 : -ENOMEM;
}

size_t proc_path_without_deleted(const char *path, size_t len, bool *deleted)
{
    size_t slen = sizeof(DELETED_SUFFIX) - 1;
    bool cut = len > slen && memcmp(path + len - slen, DELETED_SUFFIX, slen) == 0;
    if (deleted)
        *deleted = cut;
    return cut ? len - slen : len;
}

/* Orders line numbers by their mapping's start, then as read; qsort_r with the mappings. */
static int cmp_start_then_line(const void *a, const void *b, void *arg)
{
    const struct proc_mapping *v = arg;
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    if (v[x].start != v[y].start)
        return v[x].start < v[y].start ? -1 : 1;
    return x < y ? -1 : x > y;
}

/*
 * Puts the mappings in start order and drops each one that overlaps a line
 * read after it. The kernel prints maps a page at a time and drops its lock
 * in between, so a VMA that changes meanwhile can be printed twice, before
 * and after the change (documented; the per-VMA-lock rework of 6.16 keeps
 * it): the later line is the newer one. proc_maps_find()'s binary search
 * needs what is left: sorted and without overlaps (tests/fuzz/fuzz_proc_maps
 * found it answering wrongly on overlapping lines).
 */
static int sort_and_drop_stale(struct proc_maps *m, bool sorted)
{
    size_t *ord = malloc(m->n * sizeof(*ord));
    struct proc_mapping *out = malloc(m->n * sizeof(*out));
    if (!ord || !out) {
        free(ord);
        free(out);
        return -ENOMEM;
    }
    for (size_t i = 0; i < m->n; i++)
        ord[i] = i;
    if (!sorted)
        qsort_r(ord, m->n, sizeof(*ord), cmp_start_then_line, m->v);
    /* ord[0..kept) are the lines kept so far; only the last can overlap the next. */
    size_t kept = 0;
    for (size_t i = 0; i < m->n; i++) {
        size_t line = ord[i];
        if (kept && m->v[ord[kept - 1]].end > m->v[line].start) {
            size_t last = ord[kept - 1];
            if (last > line) {
                free(m->v[line].path); /* the kept one was read later */
                continue;
            }
            free(m->v[last].path);
            kept--;
        }
        ord[kept++] = line;
    }
    for (size_t i = 0; i < kept; i++)
        out[i] = m->v[ord[i]];
    free(m->v);
    free(ord);
    m->v = out;
    m->n = kept;
    return 0;
}

int proc_maps_parse(const char *text, size_t len, struct proc_maps *out)
{
    struct proc_maps m = {0};
    size_t cap = 0;
    bool sorted = true, disjoint = true;
    int err = 0;
    const char *p = text, *end = text + len;

    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *line_end = nl ? nl : end;

        struct proc_mapping *nv = array_grow(m.v, &cap, m.n + 1, sizeof(*nv), 64);
        if (!nv) {
            err = -ENOMEM;
            goto out;
        }
        m.v = nv;
        err = parse_line((struct cursor){p, line_end}, &m.v[m.n]);
        if (err)
            goto out;
        if (m.n && m.v[m.n].start < m.v[m.n - 1].start)
            sorted = false;
        if (m.n && m.v[m.n].start < m.v[m.n - 1].end)
            disjoint = false;
        m.n++;
        p = nl ? nl + 1 : end;
    }
    /* The kernel prints VMAs in order and apart, but not always (see sort_and_drop_stale). */
    if (!(sorted && disjoint) && (err = sort_and_drop_stale(&m, sorted)))
        goto out;
    *out = m;
    return 0;
out:
    proc_maps_free(&m);
    return err;
}

/* Reads a whole file of unknown size (procfs reports 0) into a malloc'd buffer. */
static int read_all(int fd, char **buf_out, size_t *len_out)
{
    size_t cap = MAPS_READ_CHUNK, len = 0;
    char *buf = malloc(cap);
    int err = 0;

    if (!buf)
        return -ENOMEM;
    for (;;) {
        if (len == cap) {
            if (cap >= MAPS_MAX_BYTES) {
                err = -EFBIG;
                goto out;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                err = -ENOMEM;
                goto out;
            }
            buf = nb;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + len, cap - len);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            err = -errno;
            goto out;
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    *buf_out = buf;
    *len_out = len;
    return 0;
out:
    free(buf);
    return err;
}

int proc_maps_read(pid_t pid, struct proc_maps *out)
{
    char path[64];
    char *buf = NULL;
    size_t len = 0;
    int err;

    if (pid <= 0)
        return -EINVAL;
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? -ESRCH : -errno;
    err = read_all(fd, &buf, &len);
    close(fd);
    if (err)
        return err;
    err = proc_maps_parse(buf, len, out);
    free(buf);
    return err;
}

void proc_maps_free(struct proc_maps *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n; i++)
        free(m->v[i].path);
    free(m->v);
    m->v = NULL;
    m->n = 0;
}

/* What proc_maps_find() looks for. */
struct addr_in_maps {
    const struct proc_maps *m;
    uint64_t addr;
};

/* Whether mapping i ends at or below the address sought. */
static bool ends_before(const void *ctx, size_t i)
{
    const struct addr_in_maps *a = ctx;
    return a->m->v[i].end <= a->addr;
}

const struct proc_mapping *proc_maps_find(const struct proc_maps *m, uint64_t addr)
{
    /* The first mapping whose end is above addr holds addr if it starts at or below. */
    struct addr_in_maps a = {m, addr};
    size_t lo = search_partition(0, m->n, ends_before, &a);
    if (lo < m->n && m->v[lo].start <= addr)
        return &m->v[lo];
    return NULL;
}

bool proc_mapping_is_file(const struct proc_mapping *pm)
{
    /* Pseudo-paths are bracketed ("[heap]", "[anon:x]"); files are absolute paths. */
    return pm->path && pm->path[0] == '/';
}
