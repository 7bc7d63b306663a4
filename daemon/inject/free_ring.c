/*
 * free_ring.c - drains the in-process sampler's ring of frees into the BPF
 * maps (see free_ring.h).
 *
 * A drain reads the ring in two steps: first the header and the pos[]
 * array, then the ptr[] array. A wrapper writes ptr[i] and then pos[i]
 * with a release store, and x86 keeps stores in order, so a pos[] seen by
 * the first read means the ptr[] it vouches for is already visible to the
 * second. One read of both would not do: process_vm_readv copies with no
 * promise of atomicity per word, and a pos written while it is being
 * copied could come with the ptr it replaced.
 *
 * The frees are applied by a BPF_PROG_TYPE_SYSCALL program run with
 * BPF_PROG_TEST_RUN, not by writing the maps from here: the counts are
 * changed by uprobes on other CPUs at the same time, and only the same
 * atomic operations, in the same claim-then-delete order (untrack() in
 * bpf/sample_store.bpf.h), keep them exact. Userspace has no atomic add
 * on a map value.
 */
#include "free_ring.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include <bpf/bpf.h>

#include "heapprof.h"
#include "hp_sampler.h"
#include "sampler_image.h"

#define RING_N HP_FREE_RING_SIZE

/* Drains of one process are serialized: two must not both move its
 * consumer (an older value written last would send it back). Processes
 * hash to one of these locks, so the drains of different processes run
 * at once (the timer's and each scrape's); there is no lock for all. */
#define DRAIN_STRIPES 64
#define DRAIN_LOCKS_INIT {[0 ... DRAIN_STRIPES - 1] = PTHREAD_MUTEX_INITIALIZER}
static pthread_mutex_t drain_locks[DRAIN_STRIPES] = DRAIN_LOCKS_INIT;
/* Atomic adds. */
static struct free_ring_counters counters;

/* The buffers of one drain: the ring's pos[] part and ptr[] part as read,
 * and the pointers handed to BPF, in order. One per lock, under it, made
 * on first use (192 KiB: not on a thread's stack, and not allocated per
 * drain, which glibc would map and unmap each time). */
struct drain_buf {
    uint64_t head[offsetof(struct hp_free_ring, ptr) / 8];
    uint64_t ptr[RING_N];
    uint64_t batch[RING_N];
};
static struct drain_buf *drain_bufs[DRAIN_STRIPES];

bool free_ring_wanted(int prog_fd)
{
    const char *env = getenv("HEAPPROFD_FREE_RING");
    return prog_fd >= 0 && !(env && strcmp(env, "0") == 0);
}

/* Reads `len` bytes at `addr` of process `pid`; 0 or -errno. */
static int read_remote(pid_t pid, uint64_t addr, void *to, size_t len)
{
    struct iovec local = {.iov_base = to, .iov_len = len};
    struct iovec remote = {.iov_base = (void *)(uintptr_t)addr, .iov_len = len};
    ssize_t r = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (r < 0)
        return -errno;
    return r == (ssize_t)len ? 0 : -EIO;
}

/* Runs the drain program over the first `n` pointers of `batch`, the
 * first at ring position `first`. */
static int apply(int prog_fd, pid_t pid, uint64_t first, uint32_t n, const uint64_t *batch)
{
    struct hp_drain_args a = {.tgid = (uint32_t)pid, .n = n, .first_pos = first,
                              .ptrs = (uint64_t)(uintptr_t)batch};
    LIBBPF_OPTS(bpf_test_run_opts, opts, .ctx_in = &a, .ctx_size_in = sizeof(a));
    int e = bpf_prog_test_run_opts(prog_fd, &opts);
    if (e)
        return e < 0 ? e : -EIO;
    return opts.retval == n ? 0 : -EIO;
}

/* The drain itself, under the process's drain lock. The sampler's magic and version are
 * read with the ring's head, in one call: a process that exec'd since its
 * last drain has other memory there (most likely none), and nothing is
 * written into it. */
static int drain_locked(int prog_fd, pid_t pid, uint64_t config, uint64_t ring,
                        uint64_t fork_page, bool enable, struct drain_buf *buf)
{
    struct {
        uint64_t magic;
        uint32_t version;
    } id;
    uint32_t flags[2]; /* hp_fork_page's opt_report, ring_on */
    /* The counters first: most rings are empty at most drains, and their
     * pos[] (64 KiB) is read only when there is something to drain. A
     * timer drains every ring ten times a second: 256 targets read 160
     * MB/s of empty rings before this. */
    const size_t counters_len = offsetof(struct hp_free_ring, pos);
    struct iovec local[3] = {{.iov_base = &id, .iov_len = sizeof(id)},
                             {.iov_base = buf->head, .iov_len = counters_len},
                             {.iov_base = flags, .iov_len = sizeof(flags)}};
    struct iovec remote[3] = {{.iov_base = (void *)(uintptr_t)config, .iov_len = sizeof(id)},
                              {.iov_base = (void *)(uintptr_t)ring, .iov_len = counters_len},
                              {.iov_base = (void *)(uintptr_t)fork_page, .iov_len = sizeof(flags)}};
    ssize_t r = process_vm_readv(pid, local, 3, remote, 3, 0);
    if (r < 0)
        return -errno;
    if (r != (ssize_t)(sizeof(id) + counters_len + sizeof(flags)))
        return -EIO;
    if (id.magic != HP_SAMPLER_MAGIC || id.version != HP_SAMPLER_VERSION)
        return -ESTALE;
    if (enable && flags[1] == 0) {
        uint32_t one = 1;
        struct iovec from = {.iov_base = &one, .iov_len = sizeof(one)};
        struct iovec to = {.iov_base = (void *)(uintptr_t)(fork_page + 4), .iov_len = sizeof(one)};
        if (process_vm_writev(pid, &from, 1, &to, 1, 0) != (ssize_t)sizeof(one))
            return -errno ? -errno : -EIO;
    }
    int e;
    const struct hp_free_ring *h = (const struct hp_free_ring *)buf->head;
    uint64_t producer = h->producer, consumer = h->consumer;
    /* Entries written since the consumer, in order, up to the first not
     * yet written (claimed by a thread still between its claim and its
     * write, or never: a process may write anything here). */
    if (producer - consumer > RING_N)
        return -EINVAL;
    if (producer == consumer)
        return 0;
    /* Read after the producer: a pos[] written since only vouches for more. */
    e = read_remote(pid, ring + counters_len, (uint8_t *)buf->head + counters_len,
                    sizeof(buf->head) - counters_len);
    if (e)
        return e;
    uint32_t n = 0;
    while (consumer + n != producer && h->pos[(consumer + n) % RING_N] == consumer + n + 1)
        n++;
    if (n == 0)
        return 0;
    e = read_remote(pid, ring + offsetof(struct hp_free_ring, ptr), buf->ptr, sizeof(buf->ptr));
    if (e)
        return e;
    for (uint32_t k = 0; k < n; k++)
        buf->batch[k] = buf->ptr[(consumer + k) % RING_N];
    e = apply(prog_fd, pid, consumer, n, buf->batch);
    if (e)
        return e;
    /* Only now may the process reuse those entries. */
    uint64_t next = consumer + n;
    struct iovec from = {.iov_base = &next, .iov_len = sizeof(next)};
    struct iovec to = {
        .iov_base = (void *)(uintptr_t)(ring + offsetof(struct hp_free_ring, consumer)),
        .iov_len = sizeof(next)};
    if (process_vm_writev(pid, &from, 1, &to, 1, 0) != (ssize_t)sizeof(next))
        return -errno ? -errno : -EIO;
    __atomic_add_fetch(&counters.entries, n, __ATOMIC_RELAXED);
    return (int)n;
}

int free_ring_drain(int prog_fd, pid_t pid, uint64_t base, bool enable)
{
    char err[128];
    const struct sampler_image *img = sampler_image_get(err, sizeof(err));
    uint64_t at = img ? sampler_image_symbol(img, HP_FREE_RING_SYM) : 0;
    uint64_t config = img ? sampler_image_symbol(img, HP_SAMPLER_CONFIG_SYM) : 0;
    uint64_t page = img ? sampler_image_symbol(img, HP_FORK_PAGE_SYM) : 0;
    if (!at || !config || !page || prog_fd < 0)
        return -ENOENT;
    uint32_t stripe = (uint32_t)pid % DRAIN_STRIPES;
    pthread_mutex_lock(&drain_locks[stripe]);
    if (!drain_bufs[stripe])
        drain_bufs[stripe] = malloc(sizeof(struct drain_buf));
    int e = drain_bufs[stripe] ? drain_locked(prog_fd, pid, base + config, base + at, base + page,
                                              enable, drain_bufs[stripe])
                               : -ENOMEM;
    pthread_mutex_unlock(&drain_locks[stripe]);
    __atomic_add_fetch(&counters.drains, 1, __ATOMIC_RELAXED);
    if (e < 0 && e != -ESRCH)
        __atomic_add_fetch(&counters.errors, 1, __ATOMIC_RELAXED);
    return e;
}

void free_ring_counters(struct free_ring_counters *out)
{
    out->drains = __atomic_load_n(&counters.drains, __ATOMIC_RELAXED);
    out->entries = __atomic_load_n(&counters.entries, __ATOMIC_RELAXED);
    out->errors = __atomic_load_n(&counters.errors, __ATOMIC_RELAXED);
}
