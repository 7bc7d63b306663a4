/*
 * symbol_cache.c - a small LRU of open ELF files shared across requests
 * (see symbol_cache.h).
 */
#include "symbol_cache.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void symbol_cache_init(struct symbol_cache *c)
{
    memset(c, 0, sizeof(*c));
    pthread_mutex_init(&c->lock, NULL);
}

void symbol_cache_destroy(struct symbol_cache *c)
{
    for (size_t i = 0; i < SYMBOL_CACHE_ENTRIES; i++) {
        if (c->entries[i]) {
            elf_file_close(c->entries[i]->ef);
            free(c->entries[i]);
        }
    }
    pthread_mutex_destroy(&c->lock);
}

/* Opens the file of mapping `m`: through map_files first, then the path
 * inside the process's root. */
static int open_mapping_file(pid_t pid, const struct proc_mapping *m, struct elf_file **ef)
{
    char path[4200];
    snprintf(path, sizeof(path), "/proc/%d/map_files/%llx-%llx", (int)pid,
             (unsigned long long)m->start, (unsigned long long)m->end);
    if (elf_file_open(path, ef) == 0)
        return 0;
    snprintf(path, sizeof(path), "/proc/%d/root%s", (int)pid, m->path);
    return elf_file_open(path, ef);
}

/* A slot for a new entry: an empty one, else the least recently used idle
 * one (closed here); -1 if every entry is in use. */
static int free_slot(struct symbol_cache *c)
{
    int victim = -1;
    for (int i = 0; i < SYMBOL_CACHE_ENTRIES; i++) {
        struct cached_elf *e = c->entries[i];
        if (!e)
            return i;
        if (e->refs == 0 && (victim < 0 || e->last_used < c->entries[victim]->last_used))
            victim = i;
    }
    if (victim >= 0) {
        elf_file_close(c->entries[victim]->ef);
        free(c->entries[victim]);
        c->entries[victim] = NULL;
    }
    return victim;
}

int symbol_cache_get(struct symbol_cache *c, pid_t pid, const struct proc_mapping *m,
                     struct cached_elf **out)
{
    if (!proc_mapping_is_file(m))
        return -ENOENT;
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < SYMBOL_CACHE_ENTRIES; i++) {
        struct cached_elf *e = c->entries[i];
        if (e && e->inode == m->inode && e->dev_major == m->dev_major &&
            e->dev_minor == m->dev_minor) {
            e->refs++;
            e->last_used = ++c->clock;
            c->hits++;
            pthread_mutex_unlock(&c->lock);
            *out = e;
            return 0;
        }
    }
    c->misses++;
    pthread_mutex_unlock(&c->lock);

    /* Open outside the lock: reading a large file must not stall other requests. */
    struct cached_elf *e = calloc(1, sizeof(*e));
    if (!e)
        return -ENOMEM;
    int err = open_mapping_file(pid, m, &e->ef);
    if (err) {
        free(e);
        return err;
    }
    e->dev_major = m->dev_major;
    e->dev_minor = m->dev_minor;
    e->inode = m->inode;
    if (elf_file_build_id(e->ef, e->build_id, sizeof(e->build_id)) != 0)
        e->build_id[0] = '\0';
    e->refs = 1;

    pthread_mutex_lock(&c->lock);
    e->last_used = ++c->clock;
    int slot = free_slot(c);
    if (slot >= 0)
        c->entries[slot] = e;
    else
        e->refs |= 0x80000000u; /* cache full of busy entries: freed on put */
    pthread_mutex_unlock(&c->lock);
    *out = e;
    return 0;
}

void symbol_cache_put(struct symbol_cache *c, struct cached_elf *e)
{
    pthread_mutex_lock(&c->lock);
    e->refs--;
    int orphan = e->refs == 0x80000000u;
    pthread_mutex_unlock(&c->lock);
    if (orphan) {
        elf_file_close(e->ef);
        free(e);
    }
}
