/*
 * inject.h - the in-process sampler put into, and taken out of, a running
 * process: every thread stopped, the sampler mapped from a memfd near the
 * allocator, configured, each allocator entry patched into a jump to its
 * wrapper, the threads released. Detach restores the original bytes and
 * leaves the sampler mapped (a thread may still be returning through it).
 *
 * Safety comes first: a process is patched only when every prologue can be
 * relocated with certainty and its bytes in memory are those of its file;
 * otherwise nothing is written and the caller falls back to uprobes with
 * the reason. A process already traced, or under seccomp, is not touched.
 *
 * Ownership: a struct inject_state owns nothing; it is plain data.
 */
#ifndef HEAPPROF_INJECT_H
#define HEAPPROF_INJECT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "hp_limits.h"
#include "relocate.h"

/* One allocator function to patch. */
struct inject_func {
    const char *name;    /* "malloc": the sampler has hp_wrap_NAME for it */
    uint64_t addr;       /* its entry in the process */
    const uint8_t *code; /* its whole code, as its file holds it */
    size_t len;
};

/* One patched entry. */
struct inject_patch {
    uint64_t addr;
    uint8_t orig[RELOCATE_MAX_DISPLACED];   /* the original bytes */
    uint8_t jump[RELOCATE_PATCH_LEN];       /* what the entry holds while patched */
};

/* A process with the sampler in it. */
struct inject_state {
    pid_t pid;
    uint64_t base;          /* where the sampler object is mapped */
    char text_path[96];     /* /proc/PID/map_files/... of its code: for uprobes */
    uint64_t report_alloc;  /* file offsets of the report functions */
    uint64_t report_free;
    size_t n;
    struct inject_patch p[HP_MAX_FUNCS];
    uint64_t stopped_ns;    /* how long the threads were stopped, last time */
};

/* Called while every thread is stopped, the sampler mapped and configured
 * but no entry patched yet: the moment to attach the report probes, so that
 * no sample is missed. A non-zero return abandons the patching. */
typedef int (*inject_ready_fn)(void *arg, const struct inject_state *s, char *err, size_t errlen);

/*
 * Puts the sampler into process `pid` with sampling interval `interval`
 * and patches the `n` functions. Returns 0, or -errno with the reason in
 * `err`: -EBUSY (already traced), -EPERM (seccomp), -EINVAL (a prologue
 * that cannot be relocated with certainty), -ESRCH (gone), ... On failure
 * the process is left as it was (but for a sampler mapping, unused).
 */
int inject_attach(pid_t pid, const struct inject_func *f, size_t n, uint64_t interval,
                  inject_ready_fn ready, void *arg, struct inject_state *out, char *err,
                  size_t errlen);

/* Restores the original bytes of every patched entry; 0 or -errno (a
 * process that is gone is not an error: nothing is left to restore). */
int inject_detach(struct inject_state *s, char *err, size_t errlen);

/* Whether process `pid` has a sampler mapped (a previous daemon's); its
 * base in `*base`. */
int inject_find_sampler(pid_t pid, uint64_t *base);

#endif
