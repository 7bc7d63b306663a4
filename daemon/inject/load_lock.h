/*
 * load_lock.h - where a process's dynamic linker keeps its load lock
 * (glibc's `_dl_load_lock`), for the sampler's installer, which walks the
 * list of modules under it with a bounded wait (sampler/loader_lock.c),
 * and where the kernel put the executable's program headers.
 */
#ifndef HEAPPROF_LOAD_LOCK_H
#define HEAPPROF_LOAD_LOCK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* How much of `_rtld_global` is read to find the lock: the namespaces
 * (16 of at most a few hundred bytes each) come first, then the lock;
 * glibc 2.31 to 2.36 put it at 2312 to about 2600 bytes. */
#define LOAD_LOCK_SCAN_MAX 16384

/* What the installer is told. */
struct load_lock_place {
    uint64_t lock;     /* the address of _dl_load_lock; 0: not glibc */
    uint64_t exe_phdr; /* AT_PHDR and AT_PHNUM of the process */
    uint64_t exe_phnum;
};

/*
 * The offset of `_dl_load_lock` in the `len` bytes of `_rtld_global` at
 * `buf`: the one place where the count of namespaces (1 to 16) is
 * followed by two recursive pthread mutexes, the load lock and the
 * list's write lock (glibc's struct rtld_global, unchanged from 2.x to
 * 2.40). -ENOENT if there is none, -EEXIST if there are several.
 */
long load_lock_scan(const uint8_t *buf, size_t len);

/*
 * Fills `out` for process `pid`: its auxiliary vector, and the load lock
 * of its interpreter when that defines `_rtld_global`. Returns 0 (the
 * lock 0 when the interpreter is not glibc's: the installer then walks
 * through dl_iterate_phdr), or -errno with the reason in `err` when the
 * process has glibc's but its lock was not found (the in-process sampler
 * is then not used).
 */
int load_lock_find(pid_t pid, struct load_lock_place *out, char *err, size_t errlen);

#endif
