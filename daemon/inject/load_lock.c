/*
 * load_lock.c - finds glibc's `_dl_load_lock` in a process (see
 * load_lock.h): the interpreter from the auxiliary vector (AT_BASE), its
 * `_rtld_global` from its file's dynamic symbols, and the lock by its
 * shape in the process's copy of that object.
 *
 * Why by shape: the lock's offset in `struct rtld_global` changes with
 * glibc's version and build options, and distributions strip the types
 * that would say it. The count of namespaces followed by two recursive
 * mutexes occurs once in the object; its offset is checked against this
 * process's own glibc, where dl_iterate_phdr holds the second of them, by
 * tests/unit/test_load_lock.c.
 */
#include "load_lock.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "elf_file.h"
#include "proc_info.h"
#include "proc_maps.h"

/* glibc's pthread_mutex_t on x86-64: 40 bytes, its __kind at 16; the
 * kind of the rtld locks (PTHREAD_MUTEX_RECURSIVE_NP) in its low 7 bits. */
#define MUTEX_SIZE 40
#define MUTEX_KIND_AT 16
#define KIND_RECURSIVE 1
#define KIND_TYPE_MASK 0x7f
/* DL_NNS: the most namespaces glibc has. */
#define MAX_NAMESPACES 16

static int recursive_mutex_at(const uint8_t *buf, size_t at)
{
    int32_t kind;
    memcpy(&kind, buf + at + MUTEX_KIND_AT, sizeof(kind));
    return (kind & KIND_TYPE_MASK) == KIND_RECURSIVE;
}

long load_lock_scan(const uint8_t *buf, size_t len)
{
    long found = -ENOENT;
    for (size_t o = 0; o + 8 + 2 * MUTEX_SIZE <= len; o += 8) {
        uint64_t nns;
        memcpy(&nns, buf + o, sizeof(nns));
        if (nns < 1 || nns > MAX_NAMESPACES || !recursive_mutex_at(buf, o + 8) ||
            !recursive_mutex_at(buf, o + 8 + MUTEX_SIZE))
            continue;
        if (found >= 0)
            return -EEXIST;
        found = (long)(o + 8);
    }
    return found;
}

/* AT_PHDR, AT_PHNUM and AT_BASE of `pid`. */
static int read_auxv(pid_t pid, uint64_t *phdr, uint64_t *phnum, uint64_t *base)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/auxv", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    uint64_t v[2];
    *phdr = *phnum = *base = 0;
    while (read(fd, v, sizeof(v)) == (ssize_t)sizeof(v) && v[0] != AT_NULL) {
        if (v[0] == AT_PHDR)
            *phdr = v[1];
        else if (v[0] == AT_PHNUM)
            *phnum = v[1];
        else if (v[0] == AT_BASE)
            *base = v[1];
    }
    close(fd);
    return 0;
}

/* Where `_rtld_global` is in the process and how long, from the file
 * mapped at the interpreter's base. -ENOENT: no such symbol. */
static int find_rtld_global(pid_t pid, uint64_t base, uint64_t *at, uint64_t *size)
{
    struct proc_maps maps;
    int e = proc_maps_read(pid, &maps);
    if (e)
        return e;
    const struct proc_mapping *m = proc_maps_find(&maps, base);
    char path[96];
    struct elf_file *ef = NULL;
    struct elf_symbol sym;
    if (!m || m->offset != 0)
        e = -ENOENT;
    else if ((e = proc_map_file_path(pid, m->start, m->end, path, sizeof(path))) == 0 &&
             (e = elf_file_open(path, &ef)) == 0 &&
             (e = elf_file_find_dynamic_object(ef, "_rtld_global", &sym)) == 0) {
        *at = base + sym.vaddr;
        *size = sym.size;
    }
    if (ef)
        elf_file_close(ef);
    proc_maps_free(&maps);
    return e;
}

int load_lock_find(pid_t pid, struct load_lock_place *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    uint64_t base = 0, at = 0, size = 0;
    int e = read_auxv(pid, &out->exe_phdr, &out->exe_phnum, &base);
    if (e) {
        snprintf(err, errlen, "read /proc/%d/auxv: %s", (int)pid, strerror(-e));
        return e;
    }
    if (!base || find_rtld_global(pid, base, &at, &size) != 0)
        return 0; /* no interpreter, or not glibc's: no lock to find */
    uint8_t buf[LOAD_LOCK_SCAN_MAX];
    size_t len = size && size < sizeof(buf) ? size : sizeof(buf);
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t got = fd >= 0 ? pread(fd, buf, len, (off_t)at) : -1;
    e = fd < 0 || got < 0 ? -errno : 0;
    if (fd >= 0)
        close(fd);
    long off = e ? e : load_lock_scan(buf, got > 0 ? (size_t)got : 0);
    if (off < 0) {
        snprintf(err, errlen,
                 "process %d: the dynamic linker's load lock was not found in "
                 "_rtld_global (%s): its modules cannot be walked without a lock that may "
                 "be held for ever",
                 (int)pid,
                 off == -EEXIST ? "more than one place looks like it" : strerror((int)-off));
        return (int)off;
    }
    out->lock = at + (uint64_t)off;
    return 0;
}
