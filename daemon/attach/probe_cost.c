/*
 * probe_cost.c - calibrates the CPU cost of one probe hit at start-up and
 * turns hit counts into estimates (see probe_cost.h).
 */
#include "probe_cost.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "allocator.h"
#include "elf_file.h"
#include "probe_links.h"

/* The function the calibration probes: `push %rbp` first, which the kernel
 * emulates, as on the allocator entries heapprofd probes (probe_site.c). */
__asm__(".text\n"
        ".globl heapprofd_calibration_target\n"
        ".type heapprofd_calibration_target, @function\n"
        "heapprofd_calibration_target:\n"
        "    push %rbp\n"
        "    pop %rbp\n"
        "    ret\n"
        ".size heapprofd_calibration_target, .-heapprofd_calibration_target\n");
void heapprofd_calibration_target(unsigned long n, unsigned long m);

/* Through a volatile pointer: every call is made. */
static void (*volatile calibration_call)(unsigned long, unsigned long) =
    heapprofd_calibration_target;

/* CPU time of this thread, user and system: the kernel's uprobe handling
 * is charged to the thread that trapped. */
static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CPU ns of PROBE_COST_CALLS calls, as calloc(~0, 2) would be called:
 * the BPF program sees the overflow and returns at once. */
static uint64_t time_calls(void)
{
    uint64_t t0 = thread_cpu_ns();
    for (int i = 0; i < PROBE_COST_CALLS; i++)
        calibration_call(~0UL, 2);
    return thread_cpu_ns() - t0;
}

static int by_value(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The plan of one "allocator" function: the calibration target in our own
 * executable, probed as calloc. */
static int calibration_plan(struct allocator_plan *plan, char *err, size_t errlen)
{
    struct elf_file *ef;
    struct elf_symbol sym;
    int e = elf_file_open("/proc/self/exe", &ef);
    if (e == 0) {
        e = elf_file_find_function(ef, "heapprofd_calibration_target", false, &sym);
        elf_file_close(ef);
    }
    if (e) {
        snprintf(err, errlen, "find heapprofd_calibration_target in /proc/self/exe: %s",
                 strerror(-e));
        return e;
    }
    memset(plan, 0, sizeof(*plan));
    plan->funcs[0] = (struct allocator_func){
        .name = "calloc",
        .kind = HP_CALLOC,
        .object_path = "/proc/self/exe",
        .open_path = "/proc/self/exe",
        .symbol_offset = sym.file_offset,
        .file_offset = sym.file_offset,
        .emulated = 1,
    };
    plan->n = 1;
    return 0;
}

/* Times the calls with the probe in: the median of the runs into *probed,
 * the hits per call from the calibration slot's counter. */
static int time_probed(struct bpf_state *bpf, const struct allocator_plan *plan,
                       uint64_t *probed, double *hits_per_call, char *err, size_t errlen)
{
    struct probe_links links = {0};
    uint64_t runs[PROBE_COST_RUNS], hits = 0;
    int e = bpf_state_zero_hits(bpf, HP_SPARE_SLOT);
    if (e == 0)
        e = probe_links_attach(bpf, getpid(), HP_SPARE_SLOT, plan, &links, err, errlen);
    for (int r = 0; r < PROBE_COST_RUNS && e == 0; r++)
        runs[r] = time_calls();
    if (e == 0)
        e = bpf_state_read_hits(bpf, HP_SPARE_SLOT, &hits);
    probe_links_release(&links);
    if (e == 0 && hits == 0) {
        snprintf(err, errlen, "the probe on heapprofd_calibration_target never ran");
        e = -ENOENT;
    }
    if (e)
        return e;
    qsort(runs, PROBE_COST_RUNS, sizeof(runs[0]), by_value);
    *probed = runs[PROBE_COST_RUNS / 2];
    *hits_per_call = (double)hits / ((double)PROBE_COST_RUNS * PROBE_COST_CALLS);
    return 0;
}

int probe_cost_calibrate(struct bpf_state *bpf, struct probe_cost *out, char *err, size_t errlen)
{
    struct allocator_plan plan;
    uint64_t probed;
    memset(out, 0, sizeof(*out));
    int e = calibration_plan(&plan, err, errlen);
    uint64_t bare = e ? 0 : time_calls();
    if (e == 0)
        e = time_probed(bpf, &plan, &probed, &out->hits_per_call, err, errlen);
    if (e)
        return e;
    uint64_t bare_after = time_calls();
    bare = bare_after < bare ? bare_after : bare;
    double added = probed > bare ? (double)(probed - bare) : 0;
    out->bare_ns = bare / PROBE_COST_CALLS;
    out->ns_per_hit = (uint64_t)(added / (PROBE_COST_CALLS * out->hits_per_call) + 0.5);
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
        return snprintf(buf, len, "heapprofd's probes ran %llu times in this process (no cost "
                        "estimate for its sampler)", (unsigned long long)hits);
    if (!c.percent_known)
        return snprintf(buf, len, "heapprofd added ~%.3g CPU s to this process (%llu probe hits "
                        "at ~%llu ns)", c.added_cpu_seconds, (unsigned long long)hits,
                        (unsigned long long)ns_per_hit);
    return snprintf(buf, len, "heapprofd added ~%.3g%% CPU to this process (~%.3g CPU s: %llu "
                    "probe hits at ~%llu ns)", c.percent, c.added_cpu_seconds,
                    (unsigned long long)hits, (unsigned long long)ns_per_hit);
}
