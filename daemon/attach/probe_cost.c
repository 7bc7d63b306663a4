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
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "allocator.h"
#include "elf_file.h"
#include "probe_links.h"

/* A function that does nothing, its first instruction `push %rbp`, which
 * the kernel emulates, as on the allocator entries heapprofd probes
 * (probe_site.c). */
#define CALIBRATION_FUNCTION(name)                                                                 \
    ".globl " #name "\n.type " #name ", @function\n" #name ":\n"                                  \
    "    push %rbp\n    pop %rbp\n    ret\n.size " #name ", .-" #name "\n"

/* What the calibration calls as a malloc+free pair: a pair probed as
 * calloc (with an overflowing size: its program returns at once) and as
 * free (with a pointer never sampled: one lookup in the live set, as for
 * every unsampled free), and an unprobed twin of each, timed in turn. */
__asm__(".text\n" CALIBRATION_FUNCTION(heapprofd_calibration_alloc)
            CALIBRATION_FUNCTION(heapprofd_calibration_free)
                CALIBRATION_FUNCTION(heapprofd_calibration_alloc_bare)
                    CALIBRATION_FUNCTION(heapprofd_calibration_free_bare));
void heapprofd_calibration_alloc(unsigned long n, unsigned long m);
void heapprofd_calibration_free(void *p);
void heapprofd_calibration_alloc_bare(unsigned long n, unsigned long m);
void heapprofd_calibration_free_bare(void *p);

/* One pair's functions, called through volatile pointers: every call is made. */
struct calibration_pair {
    void (*volatile alloc)(unsigned long, unsigned long);
    void (*volatile free)(void *);
};
static const struct calibration_pair probed_pair = {heapprofd_calibration_alloc,
                                                    heapprofd_calibration_free};
static const struct calibration_pair bare_pair = {heapprofd_calibration_alloc_bare,
                                                  heapprofd_calibration_free_bare};

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

/* Plans `name` of our own executable, probed as `kind`, into `f`. */
static int plan_function(struct elf_file *ef, const char *name, enum hp_kind kind,
                         struct allocator_func *f, char *err, size_t errlen)
{
    struct elf_symbol sym;
    int e = elf_file_find_function(ef, name, false, &sym);
    if (e) {
        snprintf(err, errlen, "find %s in /proc/self/exe: %s", name, strerror(-e));
        return e;
    }
    *f = (struct allocator_func){
        .name = name,
        .kind = kind,
        .object_path = "/proc/self/exe",
        .open_path = "/proc/self/exe",
        .symbol_offset = sym.file_offset,
        .file_offset = sym.file_offset,
        .emulated = 1,
    };
    return 0;
}

/* The plan of the probed pair: in our own executable, as calloc and free. */
static int calibration_plan(struct allocator_plan *plan, char *err, size_t errlen)
{
    struct elf_file *ef;
    memset(plan, 0, sizeof(*plan));
    int e = elf_file_open("/proc/self/exe", &ef);
    if (e) {
        snprintf(err, errlen, "open /proc/self/exe: %s", strerror(-e));
        return e;
    }
    e = plan_function(ef, "heapprofd_calibration_alloc", HP_CALLOC, &plan->funcs[0], err, errlen);
    if (e == 0)
        e = plan_function(ef, "heapprofd_calibration_free", HP_FREE, &plan->funcs[1], err, errlen);
    elf_file_close(ef);
    plan->n = e ? 0 : 2;
    return e;
}

/* The median added and bare CPU ns of PROBE_COST_CALLS pairs, over
 * PROBE_COST_RUNS runs of the probed pair and its bare twins in turn: each
 * run's pair back to back, so that the machine's load, which changes the
 * cost of a trap by 2x here, weighs on both alike. */
static void time_runs(uint64_t *added, uint64_t *bare)
{
    uint64_t diffs[PROBE_COST_RUNS], bares[PROBE_COST_RUNS];
    for (int r = 0; r < PROBE_COST_RUNS; r++) {
        bares[r] = time_calls(&bare_pair);
        uint64_t probed = time_calls(&probed_pair);
        diffs[r] = probed > bares[r] ? probed - bares[r] : 0;
    }
    qsort(diffs, PROBE_COST_RUNS, sizeof(diffs[0]), by_value);
    qsort(bares, PROBE_COST_RUNS, sizeof(bares[0]), by_value);
    *added = diffs[PROBE_COST_RUNS / 2];
    *bare = bares[PROBE_COST_RUNS / 2];
}

/* A process of ours that only waits, for links that stand for another
 * target's on the same functions: -errno if it cannot be made. */
static pid_t start_sharer(void)
{
    pid_t pid = fork();
    if (pid == 0) {
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
static int time_probed(struct bpf_state *bpf, const struct allocator_plan *plan,
                       struct probe_cost *out, uint64_t added[3], char *err, size_t errlen)
{
    struct probe_links mine = {0}, others[1 + PROBE_COST_SHARERS];
    pid_t sharers[1 + PROBE_COST_SHARERS];
    uint64_t hits = 0, bare = 0;
    memset(others, 0, sizeof(others));
    int e = bpf_state_zero_hits(bpf, HP_SPARE_SLOT);
    if (e == 0)
        e = probe_links_attach(bpf, getpid(), HP_SPARE_SLOT, plan, &mine, err, errlen);
    if (e == 0) {
        time_runs(&added[0], &bare);
        e = bpf_state_read_hits(bpf, HP_SPARE_SLOT, &hits);
    }
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
            time_runs(&added[n == 0 ? 1 : 2], &bare);
    }
    probe_links_release(&mine);
    for (int k = 0; k < n; k++) {
        probe_links_release(&others[k]);
        kill(sharers[k], SIGKILL);
        waitpid(sharers[k], NULL, 0);
    }
    if (e == 0 && hits == 0) {
        snprintf(err, errlen, "the probes on heapprofd_calibration_alloc and _free never ran");
        e = -ENOENT;
    }
    out->hits_per_pair = (double)hits / ((double)PROBE_COST_RUNS * PROBE_COST_CALLS);
    return e;
}

int probe_cost_calibrate(struct bpf_state *bpf, struct probe_cost *out, char *err, size_t errlen)
{
    struct allocator_plan plan;
    uint64_t added[3] = {0, 0, 0};
    memset(out, 0, sizeof(*out));
    int e = calibration_plan(&plan, err, errlen);
    if (e == 0)
        e = time_probed(bpf, &plan, out, added, err, errlen);
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
