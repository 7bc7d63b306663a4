/*
 * snapshots.c - the profiles kept as diff bases (see snapshots.h).
 */
#include "snapshots.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <sys/random.h>

void snapshots_init(struct snapshots *s)
{
    memset(s, 0, sizeof(*s));
    pthread_mutex_init(&s->lock, NULL);
}

/* Empties slot `x`. Lock held. */
static void drop(struct snapshots *s, struct snapshot *x)
{
    s->bytes -= x->proto.len;
    pprof_buf_free(&x->proto);
    memset(x, 0, sizeof(*x));
}

void snapshots_destroy(struct snapshots *s)
{
    for (size_t i = 0; i < SNAPSHOT_MAX; i++)
        drop(s, &s->v[i]);
    pthread_mutex_destroy(&s->lock);
}

/* The oldest snapshot kept, or NULL if none. Lock held. */
static struct snapshot *oldest(struct snapshots *s)
{
    struct snapshot *o = NULL;
    for (size_t i = 0; i < SNAPSHOT_MAX; i++)
        if (s->v[i].id[0] && (!o || s->v[i].seq < o->seq))
            o = &s->v[i];
    return o;
}

/* A free slot, pushing out the oldest until one is free and `len` more
 * bytes fit. Lock held. */
static struct snapshot *make_room(struct snapshots *s, size_t len)
{
    for (;;) {
        struct snapshot *free_slot = NULL;
        for (size_t i = 0; i < SNAPSHOT_MAX && !free_slot; i++)
            if (!s->v[i].id[0])
                free_slot = &s->v[i];
        if (free_slot && s->bytes + len <= SNAPSHOT_MAX_BYTES)
            return free_slot;
        drop(s, oldest(s)); /* there is one: else the slot was free and len fit */
    }
}

int snapshots_put(struct snapshots *s, pid_t pid, uint64_t start_time,
                  const struct pprof_profile *p, char id[SNAPSHOT_ID_LEN + 1])
{
    struct pprof_buf proto = {0};
    uint64_t r;
    int e = pprof_encode(p, &proto); /* outside the lock: it takes a while */
    if (e == 0 && proto.len > SNAPSHOT_MAX_BYTES)
        e = -EFBIG;
    if (e == 0 && getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
        e = -errno;
    if (e) {
        pprof_buf_free(&proto);
        return e;
    }
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    snprintf(id, SNAPSHOT_ID_LEN + 1, "%016llx", (unsigned long long)r);
    pthread_mutex_lock(&s->lock);
    struct snapshot *x = make_room(s, proto.len);
    snprintf(x->id, sizeof(x->id), "%s", id);
    x->pid = pid;
    x->start_time = start_time;
    x->time_ms = (int64_t)wall.tv_sec * 1000 + wall.tv_nsec / 1000000;
    x->seq = ++s->seq;
    x->proto = proto;
    s->bytes += proto.len;
    pthread_mutex_unlock(&s->lock);
    return 0;
}

int snapshots_get(struct snapshots *s, const char *id, pid_t *pid, uint64_t *start_time,
                  int64_t *time_ms, struct pprof_buf *out)
{
    int e = -ENOENT;
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < SNAPSHOT_MAX && e == -ENOENT; i++) {
        struct snapshot *x = &s->v[i];
        if (!x->id[0] || strcmp(x->id, id) != 0)
            continue;
        *pid = x->pid;
        *start_time = x->start_time;
        *time_ms = x->time_ms;
        e = pprof_buf_append(out, x->proto.data ? x->proto.data : (const uint8_t *)"",
                             x->proto.len);
    }
    pthread_mutex_unlock(&s->lock);
    return e;
}
