/*
 * inject.h - the in-process sampler put into, and taken out of, a running
 * process: one thread stopped, the sampler mapped from a sealed memfd (or
 * an earlier daemon's sampler of this very build adopted), configured, and
 * its installer called in that thread to point the relocation slots bound
 * to the allocator at its wrappers; the thread let go. Detach has the
 * installer point the slots back and leaves the sampler mapped and
 * disabled (a thread may still be returning through it, and a pointer to a
 * wrapper copied meanwhile keeps working: it only forwards).
 *
 * No byte of any module's code is written. Apart from the slots and the
 * sampler's own memory, the only bytes written are the system call stub
 * of remote_stub.h, in the unused tail of a code page, for the length of
 * one attach or detach.
 *
 * Ownership: a struct inject_state owns its memfd; close it with
 * inject_state_close().
 */
#ifndef HEAPPROF_INJECT_H
#define HEAPPROF_INJECT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hp_limits.h"
#include "hp_sampler.h"
#include "sampler_file.h"

/* What the sampler is told of the process. */
struct inject_plan {
    uint64_t orig[HP_ENTRY_COUNT]; /* where each entry's calls bind; 0: not taken */
    uint64_t range_lo[HP_MAX_FUNCS], range_hi[HP_MAX_FUNCS]; /* the allocator's code */
    size_t nranges;
    uint64_t dl_iterate_phdr; /* the loader's, which the installer walks modules with */
    uint64_t r_debug;         /* the base namespace's list of modules */
    const struct sampler_file *shared; /* the file every target maps; NULL: memfds only */
    int fork_child;           /* forked by a process live on the sampler: it runs its
                               * parent's copy, configured and installed, which is taken over
                               * without a stop when it is whole */
    uint32_t free_ring;       /* 1: frees of sampled pointers go through the ring
                               * (free_ring.h), which the daemon drains */
};

/* A process with the sampler in it. */
struct inject_state {
    pid_t pid;
    uint64_t start_time;    /* the process's, to tell a reused pid at detach */
    uint64_t base;          /* where the sampler object is mapped */
    const struct sampler_file *file; /* the shared file of the daemon, or NULL */
    int shared;             /* mapped from that file: its report probes cover it */
    int memfd;              /* else ours: the file mapped there (a sealed memfd, or another
                             * daemon's file of this build), or -1 */
    char text_path[40];     /* /proc/self/fd/N of it: where its report uprobes go */
    int stopped;            /* whether a thread was stopped (a fork child taken over is not) */
    uint64_t report_alloc;  /* file offsets of the report functions */
    uint64_t report_free;
    uint64_t report_alloc_opt; /* the report function that starts with a 5-byte nop */
    uint64_t stopped_ns;    /* how long the thread was stopped, last time */
    struct hp_install_status status; /* the installer's last report */
};

/* Called once the thread is stopped and before anything is written: the
 * check that the stopped process is still the one the caller approved
 * (its start time, exe, owner). A non-zero return abandons the attach. */
typedef int (*inject_check_fn)(void *arg, pid_t pid, char *err, size_t errlen);
/* Called once the sampler is mapped and configured, before any slot
 * points at it: the moment to attach the report probes, so that no sample
 * is missed. A non-zero return abandons the attach. */
typedef int (*inject_ready_fn)(void *arg, const struct inject_state *s, char *err, size_t errlen);

/*
 * Puts the sampler into process `pid` (started at `start_time`) with
 * sampling interval `interval`. Returns 0, or -errno with the reason in
 * `err` (the caller falls back to uprobes): -EBUSY (every thread traced or
 * under seccomp), -EAGAIN (no thread can be stopped unseen now), -ENOENT
 * (no slot binds to the allocator: a static executable, an allocator
 * linked in), -EEXIST (a sampler of another build is there), -EPERM (a
 * descriptor swapped under us, a shadow stack), -ESRCH (gone), ... On
 * failure no slot points at the sampler, or, where its installer could not
 * be waited for, the sampler is disabled and its wrappers only forward.
 */
int inject_attach(pid_t pid, uint64_t start_time, const struct inject_plan *plan,
                  uint64_t interval, inject_check_fn check, inject_ready_fn ready, void *arg,
                  struct inject_state *out, char *err, size_t errlen);

/* Points every slot back and disables the sampler; 0 or -errno (a process
 * that is gone or exec'd is not an error: nothing is left to restore).
 * Where no thread can be stopped, the sampler is only disabled. */
int inject_detach(struct inject_state *s, char *err, size_t errlen);

/* Closes what the state owns. */
void inject_state_close(struct inject_state *s);

/* Whether process `pid` has a sampler mapped (a previous daemon's, or
 * from `shared`, which may be NULL); its base in `*base`. */
int inject_find_sampler(pid_t pid, const struct sampler_file *shared, uint64_t *base);

#endif
