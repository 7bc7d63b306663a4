/*
 * snapshots.h - profiles kept as bases for diffs: the web page's "mark as
 * base" and POST /debug/pprof/snapshot keep the current profile of a
 * process here, named by an id that a later request passes as base=.
 *
 * Bounded in number (SNAPSHOT_MAX) and in memory (SNAPSHOT_MAX_BYTES of
 * encoded profiles): a new snapshot pushes out the oldest. Each is the
 * uncompressed profile.proto of one process, with the pid and start time
 * it was taken of, so that a base is never applied to another process.
 * Ids are random (64 bits, hex): a caller cannot guess another's.
 *
 * Thread-safe: one lock; HTTP requests put and get concurrently.
 */
#ifndef HEAPPROF_SNAPSHOTS_H
#define HEAPPROF_SNAPSHOTS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pprof.h"

/* Snapshots kept at once: a few bases per person looking, for a few people. */
#define SNAPSHOT_MAX 32
/* Encoded bytes of all snapshots: heap profiles are tens to hundreds of
 * KiB; 64 MiB holds SNAPSHOT_MAX of the largest we have seen (redis with
 * symbols, ~300 KiB) many times over and bounds the daemon's growth. */
#define SNAPSHOT_MAX_BYTES (64u << 20)
/* The characters of an id: 16 hex digits. */
#define SNAPSHOT_ID_LEN 16

struct snapshots {
    pthread_mutex_t lock;
    struct snapshot {
        char id[SNAPSHOT_ID_LEN + 1]; /* "" : a free slot */
        pid_t pid;
        uint64_t start_time;    /* the process's (proc_start_time) */
        int64_t time_ms;        /* when taken, ms since the epoch */
        uint64_t seq;           /* order of taking: the lowest goes first */
        struct pprof_buf proto; /* uncompressed profile.proto, owned */
    } v[SNAPSHOT_MAX];
    uint64_t seq; /* (lock) */
    size_t bytes; /* encoded bytes of all (lock) */
};

void snapshots_init(struct snapshots *s);
void snapshots_destroy(struct snapshots *s);

/* Keeps `p`, the profile of `pid` started at `start_time`, encoded (it
 * stays the caller's); its id into `id`. 0, -ENOMEM, or -EFBIG if it
 * alone is over SNAPSHOT_MAX_BYTES. */
int snapshots_put(struct snapshots *s, pid_t pid, uint64_t start_time,
                  const struct pprof_profile *p, char id[SNAPSHOT_ID_LEN + 1]);

/* A copy of snapshot `id`'s profile.proto into `out`, with whose it is:
 * 0, -ENOENT (no such id: never taken, or pushed out), -ENOMEM. */
int snapshots_get(struct snapshots *s, const char *id, pid_t *pid, uint64_t *start_time,
                  int64_t *time_ms, struct pprof_buf *out);

#endif
