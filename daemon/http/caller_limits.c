/*
 * caller_limits.c - requests in progress per untrusted uid (see
 * caller_limits.h). A request is counted while its handler runs, which is
 * when a delta window sleeps; the lock is held only to count.
 */
#include "caller_limits.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

void caller_limits_init(struct caller_limits *l)
{
    memset(l, 0, sizeof(*l));
    pthread_mutex_init(&l->lock, NULL);
}

void caller_limits_destroy(struct caller_limits *l)
{
    pthread_mutex_destroy(&l->lock);
}

/* The row of `uid`, or a free one (n 0) if it has none; NULL if none is
 * free (cannot happen: there are fewer requests than rows). Under lock. */
static struct caller_count *row_of(struct caller_limits *l, uid_t uid)
{
    struct caller_count *free_row = NULL;
    for (size_t i = 0; i < HTTP_MAX_CONNECTIONS; i++) {
        struct caller_count *c = &l->by_uid[i];
        if (c->n && c->uid == uid)
            return c;
        if (!c->n && !free_row)
            free_row = c;
    }
    return free_row;
}

int caller_limits_enter(struct caller_limits *l, uid_t uid, char *why, size_t whylen)
{
    int e = 0;
    pthread_mutex_lock(&l->lock);
    struct caller_count *c = row_of(l, uid);
    if (!c || l->total >= HTTP_MAX_CONNECTIONS - CALLER_RESERVED_REQUESTS)
        e = -EAGAIN;
    else if (c->n >= CALLER_MAX_REQUESTS_PER_UID)
        e = -EUSERS;
    if (e == 0) {
        c->uid = uid;
        c->n++;
        l->total++;
    }
    pthread_mutex_unlock(&l->lock);
    if (e == -EUSERS)
        snprintf(why, whylen,
                 "uid %u has %d requests in progress, the most one user may have "
                 "at once: wait for one to end",
                 (unsigned)uid, CALLER_MAX_REQUESTS_PER_UID);
    else if (e)
        snprintf(why, whylen,
                 "uid %u: the connections untrusted callers may hold are all in "
                 "use: try again soon",
                 (unsigned)uid);
    return e;
}

void caller_limits_leave(struct caller_limits *l, uid_t uid)
{
    pthread_mutex_lock(&l->lock);
    struct caller_count *c = row_of(l, uid);
    if (c && c->n && c->uid == uid) {
        c->n--;
        l->total--;
    }
    pthread_mutex_unlock(&l->lock);
}
