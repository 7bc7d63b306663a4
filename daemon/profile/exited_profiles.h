/*
 * exited_profiles.h - the last profile of each process that exited while
 * profiled, kept for a while so that a scrape that comes just after the
 * exit (or a person who asks why a process grew before it died) still gets
 * it; and of each process let go because nothing held it any more
 * (--idle-detach), which the next request for it gets. Entries are kept
 * EXITED_KEEP_SECONDS, at most EXITED_MAX of them (the oldest go first);
 * each holds the encoded forms, tens of KiB, and the profile itself, from
 * which the top table and collapsed stacks are made on request (a few
 * times the size of its encoding).
 *
 * Thread-safe: one lock.
 */
#ifndef HEAPPROF_EXITED_PROFILES_H
#define HEAPPROF_EXITED_PROFILES_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "pprof.h"
#include "process_match.h"

/* How long an exited process's last profile stays readable. */
#define EXITED_KEEP_SECONDS 600
/* Exited processes remembered at once. */
#define EXITED_MAX 64

/* Which encoding of a kept profile. */
enum exited_form {
    EXITED_HEAP_PROTO = 0, /* gzipped profile.proto, default inuse_space */
    EXITED_ALLOCS_PROTO,   /* the same, default alloc_space */
    EXITED_TEXT,           /* Go's debug=1 text */
    EXITED_FORMS,
};

struct exited_profiles {
    pthread_mutex_t lock;
    struct exited_entry {
        pid_t pid;
        struct process_facts facts; /* what it was: a selector picks it by these */
        time_t exited_at; /* CLOCK_MONOTONIC seconds */
        struct pprof_buf forms[EXITED_FORMS];
        struct pprof_profile *profile; /* owned */
    } v[EXITED_MAX];
    size_t next; /* the slot to reuse when all are taken */
};

void exited_profiles_init(struct exited_profiles *x);
void exited_profiles_destroy(struct exited_profiles *x);

/* Keeps the last profile of `pid`, which was `facts` (copied), encoded
 * now; takes `p` on success (else it stays the caller's). */
int exited_profiles_put(struct exited_profiles *x, pid_t pid, const struct process_facts *facts,
                        struct pprof_profile *p);

/* Whether a profile of process `pid` started at `start_time` is kept. */
bool exited_profiles_has(struct exited_profiles *x, pid_t pid, uint64_t start_time);

/* The start time of the process whose profile is kept as `pid`'s; 0 if none. */
uint64_t exited_profiles_start_time(struct exited_profiles *x, pid_t pid);

/* A copy of the kept profile of `pid` in form `form`; -ENOENT if none or expired. */
int exited_profiles_get(struct exited_profiles *x, pid_t pid, enum exited_form form,
                        struct pprof_buf *out);

/* Writes the kept profile of `pid` to `out` with `write` (under the lock, so
 * the profile cannot go meanwhile): its result, or -ENOENT if none or expired. */
int exited_profiles_write(struct exited_profiles *x, pid_t pid,
                          int (*write)(const struct pprof_profile *p, void *arg,
                                       struct pprof_buf *out),
                          void *arg, struct pprof_buf *out);

/* Calls `visit` on each kept profile (under the lock, so none can go
 * meanwhile) until it returns non-zero; returns that, or 0. */
int exited_profiles_each(struct exited_profiles *x,
                         int (*visit)(pid_t pid, const struct process_facts *facts,
                                      const struct pprof_profile *p, time_t exited_at, void *arg),
                         void *arg);

#endif
