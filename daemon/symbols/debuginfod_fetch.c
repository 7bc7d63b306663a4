/*
 * debuginfod_fetch.c - the queue of build IDs and the thread that fetches
 * their debug files with libdebuginfod (see debuginfod_fetch.h).
 *
 * Why a thread of ours around the library rather than calling it where a
 * debug file is looked for: debuginfod_find_debuginfo() blocks for as long
 * as the servers take (connecting, then the whole transfer), and libdwfl
 * asks for a debug file in the middle of naming a frame, under the symbol
 * cache's lock of that file, inside an HTTP request. The library is used
 * for what it does well (the protocol, several servers in parallel, its
 * cache on disk with its own cleaning); the waiting is moved here.
 *
 * The table of build IDs is a plain array searched linearly: it holds at
 * most DEBUGINFOD_FETCH_IDS entries, and it is searched once per file
 * still waiting for its debug file per scrape, next to a network fetch or
 * the opening of an ELF file.
 */
#include "debuginfod_fetch.h"

#include <errno.h>
#include <fcntl.h>
#include <libelf.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <elfutils/debuginfod.h>
#include <elfutils/libdwelf.h>

#include "build_id.h"
#include "clock.h"

/* Where a build ID stands. */
enum id_state {
    ID_FREE,     /* an unused slot */
    ID_QUEUED,   /* waiting for the thread */
    ID_FETCHING, /* the thread is fetching it */
    ID_ARRIVED,  /* its file is in the cache: `path` */
    ID_NOTFOUND, /* no server had it; asked again at retry_ns */
    ID_FAILED,   /* the last fetch failed; retried at retry_ns (INT64_MAX: given up) */
};

/* One build ID and its outcome. */
struct fetch_id {
    unsigned char id[BUILD_ID_MAX_BYTES];
    size_t len;
    enum id_state state;
    unsigned failures; /* fetches of it that failed */
    uint64_t seq;      /* ID_QUEUED: the order it was queued in */
    int64_t retry_ns;  /* ID_NOTFOUND, ID_FAILED: when it may be asked again */
    int64_t used_ns;   /* the last ask: the least recent settled one is forgotten first */
    char *path;        /* ID_ARRIVED: the file in libdebuginfod's cache, malloc'd */
};

struct debuginfod_fetch {
    pthread_mutex_t lock;
    pthread_cond_t wake; /* the thread waits on it for a build ID or the stop */
    pthread_t thread;
    uint64_t timeout_ns; /* the bound on one fetch; set before the thread starts */
    atomic_bool stop;    /* the thread and a fetch in flight end */
    struct fetch_id ids[DEBUGINFOD_FETCH_IDS]; /* under lock */
    size_t queued;                             /* ID_QUEUED entries; under lock */
    bool fetching;                             /* a fetch in flight; under lock */
    uint64_t next_seq;                         /* under lock */
    uint64_t fetches[DEBUGINFOD_NRESULTS];     /* under lock */
    uint64_t refused;                          /* under lock */
    int last_error;                            /* the last error logged; under lock */
};

/* What the progress callback of one fetch needs. */
struct fetch_run {
    struct debuginfod_fetch *f;
    int64_t deadline_ns;
    bool timed_out;
};

/* The clock of retries and deadlines, signed for the arithmetic. */
static int64_t now_ns(void)
{
    return (int64_t)monotonic_ns();
}

const char *debuginfod_result_name(enum debuginfod_result r)
{
    static const char *const names[DEBUGINFOD_NRESULTS] = {"ok", "notfound", "error"};
    return r < DEBUGINFOD_NRESULTS ? names[r] : "";
}

/* The entry of build ID `id`, or NULL; under the lock. */
static struct fetch_id *find_id(struct debuginfod_fetch *f, const unsigned char *id, size_t len)
{
    for (size_t i = 0; i < DEBUGINFOD_FETCH_IDS; i++) {
        struct fetch_id *e = &f->ids[i];
        if (e->state != ID_FREE && e->len == len && memcmp(e->id, id, len) == 0)
            return e;
    }
    return NULL;
}

/* Empties a slot; under the lock. */
static void forget(struct fetch_id *e)
{
    free(e->path);
    memset(e, 0, sizeof(*e));
}

/* A free slot: an unused one, else the least recently asked settled one
 * (never one queued or in flight). NULL if every slot is waiting, which
 * DEBUGINFOD_FETCH_IDS > DEBUGINFOD_FETCH_QUEUE + 1 rules out. Under the lock. */
static struct fetch_id *take_slot(struct debuginfod_fetch *f)
{
    struct fetch_id *oldest = NULL;
    for (size_t i = 0; i < DEBUGINFOD_FETCH_IDS; i++) {
        struct fetch_id *e = &f->ids[i];
        if (e->state == ID_FREE)
            return e;
        if (e->state != ID_QUEUED && e->state != ID_FETCHING &&
            (!oldest || e->used_ns < oldest->used_ns))
            oldest = e;
    }
    if (oldest)
        forget(oldest);
    return oldest;
}

/*
 * The ask behind debuginfod_fetch_open() and _arrived(): 0 with *entry if
 * the file has arrived; -EAGAIN if it is queued or in flight (queuing it
 * when new or due), or the queue is full; -ENOENT if none is to be had
 * now. Under the lock.
 */
static int ask(struct debuginfod_fetch *f, const unsigned char *id, size_t len,
               struct fetch_id **entry)
{
    if (len == 0 || len > BUILD_ID_MAX_BYTES)
        return -ENOENT;
    int64_t now = now_ns();
    struct fetch_id *e = find_id(f, id, len);
    if (e) {
        e->used_ns = now;
        if (e->state == ID_ARRIVED) {
            *entry = e;
            return 0;
        }
        if (e->state == ID_QUEUED || e->state == ID_FETCHING)
            return -EAGAIN;
        if (now < e->retry_ns)
            return -ENOENT;
    }
    if (f->queued >= DEBUGINFOD_FETCH_QUEUE) {
        f->refused++;
        return -EAGAIN; /* asked again at the next use of the file */
    }
    if (!e) {
        e = take_slot(f);
        if (!e) {
            f->refused++;
            return -EAGAIN;
        }
        memcpy(e->id, id, len);
        e->len = len;
        e->used_ns = now;
    }
    e->state = ID_QUEUED;
    e->seq = f->next_seq++;
    f->queued++;
    pthread_cond_signal(&f->wake);
    return -EAGAIN;
}

int debuginfod_fetch_open(struct debuginfod_fetch *f, const unsigned char *id, size_t len,
                          char **path)
{
    struct fetch_id *e;
    pthread_mutex_lock(&f->lock);
    int err = ask(f, id, len, &e);
    char *p = err == 0 ? strdup(e->path) : NULL;
    pthread_mutex_unlock(&f->lock);
    if (err)
        return err;
    if (!p)
        return -ENOMEM;
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        *path = p;
        return fd;
    }
    /* Gone from the cache (libdebuginfod's cleaning, or an operator): fetch it again. */
    free(p);
    pthread_mutex_lock(&f->lock);
    e = find_id(f, id, len);
    if (e && e->state == ID_ARRIVED)
        forget(e);
    err = ask(f, id, len, &e);
    pthread_mutex_unlock(&f->lock);
    return err == 0 ? -EAGAIN : err;
}

int debuginfod_fetch_arrived(struct debuginfod_fetch *f, const unsigned char *id, size_t len)
{
    struct fetch_id *e;
    pthread_mutex_lock(&f->lock);
    int err = ask(f, id, len, &e);
    pthread_mutex_unlock(&f->lock);
    return err == 0;
}

void debuginfod_fetch_stats(struct debuginfod_fetch *f, struct debuginfod_fetch_stats *out)
{
    pthread_mutex_lock(&f->lock);
    memcpy(out->fetches, f->fetches, sizeof(out->fetches));
    out->pending = f->queued + f->fetching;
    out->refused = f->refused;
    pthread_mutex_unlock(&f->lock);
}

/* libdebuginfod calls this about once a second during a fetch, data or
 * not: a nonzero return cuts the fetch short. */
static int progress(debuginfod_client *c, long done, long total)
{
    (void)done, (void)total;
    struct fetch_run *run = debuginfod_get_user_data(c);
    if (atomic_load(&run->f->stop))
        return 1;
    if (now_ns() > run->deadline_ns) {
        run->timed_out = true;
        return 1;
    }
    return 0;
}

/* Whether the open file `fd` has build ID `id`: a server's answer is
 * checked, not trusted, before any frame is named from it. */
static bool has_build_id(int fd, const unsigned char *id, size_t len)
{
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    const void *got = NULL;
    ssize_t n = elf ? dwelf_elf_gnu_build_id(elf, &got) : -1;
    bool same = n > 0 && (size_t)n == len && memcmp(got, id, len) == 0;
    elf_end(elf);
    return same;
}

/* The oldest queued entry, or NULL; under the lock. */
static struct fetch_id *next_queued(struct debuginfod_fetch *f)
{
    struct fetch_id *next = NULL;
    for (size_t i = 0; i < DEBUGINFOD_FETCH_IDS && f->queued; i++) {
        struct fetch_id *e = &f->ids[i];
        if (e->state == ID_QUEUED && (!next || e->seq < next->seq))
            next = e;
    }
    return next;
}

/* Fetches build ID `id` with `client`: the result, and *path on success. */
static enum debuginfod_result fetch_one(struct debuginfod_fetch *f, debuginfod_client *client,
                                        const unsigned char *id, size_t len, char **path,
                                        int *why)
{
    struct fetch_run run = {.f = f, .deadline_ns = now_ns() + (int64_t)f->timeout_ns};
    debuginfod_set_user_data(client, &run);
    int fd = debuginfod_find_debuginfo(client, id, (int)len, path);
    *why = fd < 0 ? -fd : 0;
    if (fd >= 0) {
        bool right = *path && has_build_id(fd, id, len);
        close(fd);
        if (right)
            return DEBUGINFOD_OK;
        *why = *path ? EBADMSG : ENOMEM;
    } else if (run.timed_out) {
        *why = ETIMEDOUT; /* libdebuginfod reports a cut fetch as not found */
    } else if (fd == -ENOENT) {
        return DEBUGINFOD_NOTFOUND;
    }
    free(*path);
    *path = NULL;
    return DEBUGINFOD_ERROR;
}

/* Records how the fetch of `e` ended; under the lock. */
static void settle(struct debuginfod_fetch *f, struct fetch_id *e, enum debuginfod_result r,
                   char *path, int why)
{
    int64_t now = now_ns();
    f->fetches[r]++;
    if (r == DEBUGINFOD_OK) {
        e->state = ID_ARRIVED;
        e->path = path;
        e->failures = 0;
        f->last_error = 0;
        return;
    }
    if (r == DEBUGINFOD_NOTFOUND) {
        e->state = ID_NOTFOUND;
        e->retry_ns = now + (int64_t)DEBUGINFOD_FETCH_NOTFOUND_SECONDS * 1000000000;
        return;
    }
    e->state = ID_FAILED;
    e->failures++;
    e->retry_ns = e->failures >= DEBUGINFOD_FETCH_ATTEMPTS
                      ? INT64_MAX
                      : now + ((int64_t)DEBUGINFOD_FETCH_RETRY_SECONDS << (e->failures - 1)) *
                                  1000000000;
    /* One line when the servers start failing, or fail in another way:
     * not one per build ID. */
    if (why != f->last_error) {
        char hex[BUILD_ID_HEX_SIZE];
        build_id_hex(e->id, e->len, hex);
        fprintf(stderr, "heapprofd: debuginfod: fetching the debug file of build ID %s: %s%s\n",
                hex, why == ETIMEDOUT ? "timed out" : strerror(why),
                e->failures >= DEBUGINFOD_FETCH_ATTEMPTS ? "; given up" : "; will retry");
        f->last_error = why;
    }
}

/* The fetch thread: the oldest queued build ID, one at a time. */
static void *fetch_thread(void *arg)
{
    struct debuginfod_fetch *f = arg;
    debuginfod_client *client = debuginfod_begin();
    if (!client)
        fprintf(stderr, "heapprofd: debuginfod: no client (out of memory?); nothing is fetched\n");
    else
        debuginfod_set_progressfn(client, progress);
    pthread_mutex_lock(&f->lock);
    for (;;) {
        struct fetch_id *e = NULL;
        while (!atomic_load(&f->stop) && !(e = next_queued(f)))
            pthread_cond_wait(&f->wake, &f->lock);
        if (atomic_load(&f->stop))
            break;
        e->state = ID_FETCHING;
        f->queued--;
        f->fetching = true;
        unsigned char id[BUILD_ID_MAX_BYTES];
        size_t len = e->len;
        memcpy(id, e->id, len);
        pthread_mutex_unlock(&f->lock);

        char *path = NULL;
        int why = ENOMEM;
        enum debuginfod_result r =
            client ? fetch_one(f, client, id, len, &path, &why) : DEBUGINFOD_ERROR;

        pthread_mutex_lock(&f->lock);
        /* A slot in flight is never taken (take_slot), so `e` is still this build ID. */
        f->fetching = false;
        settle(f, e, r, path, why);
    }
    pthread_mutex_unlock(&f->lock);
    if (client)
        debuginfod_end(client);
    return NULL;
}

/* Creates directory `dir` and its missing parents, mode 0700: 0 or -errno. */
static int make_dirs(const char *dir)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof(p), "%s", dir) >= (int)sizeof(p))
        return -ENAMETOOLONG;
    for (char *s = strchr(p + 1, '/');; s = strchr(s + 1, '/')) {
        if (s)
            *s = '\0';
        if (mkdir(p, 0700) != 0 && errno != EEXIST)
            return -errno;
        if (!s)
            return 0;
        *s = '/';
    }
}

int debuginfod_fetch_start(const char *urls, const char *cache_dir, uint64_t timeout_ns,
                           struct debuginfod_fetch **out, char *err, size_t errlen)
{
    int e = make_dirs(cache_dir);
    if (e) {
        snprintf(err, errlen, "create the debuginfod cache %s: %s", cache_dir, strerror(-e));
        return e;
    }
    /* Read by libdebuginfod at each fetch; no other thread runs yet. */
    if (setenv(DEBUGINFOD_URLS_ENV_VAR, urls, 1) != 0 ||
        setenv(DEBUGINFOD_CACHE_PATH_ENV_VAR, cache_dir, 1) != 0 ||
        setenv(DEBUGINFOD_TIMEOUT_ENV_VAR, DEBUGINFOD_FETCH_STALL_SECONDS, 0) != 0) {
        e = -errno;
        snprintf(err, errlen, "set the debuginfod environment: %s", strerror(-e));
        return e;
    }
    elf_version(EV_CURRENT);
    struct debuginfod_fetch *f = calloc(1, sizeof(*f));
    if (!f) {
        snprintf(err, errlen, "debuginfod: out of memory");
        return -ENOMEM;
    }
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->wake, NULL);
    f->timeout_ns = timeout_ns;
    e = pthread_create(&f->thread, NULL, fetch_thread, f);
    if (e) {
        snprintf(err, errlen, "start the debuginfod thread: %s", strerror(e));
        pthread_cond_destroy(&f->wake);
        pthread_mutex_destroy(&f->lock);
        free(f);
        return -e;
    }
    *out = f;
    return 0;
}

void debuginfod_fetch_stop(struct debuginfod_fetch *f)
{
    if (!f)
        return;
    pthread_mutex_lock(&f->lock);
    atomic_store(&f->stop, true);
    pthread_cond_signal(&f->wake);
    pthread_mutex_unlock(&f->lock);
    pthread_join(f->thread, NULL);
    for (size_t i = 0; i < DEBUGINFOD_FETCH_IDS; i++)
        forget(&f->ids[i]);
    pthread_cond_destroy(&f->wake);
    pthread_mutex_destroy(&f->lock);
    free(f);
}
