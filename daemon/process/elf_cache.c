/*
 * elf_cache.c - ELF files read once and shared (see elf_cache.h): a small
 * table under one lock, the least recently used file nobody uses let go
 * first once it is full. A file read while the table is full of files in
 * use is its caller's alone, closed at its put.
 */
#include "elf_cache.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* Files kept: the libraries most processes map (libc, the loader, libstdc++,
 * a few allocators and executables) with room to spare. */
#define ELF_CACHE_SIZE 32

struct cached_elf {
    struct elf_file *ef;  /* NULL: a free entry */
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
    unsigned users;       /* elf_cache_open()s not yet put */
    uint64_t last_used;
};

static struct cached_elf table[ELF_CACHE_SIZE];
static uint64_t clock_tick;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static bool same_file(const struct cached_elf *c, const struct stat *sb)
{
    return c->ef && c->dev == sb->st_dev && c->ino == sb->st_ino &&
           c->size == sb->st_size && c->mtime.tv_sec == sb->st_mtim.tv_sec &&
           c->mtime.tv_nsec == sb->st_mtim.tv_nsec;
}

/* Under the lock: a free entry, letting go of the least recently used
 * file nobody uses; NULL if every file is in use. */
static struct cached_elf *free_entry(void)
{
    struct cached_elf *oldest = NULL;
    for (size_t i = 0; i < ELF_CACHE_SIZE; i++) {
        struct cached_elf *c = &table[i];
        if (!c->ef)
            return c;
        if (c->users == 0 && (!oldest || c->last_used < oldest->last_used))
            oldest = c;
    }
    if (oldest) {
        elf_file_close(oldest->ef);
        *oldest = (struct cached_elf){0};
    }
    return oldest;
}

int elf_cache_open(const char *path, struct elf_file **out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0)
        return -errno;
    if (fstat(fd, &sb) != 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < ELF_CACHE_SIZE; i++)
        if (same_file(&table[i], &sb)) {
            table[i].users++;
            table[i].last_used = ++clock_tick;
            *out = table[i].ef;
            pthread_mutex_unlock(&lock);
            close(fd);
            return 0;
        }
    pthread_mutex_unlock(&lock);
    /* Read outside the lock: two threads may both read a new file; the
     * second one's copy is then used by it alone and closed at its put. */
    struct elf_file *ef;
    int e = elf_file_open_fd(fd, &ef);
    if (e)
        return e;
    pthread_mutex_lock(&lock);
    struct cached_elf *c = free_entry();
    if (c)
        *c = (struct cached_elf){.ef = ef, .dev = sb.st_dev, .ino = sb.st_ino,
                                 .size = sb.st_size, .mtime = sb.st_mtim, .users = 1,
                                 .last_used = ++clock_tick};
    pthread_mutex_unlock(&lock);
    *out = ef;
    return 0;
}

void elf_cache_put(struct elf_file *ef)
{
    if (!ef)
        return;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < ELF_CACHE_SIZE; i++)
        if (table[i].ef == ef) {
            table[i].users--;
            pthread_mutex_unlock(&lock);
            return;
        }
    pthread_mutex_unlock(&lock);
    elf_file_close(ef); /* not in the table: the caller's own */
}
