/*
 * unwind_manager.c - builds, shares and frees the unwind tables of profiled
 * processes' executable files (see unwind_manager.h).
 *
 * An update runs in five steps, the slow ones without the lock: (1) the
 * process's executable mappings and their files' keys are read; (2) under
 * the lock each file is found, or entered as `building` by the update that
 * will build it; (3) that update builds its tables; (4) reserves their rows
 * under the lock and writes them without it; (5) under the lock, once no
 * file it needs is still building (waiting on `built`), it gives the
 * process its mappings.
 */
#include "unwind_manager.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build_id.h"
#include "clock.h"
#include "elf_file.h"
#include "proc_info.h"
#include "proc_maps.h"
#include "unwind_table.h"

/* "b:" and a build ID in hex, or "i:<major>:<minor>:<inode>". */
#define FILE_KEY_SIZE (2 + BUILD_ID_HEX_SIZE)

/* Where a file's table stands. */
enum file_state {
    FILE_BUILDING, /* an update is building it and writing its rows; wait for `built` */
    FILE_READY,    /* rows in place */
    FILE_NO_TABLE, /* none (no usable CFI, unreadable, or no room): frame pointers */
};

/* One file's table, shared by the processes that map it. */
struct unwind_file {
    char key[FILE_KEY_SIZE];
    enum file_state state;
    uint64_t base;      /* ELF vaddr of row pc 0 */
    uint32_t first_row;
    uint32_t nrows;
    unsigned refs;      /* process mappings (and updates under way) using it */
};

/* What one process was given. */
struct unwind_process {
    pid_t pid;
    uint64_t signature; /* of its executable mappings, to skip unchanged rescans */
    struct unwind_file *files[HP_MAX_UNWIND_MAPPINGS];
    size_t nfiles;
};

/* One executable mapping of the process being updated. */
struct mapping_ref {
    const struct proc_mapping *pm;
    char key[FILE_KEY_SIZE];
    char path[64];       /* its map_files link, which opens the very file mapped */
    uint64_t vaddr;      /* the ELF vaddr of pm->offset */
    struct unwind_file *file; /* a reference, once found or entered */
    int builder;         /* this update builds the file's table */
};

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
    pthread_cond_init(&m->built, NULL);
    return 0;
}

void unwind_manager_destroy(struct unwind_manager *m)
{
    for (size_t i = 0; i < HP_MAX_TARGETS; i++)
        free(m->procs[i]);
    for (size_t i = 0; i < UNWIND_MAX_FILES; i++)
        free(m->files[i]);
    free(m->free_ranges);
    pthread_cond_destroy(&m->built);
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

/* The entry of `key` with a reference taken, entered as FILE_BUILDING
 * (*fresh set) if there is none; NULL if the table of files is full (or
 * memory is). Under the lock. */
static struct unwind_file *get_file(struct unwind_manager *m, const char *key, int *fresh)
{
    ssize_t empty = -1;
    *fresh = 0;
    for (size_t i = 0; i < UNWIND_MAX_FILES; i++) {
        if (m->files[i] && strcmp(m->files[i]->key, key) == 0) {
            m->files[i]->refs++;
            return m->files[i];
        }
        if (!m->files[i] && empty < 0)
            empty = (ssize_t)i;
    }
    struct unwind_file *f = empty < 0 ? NULL : calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    snprintf(f->key, sizeof(f->key), "%s", key);
    f->state = FILE_BUILDING;
    f->refs = 1;
    m->files[empty] = f;
    m->stats.files++;
    *fresh = 1;
    return f;
}

/* Drops one reference; the last one frees the file's rows. Under the lock. */
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
    if (f->state == FILE_READY)
        unwind_manager_rows_free(m, f->first_row, f->nrows);
    m->stats.files--;
    free(f);
}

/* Builds the table of `f` from `path` and writes its rows, then marks it
 * ready (or without a table) and wakes the updates waiting for it. Takes
 * the lock only to count and to reserve rows. */
static void build_file(struct unwind_manager *m, struct unwind_file *f, const char *path)
{
    struct unwind_table t;
    uint64_t t0 = monotonic_ns();
    int e = unwind_table_build(path, &t);
    uint64_t took = monotonic_ns() - t0;
    uint32_t first = 0;
    pthread_mutex_lock(&m->lock);
    m->stats.build_ns += took;
    m->stats.build_failures += e != 0;
    if (e == 0 &&
        (t.n == 0 || t.n > UINT32_MAX || unwind_manager_rows_alloc(m, (uint32_t)t.n, &first) != 0)) {
        m->stats.rows_full += t.n != 0;
        e = -ENOSPC;
    }
    pthread_mutex_unlock(&m->lock);
    /* The rows are ours alone until the file is marked ready. */
    int written = e == 0 ? bpf_state_write_unwind_rows(m->bpf, first, t.rows, t.n) : e;
    pthread_mutex_lock(&m->lock);
    if (e == 0 && written != 0) {
        unwind_manager_rows_free(m, first, (uint32_t)t.n);
        m->stats.build_failures++;
    }
    if (written == 0) {
        f->base = t.base;
        f->first_row = first;
        f->nrows = (uint32_t)t.n;
        m->stats.tables_built++;
    }
    f->state = written == 0 ? FILE_READY : FILE_NO_TABLE;
    pthread_cond_broadcast(&m->built);
    pthread_mutex_unlock(&m->lock);
    unwind_table_free(&t);
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

/* Reads what an update needs of mapping `pm` of `pid`: the key of its
 * file and the ELF vaddr of its offset. -errno if its file cannot be read. */
static int read_mapping(pid_t pid, const struct proc_mapping *pm, struct mapping_ref *r)
{
    char build_id[BUILD_ID_HEX_SIZE];
    struct elf_file *ef;
    r->pm = pm;
    int e = proc_map_file_path(pid, pm->start, pm->end, r->path, sizeof(r->path));
    if (e == 0)
        e = elf_file_open_headers(r->path, &ef);
    if (e)
        return e;
    e = elf_file_offset_to_vaddr(ef, pm->offset, &r->vaddr);
    if (elf_file_build_id(ef, build_id, sizeof(build_id)) == 0)
        snprintf(r->key, sizeof(r->key), "b:%s", build_id);
    else
        snprintf(r->key, sizeof(r->key), "i:%u:%u:%llu", pm->dev_major, pm->dev_minor,
                 (unsigned long long)pm->inode);
    elf_file_close(ef);
    return e;
}

/* Step 1: the executable file mappings of `maps` that can be read, up to
 * HP_MAX_UNWIND_MAPPINGS; *over counts those beyond. Without the lock. */
static size_t read_mappings(struct unwind_manager *m, pid_t pid, const struct proc_maps *maps,
                            struct mapping_ref *refs, size_t *over)
{
    size_t n = 0, unreadable = 0;
    *over = 0;
    for (size_t i = 0; i < maps->n; i++) {
        const struct proc_mapping *pm = &maps->v[i];
        if (!pm->executable || !proc_mapping_is_file(pm))
            continue;
        if (n == HP_MAX_UNWIND_MAPPINGS)
            (*over)++;
        else if (read_mapping(pid, pm, &refs[n]) == 0)
            n++;
        else
            unreadable++; /* unwound by frame pointers, like a file without CFI */
    }
    if (unreadable) {
        pthread_mutex_lock(&m->lock);
        m->stats.build_failures += unreadable;
        pthread_mutex_unlock(&m->lock);
    }
    return n;
}

/* Steps 2 to 4: takes a reference to each mapping's file, then builds
 * the ones this update entered. A file for which the table of files has no
 * room gets no table, like one that does not fit the rows; its mapping is
 * dropped from `refs`. Returns how many stay. */
static size_t get_files(struct unwind_manager *m, struct mapping_ref *refs, size_t n)
{
    size_t kept = 0;
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; i < n; i++) {
        refs[i].file = get_file(m, refs[i].key, &refs[i].builder);
        if (refs[i].file)
            refs[kept++] = refs[i];
        else
            m->stats.rows_full++;
    }
    pthread_mutex_unlock(&m->lock);
    for (size_t i = 0; i < kept; i++)
        if (refs[i].builder)
            build_file(m, refs[i].file, refs[i].path);
    return kept;
}

/* Step 5, under the lock: waits until no file of `refs` is building, then
 * gives process `pid` its mappings and swaps in its new entry `np` (which
 * takes over the references); the old entry's references go. */
static int give_mappings(struct unwind_manager *m, pid_t pid, struct mapping_ref *refs, size_t n,
                         struct unwind_process *np, struct hp_unwind_proc *bp)
{
    for (size_t i = 0; i < n; i++)
        while (refs[i].file->state == FILE_BUILDING)
            pthread_cond_wait(&m->built, &m->lock);
    struct unwind_process **slot = proc_slot(m, pid, 1);
    if (!slot)
        return -ENOSPC;
    for (size_t i = 0; i < n; i++) {
        const struct unwind_file *f = refs[i].file;
        const struct proc_mapping *pm = refs[i].pm;
        np->files[np->nfiles++] = refs[i].file;
        if (f->state != FILE_READY)
            continue;
        /* Maps are sorted by address, so the BPF side can search bp->m. */
        bp->m[bp->n++] = (struct hp_unwind_mapping){.start = pm->start,
                                                    .end = pm->end,
                                                    .bias = pm->start - refs[i].vaddr + f->base,
                                                    .first_row = f->first_row,
                                                    .nrows = f->nrows};
    }
    int e = bpf_state_set_unwind_proc(m->bpf, (uint32_t)pid, bp);
    struct unwind_process *old = *slot;
    *slot = np;
    for (size_t i = 0; old && i < old->nfiles; i++)
        put_file(m, old->files[i]);
    free(old);
    return e;
}

/* Whether process `pid` was given tables for mappings of signature `sig` already. */
static int unchanged(struct unwind_manager *m, pid_t pid, uint64_t sig)
{
    pthread_mutex_lock(&m->lock);
    struct unwind_process **slot = proc_slot(m, pid, 0);
    int same = slot && (*slot)->signature == sig;
    pthread_mutex_unlock(&m->lock);
    return same;
}

int unwind_manager_update(struct unwind_manager *m, pid_t pid, char *err, size_t errlen)
{
    struct proc_maps maps;
    size_t over = 0;
    int e = proc_maps_read(pid, &maps);
    if (e) {
        snprintf(err, errlen, "read /proc/%d/maps: %s", (int)pid, strerror(-e));
        return e;
    }
    uint64_t sig = signature_of(&maps);
    struct mapping_ref *refs = calloc(HP_MAX_UNWIND_MAPPINGS, sizeof(*refs));
    struct hp_unwind_proc *bp = calloc(1, sizeof(*bp));
    struct unwind_process *np = calloc(1, sizeof(*np));
    if (!refs || !bp || !np)
        e = -ENOMEM;
    else if (unchanged(m, pid, sig))
        goto out;
    size_t n = e ? 0 : read_mappings(m, pid, &maps, refs, &over);
    n = get_files(m, refs, n);
    if (e == 0) {
        *np = (struct unwind_process){.pid = pid, .signature = sig};
        pthread_mutex_lock(&m->lock);
        e = give_mappings(m, pid, refs, n, np, bp);
        if (e == -ENOSPC) /* np never went in: its references go */
            for (size_t i = 0; i < n; i++)
                put_file(m, refs[i].file);
        else
            np = NULL;
        pthread_mutex_unlock(&m->lock);
    }
    if (e)
        snprintf(err, errlen, "give pid %d its unwind tables: %s", (int)pid, strerror(-e));
    else if (over) {
        snprintf(err, errlen, "%zu executable mappings, tables for the first %d only: the rest "
                 "are walked by frame pointers", n + over, HP_MAX_UNWIND_MAPPINGS);
        e = -E2BIG;
    }
    if (e && e != -ESRCH) {
        pthread_mutex_lock(&m->lock);
        m->stats.update_errors++;
        pthread_mutex_unlock(&m->lock);
    }
out:
    free(np);
    free(bp);
    free(refs);
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
