/*
 * debuginfod_fetch.h - debug files fetched by build ID from the servers in
 * DEBUGINFOD_URLS (elfutils' libdebuginfod), off the request path.
 *
 * A request never waits for the network. The symbolizer asks for a build
 * ID's debug file when it finds no local one; the answer is at once: the
 * file, if it has arrived; "later", after putting the build ID on a
 * bounded queue; or "none". One thread of ours fetches the queue one build
 * ID at a time, each fetch bounded by a timeout. The symbol cache asks
 * again at each later use of a file still waiting, and opens the file
 * anew once its debug file is there, so a profile served before the file
 * arrives has addresses and the ones after it have names.
 *
 * Each build ID is fetched once at a time (asks while it is queued or in
 * flight only wait for it), and retried a bounded number of times:
 *   - the file arrived: kept (libdebuginfod's cache holds it; its own
 *     cleaning removes files unused for a week, and a file found gone is
 *     fetched again);
 *   - the servers have none: asked again after an hour, as distributions
 *     publish debug files after the packages;
 *   - an error (timeout, refused, bad answer): retried after 10 and then 20
 *     minutes, then given up until the daemon restarts.
 *
 * libdebuginfod reads its settings from the environment at each fetch:
 * debuginfod_fetch_start() sets DEBUGINFOD_URLS, DEBUGINFOD_CACHE_PATH and
 * (if unset) DEBUGINFOD_TIMEOUT, and so must run before the daemon starts
 * any thread (setenv() races with getenv() in other threads).
 *
 * Thread safety: every function may be called from any thread; the table
 * of build IDs is under the fetcher's lock, never held across a fetch.
 *
 * Ownership: debuginfod_fetch_start() returns an object freed by
 * debuginfod_fetch_stop(), which must outlive every symbolizer given it.
 */
#ifndef HEAPPROF_DEBUGINFOD_FETCH_H
#define HEAPPROF_DEBUGINFOD_FETCH_H

#include <stddef.h>
#include <stdint.h>

/* Build IDs waiting for the fetch thread. A process maps tens of
 * libraries, a host's profiled processes a few hundred distinct ones; past
 * this the ask is refused ("later") and made again at the next scrape, so
 * a dead server costs at most this many timeouts at a time. */
#define DEBUGINFOD_FETCH_QUEUE 64

/* Build IDs remembered, with their outcome: more than the symbol cache's
 * files (512), so that a file kept open is not asked about again. The
 * oldest settled ones are forgotten first. */
#define DEBUGINFOD_FETCH_IDS 1024

/* Fetches of one build ID that may fail (timeout, refused, bad answer)
 * before it is given up until the daemon restarts. */
#define DEBUGINFOD_FETCH_ATTEMPTS 3

/* The wait before a failed build ID is retried, doubled at each failure.
 * Not shorter than libdebuginfod's own memory of a failure (its cache
 * marks a fetch that found nothing or was cut short for cache_miss_s, 600 s
 * by default): a retry sooner would only read that mark. */
#define DEBUGINFOD_FETCH_RETRY_SECONDS 600

/* The wait before a build ID the servers did not have is asked again. */
#define DEBUGINFOD_FETCH_NOTFOUND_SECONDS 3600

/* libdebuginfod's bound on connecting and on a transfer slower than 100
 * bytes/s (DEBUGINFOD_TIMEOUT, 90 s by its default), unless the
 * environment sets one. libdebuginfod tries twice more (its
 * DEBUGINFOD_RETRY_LIMIT): a server that accepts and never answers was
 * given up after 30.7 s here (3 x 10 s; by its default, 3 x 90 s). */
#define DEBUGINFOD_FETCH_STALL_SECONDS "10"

/* The default bound on one whole fetch (debuginfod-timeout). */
#define DEBUGINFOD_FETCH_DEFAULT_TIMEOUT "60s"

/* How fetches ended, the label of the fetch counter. */
enum debuginfod_result {
    DEBUGINFOD_OK,       /* the file arrived, with the right build ID */
    DEBUGINFOD_NOTFOUND, /* no server has it */
    DEBUGINFOD_ERROR,    /* timeout, connection, a wrong file: retried */
    DEBUGINFOD_NRESULTS,
};

/* Counters for /metrics and tests. */
struct debuginfod_fetch_stats {
    uint64_t fetches[DEBUGINFOD_NRESULTS]; /* fetches ended, by result */
    uint64_t pending;                      /* build IDs queued or in flight now */
    uint64_t refused;                      /* asks not queued: the queue was full */
};

struct debuginfod_fetch;

/*
 * Starts fetching from `urls` (DEBUGINFOD_URLS syntax: space-separated
 * server URLs) into `cache_dir` (created if missing, mode 0700), each
 * fetch bounded by `timeout_ns`. Call before any other thread exists.
 * 0, or -errno with a one-line reason in `err` (the cache directory, the
 * thread).
 */
int debuginfod_fetch_start(const char *urls, const char *cache_dir, uint64_t timeout_ns,
                           struct debuginfod_fetch **out, char *err, size_t errlen);

/* Stops the thread (a fetch in flight is cut within about a second) and
 * frees everything; NULL is fine. */
void debuginfod_fetch_stop(struct debuginfod_fetch *f);

/*
 * The debug file of build ID `id` (`len` bytes), without waiting: a file
 * descriptor (the caller closes it) and its path in *path (malloc'd);
 * -EAGAIN when it is queued or in flight, or could not be queued now (ask
 * again later); -ENOENT when no server had it or it was given up. Queues
 * the build ID when it is new, or due for a retry.
 */
int debuginfod_fetch_open(struct debuginfod_fetch *f, const unsigned char *id, size_t len,
                          char **path);

/* Whether the debug file of `id` has arrived (then opening the file anew
 * finds it); like debuginfod_fetch_open(), queues it when due. */
int debuginfod_fetch_arrived(struct debuginfod_fetch *f, const unsigned char *id, size_t len);

void debuginfod_fetch_stats(struct debuginfod_fetch *f, struct debuginfod_fetch_stats *out);

/* The label of result `r` in /metrics ("ok", "notfound", "error"). */
const char *debuginfod_result_name(enum debuginfod_result r);

#endif
