/*
 * caller_limits.h - how many requests each untrusted caller (by peer uid)
 * may have in progress at once, and all of them together, so that one
 * user's delta windows cannot hold every connection of the
 * thread-per-connection server: /healthz, /metrics and trusted callers
 * always find one (docs/security.md, "Per-uid bounds").
 */
#ifndef HEAPPROF_CALLER_LIMITS_H
#define HEAPPROF_CALLER_LIMITS_H

#include <pthread.h>
#include <stddef.h>
#include <sys/types.h>

#include "http_server.h"

/* Requests one untrusted uid may have in progress: a scraper needs one per
 * process it scrapes at a time, and a delta window holds its request. */
#define CALLER_MAX_REQUESTS_PER_UID 4
/* Connections kept for trusted callers and the requests that are never
 * limited (/healthz, /metrics): untrusted requests together take at most
 * HTTP_MAX_CONNECTIONS less these. */
#define CALLER_RESERVED_REQUESTS 16

/* One uid with requests in progress. */
struct caller_count {
    uid_t uid;
    unsigned n;
};

/* The requests in progress of untrusted callers; one per server. */
struct caller_limits {
    pthread_mutex_t lock;
    unsigned total;                                   /* under lock */
    struct caller_count by_uid[HTTP_MAX_CONNECTIONS]; /* under lock; n 0: free */
};

void caller_limits_init(struct caller_limits *l);
void caller_limits_destroy(struct caller_limits *l);

/*
 * Counts a request of `uid` as begun: 0, or -EUSERS if `uid` has
 * CALLER_MAX_REQUESTS_PER_UID in progress already, -EAGAIN if untrusted
 * callers together hold all they may, with the reason in `why`. Each 0 is
 * paired with a caller_limits_leave().
 */
int caller_limits_enter(struct caller_limits *l, uid_t uid, char *why, size_t whylen);

/* Counts a request of `uid` as done. */
void caller_limits_leave(struct caller_limits *l, uid_t uid);

#endif
