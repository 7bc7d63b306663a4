/*
 * probe_cost.c - calibrates the CPU cost of one probe hit at start-up and
 * turns hit counts into estimates (see probe_cost.h).
 */
#include "probe_cost.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "allocator.h"
#include "probe_links.h"

/*
 * What the calibration calls as a malloc+free pair: a pair probed as calloc
 * (with an overflowing size: its program returns at once) and as free
 * (with a pointer never sampled: one lookup in the live set, as for every
 * unsampled free), and an unprobed twin of each, timed in turn. Each is a
 * function that does nothing, its first instruction `push %rbp`, which the
 * kernel emulates, as on the allocator entries heapprofd probes
 * (probe_site.c).
 *
 * They live in a file of this calibration's own, a memfd mapped
 * executable, not in the daemon's executable: the kernel runs every link
 * on an inode's instruction at every hit, whichever process it is for, so
 * another daemon of the same executable calibrating at the same time (the
 * tests start several) would make each hit dearer.
 */
static const unsigned char do_nothing[] = {0x55, 0x5d, 0xc3}; /* push %rbp; pop %rbp; ret */
enum { CODE_PROBED_ALLOC = 0, CODE_PROBED_FREE = 64, CODE_BARE_ALLOC = 128, CODE_BARE_FREE = 192,
       CODE_SIZE = 4096 };

/* One pair's functions, called through volatile pointers: every call is made. */
struct calibration_pair {
    void (*volatile alloc)(unsigned long, unsigned long);
    void (*volatile free)(void *);
};

/* The calibration's code: its file, mapped, and the pairs in it. */
struct calibration_code {
    int fd;
    char path[32]; /* /proc/self/fd/N: the kernel opens the file by it */
    void *page;
    struct calibration_pair probed, bare;
};

/* Makes the calibration's code file and maps it; 0 or -errno (why in `err`). */
static int code_make(struct calibration_code *c, char *err, size_t errlen)
{
    unsigned char page[CODE_SIZE];
    memset(page, 0xcc, sizeof(page)); /* int3 between the functions */
    const size_t at[] = {CODE_PROBED_ALLOC, CODE_PROBED_FREE, CODE_BARE_ALLOC, CODE_BARE_FREE};
    for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++)
        memcpy(page + at[i], do_nothing, sizeof(do_nothing));
    c->page = MAP_FAILED;
    c->fd = memfd_create("heapprofd-calibration", MFD_CLOEXEC);
    int e = c->fd < 0 ? -errno : 0;
    if (e == 0 && write(c->fd, page, sizeof(page)) != (ssize_t)sizeof(page))
        e = errno ? -errno : -EIO;
    if (e == 0) {
        c->page = mmap(NULL, CODE_SIZE, PROT_READ | PROT_EXEC, MAP_PRIVATE, c->fd, 0);
        e = c->page == MAP_FAILED ? -errno : 0;
    }
    if (e) {
        snprintf(err, errlen, "a memfd of code to probe: %s", strerror(-e));
        if (c->fd >= 0)
            close(c->fd);
        return e;
    }
    snprintf(c->path, sizeof(c->path), "/proc/self/fd/%d", c->fd);
    unsigned char *base = c->page;
    /* Addresses in a code page to functions: what it is there for. */
    c->probed.alloc = (void (*)(unsigned long, unsigned long))(uintptr_t)(base + CODE_PROBED_ALLOC);
    c->probed.free = (void (*)(void *))(uintptr_t)(base + CODE_PROBED_FREE);
    c->bare.alloc = (void (*)(unsigned long, unsigned long))(uintptr_t)(base + CODE_BARE_ALLOC);
    c->bare.free = (void (*)(void *))(uintptr_t)(base + CODE_BARE_FREE);
    return 0;
}

static void code_free(struct calibration_code *c)
{
    munmap(c->page, CODE_SIZE);
    close(c->fd);
}

/* CPU time of this thread, user and system: the kernel's uprobe handling
 * is charged to the thread that trapped. */
static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CPU ns of PROBE_COST_CALLS pairs of calls. */
static uint64_t time_calls(const struct calibration_pair *pair)
{
    static char token; /* a pointer no sample ever had */
    uint64_t t0 = thread_cpu_ns();
    for (int i = 0; i < PROBE_COST_CALLS; i++) {
        pair->alloc(~0UL, 2);
        pair->free(&token);
    }
    return thread_cpu_ns() - t0;
}

static int by_value(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The plan of the probed pair: in the code file `c`, as calloc and free. */
static void calibration_plan(const struct calibration_code *c, struct allocator_plan *plan)
{
    memset(plan, 0, sizeof(*plan));
    const struct {
        const char *name;
        enum hp_kind kind;
        uint64_t offset;
    } funcs[] = {{"calibration_alloc", HP_CALLOC, CODE_PROBED_ALLOC},
                 {"calibration_free", HP_FREE, CODE_PROBED_FREE}};
    for (size_t i = 0; i < 2; i++)
        plan->funcs[i] = (struct allocator_func){
            .name = funcs[i].name,
            .kind = funcs[i].kind,
            .object_path = (char *)c->path,
            .open_path = (char *)c->path,
            .symbol_offset = funcs[i].offset,
            .file_offset = funcs[i].offset,
            .emulated = 1,
        };
    plan->n = 2;
}

/* The median added and bare CPU ns of PROBE_COST_CALLS pairs, over
 * PROBE_COST_RUNS runs of the probed pair and its bare twins in turn: each
 * run's pair back to back, so that the machine's load, which changes the
 * cost of a trap by 2x here, weighs on both alike. */
static int time_runs(const struct calibration_code *c, const atomic_int *stop, uint64_t *added,
                     uint64_t *bare)
{
    uint64_t diffs[PROBE_COST_RUNS], bares[PROBE_COST_RUNS];
    for (int r = 0; r < PROBE_COST_RUNS; r++) {
        if (atomic_load(stop))
            return -ECANCELED;
        bares[r] = time_calls(&c->bare);
        uint64_t probed = time_calls(&c->probed);
        diffs[r] = probed > bares[r] ? probed - bares[r] : 0;
    }
    qsort(diffs, PROBE_COST_RUNS, sizeof(diffs[0]), by_value);
    qsort(bares, PROBE_COST_RUNS, sizeof(bares[0]), by_value);
    *added = diffs[PROBE_COST_RUNS / 2];
    *bare = bares[PROBE_COST_RUNS / 2];
    return 0;
}

/* A process of ours that only waits, for links that stand for another
 * target's on the same functions: -errno if it cannot be made. It holds
 * none of the daemon's files (the pin directory's lock among them) and
 * dies with the thread that made it, should the daemon be killed first. */
static pid_t start_sharer(void)
{
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0) {
        close_range(3, ~0U, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(0); /* the daemon died before the line above */
        for (;;)
            pause();
    }
    return pid < 0 ? -errno : pid;
}

/* Times the pair with its probes in, bare twins in turn: the added CPU ns
 * into added[0]; then with links on the same functions for one other
 * process (added[1]) and for 1 + PROBE_COST_SHARERS (added[2]), as other
 * targets of the same library have. The hits a pair come from the spare
 * slot's counter. */
static int time_probed(struct bpf_state *bpf, const struct calibration_code *c,
                       const struct allocator_plan *plan, const atomic_int *stop,
                       struct probe_cost *out, uint64_t added[3], char *err, size_t errlen)
{
    struct probe_links mine = {0}, others[1 + PROBE_COST_SHARERS];
    pid_t sharers[1 + PROBE_COST_SHARERS];
    uint64_t hits = 0, bare = 0;
    memset(others, 0, sizeof(others));
    int e = bpf_state_zero_hits(bpf, HP_SPARE_SLOT);
    if (e == 0)
        e = probe_links_attach(bpf, getpid(), HP_SPARE_SLOT, plan, &mine, err, errlen);
    if (e == 0)
        e = time_runs(c, stop, &added[0], &bare);
    if (e == 0)
        e = bpf_state_read_hits(bpf, HP_SPARE_SLOT, &hits);
    out->bare_ns = bare / PROBE_COST_CALLS;
    int n = 0;
    for (; n < 1 + PROBE_COST_SHARERS && e == 0; n++) {
        if ((sharers[n] = start_sharer()) < 0) {
            e = sharers[n];
            snprintf(err, errlen, "fork a process to share the probes: %s", strerror(-e));
            break;
        }
        e = probe_links_attach(bpf, sharers[n], HP_SPARE_SLOT, plan, &others[n], err, errlen);
        if (e == 0 && (n == 0 || n == PROBE_COST_SHARERS))
            e = time_runs(c, stop, &added[n == 0 ? 1 : 2], &bare);
    }
    probe_links_release(&mine);
    for (int k = 0; k < n; k++) {
        probe_links_release(&others[k]);
        kill(sharers[k], SIGKILL);
        waitpid(sharers[k], NULL, 0);
    }
    if (e == -ECANCELED)
        snprintf(err, errlen, "stopped before it was done");
    if (e == 0 && hits == 0) {
        snprintf(err, errlen, "the probes on the calibration's calloc and free never ran");
        e = -ENOENT;
    }
    out->hits_per_pair = (double)hits / ((double)PROBE_COST_RUNS * PROBE_COST_CALLS);
    return e;
}

int probe_cost_calibrate(struct bpf_state *bpf, const atomic_int *stop, struct probe_cost *out,
                         char *err, size_t errlen)
{
    struct calibration_code code;
    struct allocator_plan plan;
    uint64_t added[3] = {0, 0, 0};
    memset(out, 0, sizeof(*out));
    int e = code_make(&code, err, errlen);
    if (e)
        return e;
    calibration_plan(&code, &plan);
    e = time_probed(bpf, &code, &plan, stop, out, added, err, errlen);
    code_free(&code);
    if (e)
        return e;
    double hits = PROBE_COST_CALLS * out->hits_per_pair;
    out->ns_per_hit = (uint64_t)((double)added[0] / hits + 0.5);
    /* Entries and returns alike: the return probes' consumers are the
     * entries' links too. */
    double per = added[2] > added[1] ? (double)(added[2] - added[1]) / hits / PROBE_COST_SHARERS
                                     : 0;
    double first = added[1] > added[0] ? (double)(added[1] - added[0]) / hits - per : 0;
    out->ns_per_sharer = (uint64_t)(per + 0.5);
    out->ns_when_shared = first > 0 ? (uint64_t)(first + 0.5) : 0;
    return 0;
}

void probe_cost_estimate(uint64_t hits, uint64_t ns_per_hit, uint64_t cpu_ns,
                         struct cost_estimate *out)
{
    double added_ns = (double)hits * (double)ns_per_hit;
    out->added_cpu_seconds = added_ns / 1e9;
    out->percent_known = ns_per_hit && (double)cpu_ns > added_ns;
    out->percent = out->percent_known ? 100.0 * added_ns / ((double)cpu_ns - added_ns) : 0;
}

int probe_cost_describe(uint64_t hits, uint64_t ns_per_hit, uint64_t cpu_ns, char *buf,
                        size_t len)
{
    struct cost_estimate c;
    probe_cost_estimate(hits, ns_per_hit, cpu_ns, &c);
    if (!ns_per_hit)
        return snprintf(buf, len, "heapprofd's probes ran %llu times in this process (no "
                        "estimate of their cost: not calibrated yet, or not for its sampler)",
                        (unsigned long long)hits);
    if (!c.percent_known)
        return snprintf(buf, len, "heapprofd added ~%.3g CPU s to this process (%llu probe hits "
                        "at ~%llu ns)", c.added_cpu_seconds, (unsigned long long)hits,
                        (unsigned long long)ns_per_hit);
    return snprintf(buf, len, "heapprofd added ~%.3g%% CPU to this process (~%.3g CPU s: %llu "
                    "probe hits at ~%llu ns)", c.percent, c.added_cpu_seconds,
                    (unsigned long long)hits, (unsigned long long)ns_per_hit);
}
