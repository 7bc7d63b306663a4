/*
 * unwind_manager.c - builds, shares and frees the unwind tables of profiled
 * processes' executable files (see unwind_manager.h).
 */
#include "unwind_manager.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "elf_file.h"
#include "proc_maps.h"
#include "unwind_table.h"

/* One file's table, shared by the processes that map it. */
struct unwind_file {
    char key[96];       /* "b:<build id>", or "i:<major>:<minor>:<inode>" */
    uint64_t base;      /* ELF vaddr of row pc 0 */
    uint32_t first_row;
    uint32_t nrows;
    unsigned refs;      /* process mappings using it */
    int usable;         /* 0: no table (none in the file, or no room): frame pointers */
};

/* What one process was given. */
struct unwind_process {
    pid_t pid;
    uint64_t signature; /* of its executable mappings, to skip unchanged rescans */
    struct unwind_file *files[HP_MAX_UNWIND_MAPPINGS];
    size_t nfiles;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int unwind_manager_init(struct unwind_manager *m, struct bpf_state *bpf)
{
    memset(m, 0, sizeof(*m));
    m->free_ranges = malloc(16 * sizeof(*m->free_ranges));
    if (!m->free_ranges)
        return -ENOMEM;
    m->free_cap = 16;
    m->free_ranges[0].start = 0;
    m->free_ranges[0].len = HP_MAX_UNWIND_ROWS;
    m->nfree = 1;
    m->bpf = bpf;
    pthread_mutex_init(&m->lock, NULL);
    return 0;
}

void unwind_manager_destroy(struct unwind_manager *m)
{
    for (size_t i = 0; i < HP_MAX_TARGETS; i++)
        free(m->procs[i]);
    for (size_t i = 0; i < UNWIND_MAX_FILES; i++)
        free(m->files[i]);
    free(m->free_ranges);
    pthread_mutex_destroy(&m->lock);
}

/* Takes `n` rows from the free ranges (first fit); -ENOSPC if none is big enough. */
int unwind_manager_rows_alloc(struct unwind_manager *m, uint32_t n, uint32_t *first)
{
    for (size_t i = 0; i < m->nfree; i++) {
        struct row_range *r = &m->free_ranges[i];
        if (r->len < n)
            continue;
        *first = r->start;
        r->start += n;
        r->len -= n;
        if (r->len == 0) {
            memmove(r, r + 1, (m->nfree - i - 1) * sizeof(*r));
            m->nfree--;
        }
        m->stats.rows_used += n;
        return 0;
    }
    return -ENOSPC;
}

/* Gives rows back, merging with the neighbouring free ranges. */
void unwind_manager_rows_free(struct unwind_manager *m, uint32_t first, uint32_t n)
{
    size_t i = 0;
    while (i < m->nfree && m->free_ranges[i].start < first)
        i++;
    m->stats.rows_used -= n;
    struct row_range *prev = i > 0 ? &m->free_ranges[i - 1] : NULL;
    struct row_range *next = i < m->nfree ? &m->free_ranges[i] : NULL;
    if (prev && prev->start + prev->len == first) {
        prev->len += n;
        if (next && prev->start + prev->len == next->start) {
            prev->len += next->len;
            memmove(next, next + 1, (m->nfree - i - 1) * sizeof(*next));
            m->nfree--;
        }
        return;
    }
    if (next && first + n == next->start) {
        next->start = first;
        next->len += n;
        return;
    }
    if (m->nfree == m->free_cap) {
        struct row_range *nr = realloc(m->free_ranges, 2 * m->free_cap * sizeof(*nr));
        if (!nr)
            return; /* the rows are lost to reuse, never handed out twice */
        m->free_ranges = nr;
        m->free_cap *= 2;
    }
    memmove(&m->free_ranges[i + 1], &m->free_ranges[i], (m->nfree - i) * sizeof(*next));
    m->free_ranges[i].start = first;
    m->free_ranges[i].len = n;
    m->nfree++;
}

/* Builds the table of the file at `path` into a new entry `f` (usable or not). */
static void build_file(struct unwind_manager *m, struct unwind_file *f, const char *path)
{
    struct unwind_table t;
    uint64_t t0 = now_ns();
    int e = unwind_table_build(path, &t);
    m->stats.build_ns += now_ns() - t0;
    if (e) {
        m->stats.build_failures++;
        return;
    }
    uint32_t first;
    if (t.n == 0 || t.n > UINT32_MAX || unwind_manager_rows_alloc(m, (uint32_t)t.n, &first) != 0) {
        if (t.n)
            m->stats.rows_full++;
        unwind_table_free(&t);
        return;
    }
    if (bpf_state_write_unwind_rows(m->bpf, first, t.rows, t.n) != 0) {
        unwind_manager_rows_free(m, first, (uint32_t)t.n);
        m->stats.build_failures++;
        unwind_table_free(&t);
        return;
    }
    f->base = t.base;
    f->first_row = first;
    f->nrows = (uint32_t)t.n;
    f->usable = 1;
    m->stats.tables_built++;
    unwind_table_free(&t);
}

/* The entry for `key`, built on first use from `path`; NULL if there is no room. */
static struct unwind_file *get_file(struct unwind_manager *m, const char *key, const char *path)
{
    ssize_t empty = -1;
    for (size_t i = 0; i < UNWIND_MAX_FILES; i++) {
        if (m->files[i] && strcmp(m->files[i]->key, key) == 0) {
            m->files[i]->refs++;
            return m->files[i];
        }
        if (!m->files[i] && empty < 0)
            empty = (ssize_t)i;
    }
    if (empty < 0)
        return NULL;
    struct unwind_file *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    snprintf(f->key, sizeof(f->key), "%s", key);
    build_file(m, f, path);
    f->refs = 1;
    m->files[empty] = f;
    m->stats.files++;
    return f;
}

/* Drops one reference; the last one frees the file's rows. */
static void put_file(struct unwind_manager *m, struct unwind_file *f)
{
    if (--f->refs > 0)
        return;
    for (size_t i = 0; i < UNWIND_MAX_FILES; i++) {
        if (m->files[i] == f) {
            m->files[i] = NULL;
            break;
        }
    }
    if (f->usable)
        unwind_manager_rows_free(m, f->first_row, f->nrows);
    m->stats.files--;
    free(f);
}

/* The signature of a process's executable file mappings. */
static uint64_t signature_of(const struct proc_maps *maps)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < maps->n; i++) {
        const struct proc_mapping *pm = &maps->v[i];
        if (!pm->executable || !proc_mapping_is_file(pm))
            continue;
        uint64_t parts[3] = {pm->start, pm->end ^ pm->offset, pm->inode};
        for (int k = 0; k < 3; k++)
            h = (h ^ parts[k]) * 0x100000001b3ULL;
    }
    return h;
}

/* Fills one hp_unwind_mapping for mapping `pm` of `pid`, taking a file reference. */
static int map_one(struct unwind_manager *m, pid_t pid, const struct proc_mapping *pm,
                   struct unwind_file **file, struct hp_unwind_mapping *out)
{
    char path[128], key[96], build_id[65];
    struct elf_file *ef;
    uint64_t vaddr;
    snprintf(path, sizeof(path), "/proc/%d/map_files/%llx-%llx", (int)pid,
             (unsigned long long)pm->start, (unsigned long long)pm->end);
    if (elf_file_open(path, &ef) != 0)
        return -ENOENT;
    int e = elf_file_offset_to_vaddr(ef, pm->offset, &vaddr);
    if (elf_file_build_id(ef, build_id, sizeof(build_id)) == 0)
        snprintf(key, sizeof(key), "b:%s", build_id);
    else
        snprintf(key, sizeof(key), "i:%u:%u:%llu", pm->dev_major, pm->dev_minor,
                 (unsigned long long)pm->inode);
    elf_file_close(ef);
    if (e)
        return e;
    struct unwind_file *f = get_file(m, key, path);
    if (!f)
        return -ENOSPC;
    *file = f;
    if (!f->usable)
        return 0;
    out->start = pm->start;
    out->end = pm->end;
    out->bias = pm->start - vaddr + f->base;
    out->first_row = f->first_row;
    out->nrows = f->nrows;
    return 1;
}

/* The process's slot: its own, or a free one; NULL if none. */
static struct unwind_process **proc_slot(struct unwind_manager *m, pid_t pid, int create)
{
    struct unwind_process **empty = NULL;
    for (size_t i = 0; i < HP_MAX_TARGETS; i++) {
        if (m->procs[i] && m->procs[i]->pid == pid)
            return &m->procs[i];
        if (!m->procs[i] && !empty)
            empty = &m->procs[i];
    }
    return create ? empty : NULL;
}

int unwind_manager_update(struct unwind_manager *m, pid_t pid)
{
    struct proc_maps maps;
    int e = proc_maps_read(pid, &maps);
    if (e)
        return e;
    uint64_t sig = signature_of(&maps);
    struct hp_unwind_proc *bp = calloc(1, sizeof(*bp));
    struct unwind_process *np = calloc(1, sizeof(*np));
    if (!bp || !np) {
        e = -ENOMEM;
        goto out;
    }
    pthread_mutex_lock(&m->lock);
    struct unwind_process **slot = proc_slot(m, pid, 1);
    if (!slot || (*slot && (*slot)->signature == sig)) {
        e = slot ? 0 : -ENOSPC;
        pthread_mutex_unlock(&m->lock);
        goto out;
    }
    np->pid = pid;
    np->signature = sig;
    for (size_t i = 0; i < maps.n && np->nfiles < HP_MAX_UNWIND_MAPPINGS; i++) {
        const struct proc_mapping *pm = &maps.v[i];
        if (!pm->executable || !proc_mapping_is_file(pm))
            continue;
        struct unwind_file *f = NULL;
        if (map_one(m, pid, pm, &f, &bp->m[bp->n]) > 0)
            bp->n++;
        if (f)
            np->files[np->nfiles++] = f;
    }
    /* Maps are sorted by address, so the BPF side can search bp->m. */
    e = bpf_state_set_unwind_proc(m->bpf, (uint32_t)pid, bp);
    struct unwind_process *old = *slot;
    *slot = np;
    np = old;
    for (size_t i = 0; np && i < np->nfiles; i++)
        put_file(m, np->files[i]);
    pthread_mutex_unlock(&m->lock);
out:
    free(np);
    free(bp);
    proc_maps_free(&maps);
    return e;
}

void unwind_manager_forget(struct unwind_manager *m, pid_t pid)
{
    pthread_mutex_lock(&m->lock);
    struct unwind_process **slot = proc_slot(m, pid, 0);
    if (slot) {
        bpf_state_delete_unwind_proc(m->bpf, (uint32_t)pid);
        for (size_t i = 0; i < (*slot)->nfiles; i++)
            put_file(m, (*slot)->files[i]);
        free(*slot);
        *slot = NULL;
    }
    pthread_mutex_unlock(&m->lock);
}

void unwind_manager_stats(struct unwind_manager *m, struct unwind_stats *out)
{
    pthread_mutex_lock(&m->lock);
    *out = m->stats;
    pthread_mutex_unlock(&m->lock);
}
