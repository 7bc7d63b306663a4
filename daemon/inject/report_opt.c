/*
 * report_opt.c - whether this kernel optimizes a uprobe on a 5-byte nop,
 * and the per-process flag of the sampler's optimized report function (see
 * report_opt.h).
 *
 * The probe is made on a memfd of the daemon's own, as the calibration of
 * probe_cost.c is: the kernel runs every link on an inode's instruction at
 * every hit, whichever process it is for, so probing a function of the
 * daemon's executable would slow other daemons of the same file (the tests
 * run several).
 */
#include "report_opt.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "heapprof.h"
#include "hp_sampler.h"
#include "proc_maps.h"
#include "sampler_image.h"
#include "uprobe_link.h"

#define PAGE 4096
/* Where each function is in the probe's page. */
enum { AT_OPTIMIZABLE = 0, AT_PLAIN = 64 };
static const unsigned char nop5_ret[] = {0x0f, 0x1f, 0x44, 0x00, 0x00, 0xc3};
static const unsigned char nop_ret[] = {0x90, 0xc3};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct report_opt_kernel found = {.optimizes = -1}; /* under lock */
static struct report_opt_failure failures[REPORT_OPT_CAUSES]; /* under lock */
static size_t nfailures;                                       /* under lock */

/* Whether process `pid` (0: this one) has a mapping named `name` holding `addr`
 * (addr 0: anywhere). */
static int has_mapping(pid_t pid, const char *name, uint64_t addr)
{
    struct proc_maps maps;
    if (proc_maps_read(pid ? pid : getpid(), &maps) != 0)
        return 0;
    int yes = 0;
    for (size_t i = 0; i < maps.n && !yes; i++)
        yes = strcmp(maps.v[i].path, name) == 0 &&
              (addr == 0 || (addr >= maps.v[i].start && addr < maps.v[i].end));
    proc_maps_free(&maps);
    return yes;
}

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CPU ns per call of `fn`, over REPORT_OPT_CALLS calls. */
static uint64_t time_calls(void (*volatile fn)(unsigned long, unsigned long))
{
    uint64_t t0 = thread_cpu_ns();
    for (int i = 0; i < REPORT_OPT_CALLS; i++)
        fn(0, 0);
    return (thread_cpu_ns() - t0) / REPORT_OPT_CALLS;
}

/* Probes and times, with the page mapped from memfd `fd` at `page`. */
static int probe_page(int report_fd, int fd, unsigned char *page, struct report_opt_kernel *out)
{
    char path[32];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    void (*volatile opt)(unsigned long, unsigned long) =
        (void (*)(unsigned long, unsigned long))(uintptr_t)(page + AT_OPTIMIZABLE);
    void (*volatile plain)(unsigned long, unsigned long) =
        (void (*)(unsigned long, unsigned long))(uintptr_t)(page + AT_PLAIN);
    /* Run once before it is probed: fewer of the SIGILLs described at
     * probe_isolated() were seen so. */
    opt(0, 0);
    uint64_t bare = time_calls(plain);
    uint64_t offsets[2] = {AT_OPTIMIZABLE, AT_PLAIN};
    uint64_t cookies[2] = {HP_REPORT_FREE, HP_REPORT_FREE};
    int link = uprobe_link_create(report_fd, HP_BPF_TRACE_UPROBE_MULTI, path, offsets, cookies, 2,
                                  0, getpid());
    if (link < 0)
        return link;
    usleep(20000); /* the probe long in place, as a target's is, at its first hit */
    opt(0, 0); /* the first hit is a trap, which optimizes the probe */
    opt(0, 0);
    out->optimizes = has_mapping(0, "[uprobes-trampoline]", 0);
    uint64_t o = time_calls(opt), p = time_calls(plain);
    out->optimized_ns = o > bare ? o - bare : 1;
    out->plain_ns = p > bare ? p - bare : 1;
    close(link);
    return 0;
}

/* The probe itself, in the child: the page, the link, the timing; the
 * result goes to `out`. */
static int probe_in_child(int report_fd, struct report_opt_kernel *out)
{
    unsigned char code[PAGE];
    memset(code, 0xcc, sizeof(code));
    memcpy(code + AT_OPTIMIZABLE, nop5_ret, sizeof(nop5_ret));
    memcpy(code + AT_PLAIN, nop_ret, sizeof(nop_ret));
    int e = 0, fd = memfd_create("heapprofd-report-probe", MFD_CLOEXEC);
    unsigned char *page = MAP_FAILED;
    if (fd < 0 || write(fd, code, sizeof(code)) != (ssize_t)sizeof(code))
        e = errno ? -errno : -EIO;
    if (e == 0) {
        page = mmap(NULL, PAGE, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0);
        e = page == MAP_FAILED ? -errno : 0;
    }
    return e ? e : probe_page(report_fd, fd, page, out);
}

/*
 * Runs the probe in a child of ours, so that a kernel that kills the
 * prober takes the child, not the daemon: on Linux 6.18 here the first hit
 * of a probe just placed on a 5-byte nop killed the process with SIGILL
 * at the nop's second byte in about one start in three (the daemon's own
 * start-up probe, under load; never seen in a target, where the probes
 * are long in place when the function is first reached). A prober killed
 * by a signal makes the optimized path off. The child does only system
 * calls and our own code; it is given PROBE_CHILD_MS.
 */
#define PROBE_CHILD_MS 5000
static int probe_isolated(struct bpf_state *bpf, int report_fd, struct report_opt_kernel *out,
                          int *killed_by)
{
    int fds[2];
    *killed_by = 0;
    if (pipe2(fds, O_CLOEXEC) != 0)
        return -errno;
    pid_t child = fork();
    if (child < 0) {
        int e = -errno;
        close(fds[0]);
        close(fds[1]);
        return e;
    }
    if (child == 0) {
        struct report_opt_kernel r = {.optimizes = -1};
        int e = bpf_state_set_reporting(bpf, (uint32_t)getpid(), true);
        if (e == 0)
            e = probe_in_child(report_fd, &r);
        if (e == 0 && write(fds[1], &r, sizeof(r)) != (ssize_t)sizeof(r))
            e = -EIO;
        _exit(e ? 1 : 0);
    }
    close(fds[1]);
    struct pollfd p = {.fd = fds[0], .events = POLLIN};
    ssize_t got = 0;
    if (poll(&p, 1, PROBE_CHILD_MS) == 1)
        got = read(fds[0], out, sizeof(*out));
    close(fds[0]);
    kill(child, SIGKILL); /* done or stuck: it goes either way */
    int status = 0;
    waitpid(child, &status, 0);
    bpf_state_set_reporting(bpf, (uint32_t)child, false);
    if (WIFSIGNALED(status) && WTERMSIG(status) != SIGKILL)
        *killed_by = WTERMSIG(status);
    return got == (ssize_t)sizeof(*out) ? 0 : -EIO;
}

int report_opt_probe(struct bpf_state *bpf, struct report_opt_kernel *out)
{
    int report_fd = bpf->layout == LAYOUT_CLASSIC ? -1 : bpf_state_report_fd(bpf);
    struct report_opt_kernel r = {.optimizes = -1};
    int killed_by = 0, e = report_fd >= 0 ? probe_isolated(bpf, report_fd, &r, &killed_by)
                                          : -EOPNOTSUPP;
    if (killed_by) {
        fprintf(stderr, "heapprofd: the probe of a 5-byte nop was killed by signal %d: the "
                "optimized report function is not used\n", killed_by);
        r = (struct report_opt_kernel){.optimizes = 0};
    }
    const char *env = getenv("HEAPPROFD_OPT_REPORT");
    if (env && strcmp(env, "0") == 0 && r.optimizes == 1)
        r.optimizes = 0;
    pthread_mutex_lock(&lock);
    found = r;
    pthread_mutex_unlock(&lock);
    *out = r;
    return e;
}

struct report_opt_kernel report_opt_get(void)
{
    pthread_mutex_lock(&lock);
    struct report_opt_kernel r = found;
    pthread_mutex_unlock(&lock);
    return r;
}

/* Whether the 5 bytes at `at` in the process are safe to call: the nop,
 * a breakpoint on it, or a call into a trampoline the process has. */
static int safe_to_call(pid_t pid, int mem_fd, uint64_t at)
{
    unsigned char b[5];
    if (pread(mem_fd, b, sizeof(b), (off_t)at) != (ssize_t)sizeof(b))
        return 0;
    if (memcmp(b, nop5_ret, 5) == 0 || b[0] == 0xcc)
        return 1;
    if (b[0] != 0xe8)
        return 0;
    int32_t rel;
    memcpy(&rel, b + 1, sizeof(rel));
    return has_mapping(pid, "[uprobes-trampoline]", at + 5 + (uint64_t)(int64_t)rel);
}

/* Counts a failure of report_opt_enable() by its errno, and says it the
 * first time that errno is seen. */
static void note_failure(pid_t pid, int err)
{
    pthread_mutex_lock(&lock);
    size_t i = 0;
    while (i < nfailures && failures[i].err != err)
        i++;
    bool first = false;
    if (i == nfailures && nfailures < REPORT_OPT_CAUSES) {
        failures[nfailures++].err = err;
        first = true;
    } else if (i == nfailures) {
        i = REPORT_OPT_CAUSES - 1; /* a cause past the table's: counted with the last */
    }
    failures[i].count++;
    pthread_mutex_unlock(&lock);
    if (first)
        fprintf(stderr, "heapprofd: pid %d: the optimized report function could not be "
                "enabled (%s); the plain one is used. Said once per cause; "
                "heapprofd_report_opt_failures_total counts them\n", (int)pid, strerror(err));
}

size_t report_opt_failures(struct report_opt_failure *out)
{
    pthread_mutex_lock(&lock);
    size_t n = nfailures;
    memcpy(out, failures, n * sizeof(*out));
    pthread_mutex_unlock(&lock);
    return n;
}

static int enable(pid_t pid, uint64_t base, int64_t wipeonfork)
{
    char err[128];
    const struct sampler_image *img = sampler_image_get(err, sizeof(err));
    if (report_opt_get().optimizes != 1 || wipeonfork != 0 || !img)
        return 0;
    uint64_t fn = sampler_image_symbol(img, HP_REPORT_ALLOC_OPT_SYM);
    uint64_t flag = sampler_image_symbol(img, HP_FORK_PAGE_SYM);
    if (!fn || !flag)
        return -ENOENT;
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
    int mem_fd = open(path, O_RDWR | O_CLOEXEC);
    if (mem_fd < 0)
        return -errno;
    int set = safe_to_call(pid, mem_fd, base + fn);
    uint32_t one = 1;
    if (set && pwrite(mem_fd, &one, sizeof(one),
                      (off_t)(base + flag + offsetof(struct hp_fork_page, opt_report))) !=
                   (ssize_t)sizeof(one))
        set = -EIO;
    close(mem_fd);
    return set;
}

int report_opt_enable(pid_t pid, uint64_t base, int64_t wipeonfork)
{
    int e = enable(pid, base, wipeonfork);
    if (e < 0)
        note_failure(pid, -e);
    return e;
}
