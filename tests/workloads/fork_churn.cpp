/*
 * fork_churn.cpp - a busy process that forks all the time, for
 * test_fork_storm.py (issue 34: a forked child must never hang in the
 * sampler's installer, nor be left with its signal mask).
 *
 * Threads of the parent: two call dl_iterate_phdr in a loop, two throw
 * and catch C++ exceptions, one allocates, one dlopens and dlcloses a
 * plugin, and one dlopens and dlcloses libm, which is loaded already: the
 * loader changes nothing then, and frees its lock in a child, so a child
 * forked during that call is fine; the sampler's dlopen wrapper walks
 * the modules after each such call, and its walk must leave a child
 * forked meanwhile nothing held. The main thread forks children, at most
 * MAX_LIVE at once, and every VFORK_EVERY-th a vfork child that execs
 * /bin/true. Each child allocates, dlopens the plugin, calls into it,
 * dlcloses it, walks the modules, throws and catches, frees, and exits.
 *
 * glibc 2.36 does not free the list's write lock in a fork child, nor
 * reset the list's state: a child forked while a parent thread was inside
 * dl_iterate_phdr, dlopen or dlclose hangs or aborts in its own next
 * dlopen or dl_iterate_phdr, profiled or not (seen here unprofiled). Such
 * a child knows it from its copy of `in_loader` (each of those threads
 * sets its flag before the call and clears it after): it skips those
 * calls and counts itself "inherited". Any other hang is the profiler's.
 *
 * A child still running CHILD_DEADLINE_S after its fork is "hung": its
 * SigBlk and where each thread is are printed, and it is killed.
 *
 * Usage: fork_churn SECONDS PLUGIN. Protocol: "ready PID"; on a line, runs
 * for SECONDS, then prints "forks N vforks V exited E failed F hung H
 * inherited I" and "done", and exits on a line (or EOF).
 */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdexcept>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern "C" {
#include "handshake.h"
}

#define MAX_LIVE 32
#define FORK_EVERY_US 500
#define VFORK_EVERY 8
#define CHILD_DEADLINE_S 10
#define CHILD_BLOCKS 64
/* Between two walks: a few children in a hundred are forked during one. */
#define ITERATE_PAUSE_US 200
#define LOAD_PAUSE_US 2000
#define REOPEN_PAUSE_US 1000
#define LOADED_ALREADY "libm.so.6"

static const char *plugin;
static volatile int stop;
static int in_loader[3]; /* per thread: inside dl_iterate_phdr, dlopen or dlclose */
static void *(*volatile do_malloc)(size_t) = malloc;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int count_module(struct dl_phdr_info *, size_t, void *data)
{
    ++*(int *)data;
    return 0;
}

static void *iterate(void *arg)
{
    int *flag = (int *)arg;
    while (!stop) {
        int n = 0;
        __atomic_store_n(flag, 1, __ATOMIC_SEQ_CST);
        dl_iterate_phdr(count_module, &n);
        __atomic_store_n(flag, 0, __ATOMIC_SEQ_CST);
        if (n == 0)
            handshake_die("dl_iterate_phdr saw no module");
        usleep(ITERATE_PAUSE_US);
    }
    return NULL;
}

__attribute__((noinline)) static void throw_one(int i)
{
    throw std::runtime_error(i % 2 ? "odd" : "even");
}

static int throw_and_catch(int n)
{
    int caught = 0;
    for (int i = 0; i < n; i++) {
        try {
            throw_one(i);
        } catch (const std::exception &) {
            caught++;
        }
    }
    return caught;
}

static void *thrower(void *)
{
    while (!stop)
        if (throw_and_catch(10) != 10)
            handshake_die("an exception was not caught");
    return NULL;
}

static void *allocator(void *)
{
    void *b[32] = {0};
    for (unsigned i = 0; !stop; i++) {
        free(b[i % 32]);
        b[i % 32] = do_malloc(16 + (i % 64) * 24);
        handshake_touch(b[i % 32], 16);
    }
    for (int i = 0; i < 32; i++)
        free(b[i]);
    return NULL;
}

static void *loader(void *)
{
    while (!stop) {
        __atomic_store_n(&in_loader[2], 1, __ATOMIC_SEQ_CST);
        void *h = dlopen(plugin, RTLD_NOW);
        if (!h)
            handshake_die(dlerror());
        dlclose(h);
        __atomic_store_n(&in_loader[2], 0, __ATOMIC_SEQ_CST);
        usleep(LOAD_PAUSE_US);
    }
    return NULL;
}

/* dlopen of a library loaded already: glibc's part leaves a fork child
 * nothing held; only what the sampler's wrapper does after it could. */
static void *reopener(void *)
{
    while (!stop) {
        void *h = dlopen(LOADED_ALREADY, RTLD_NOW);
        if (!h)
            handshake_die(dlerror());
        dlclose(h);
        usleep(REOPEN_PAUSE_US);
    }
    return NULL;
}

/* What a child does; its exit status: 0, or what failed. */
static int child(pid_t parent)
{
    /* Gone with the parent: a test that gives up leaves no child behind. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        return 7;
    int inherited = __atomic_load_n(&in_loader[0], __ATOMIC_SEQ_CST) ||
                    __atomic_load_n(&in_loader[1], __ATOMIC_SEQ_CST) ||
                    __atomic_load_n(&in_loader[2], __ATOMIC_SEQ_CST);
    void *b[CHILD_BLOCKS];
    for (int i = 0; i < CHILD_BLOCKS; i++) {
        b[i] = do_malloc(32 + (size_t)i * 40);
        handshake_touch(b[i], 32);
    }
    if (!inherited) {
        void *h = dlopen(plugin, RTLD_NOW);
        if (!h)
            return 3;
        void (*run)(int) = (void (*)(int))dlsym(h, "dlalloc_run");
        if (!run)
            return 4;
        run(4);
        dlclose(h);
        int n = 0;
        dl_iterate_phdr(count_module, &n);
        if (n == 0)
            return 5;
    }
    if (throw_and_catch(20) != 20)
        return 6;
    for (int i = 0; i < CHILD_BLOCKS; i++)
        free(b[i]);
    return inherited ? 100 : 0;
}

/* The children alive, and when each was forked. */
static pid_t live[MAX_LIVE];
static double born[MAX_LIVE];
static unsigned long exited, failed, hung, inherited;

/* Prints a stuck child's mask and where its threads are. */
static void report_hung(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, "SigBlk:", 7) == 0)
            printf("hung %d %s", (int)pid, line);
    if (f)
        fclose(f);
    snprintf(path, sizeof(path), "/proc/%d/stack", (int)pid);
    f = fopen(path, "r");
    while (f && fgets(line, sizeof(line), f))
        printf("  stack %d %s", (int)pid, line);
    if (f)
        fclose(f);
    fflush(stdout);
}

static void reaped(pid_t pid, int status)
{
    for (int i = 0; i < MAX_LIVE; i++)
        if (live[i] == pid) {
            live[i] = 0;
            if (WIFEXITED(status) && WEXITSTATUS(status) == 100) {
                inherited++;
                exited++;
            } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
                exited++;
            } else if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)) {
                failed++;
                printf("failed %d status 0x%x\n", (int)pid, status);
                fflush(stdout);
            }
        }
}

/* Reaps what exited, kills what is past its deadline; the free slot, or -1. */
static int reap(void)
{
    int status, free_slot = -1;
    pid_t pid;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
        reaped(pid, status);
    double t = now_s();
    for (int i = 0; i < MAX_LIVE; i++) {
        if (live[i] && t - born[i] > CHILD_DEADLINE_S) {
            report_hung(live[i]);
            hung++;
            kill(live[i], SIGKILL);
            waitpid(live[i], &status, 0);
            live[i] = 0;
        }
        if (!live[i])
            free_slot = i;
    }
    return free_slot;
}

int main(int argc, char **argv)
{
    if (argc < 3)
        handshake_die("usage: fork_churn SECONDS PLUGIN");
    double seconds = atof(argv[1]);
    plugin = argv[2];
    handshake_ready();
    if (!handshake_wait_line())
        return 1;
    pthread_t t[7];
    pthread_create(&t[0], NULL, iterate, &in_loader[0]);
    pthread_create(&t[1], NULL, iterate, &in_loader[1]);
    pthread_create(&t[2], NULL, thrower, NULL);
    pthread_create(&t[3], NULL, thrower, NULL);
    pthread_create(&t[4], NULL, allocator, NULL);
    pthread_create(&t[5], NULL, loader, NULL);
    pthread_create(&t[6], NULL, reopener, NULL);
    unsigned long forks = 0, vforks = 0;
    pid_t parent = getpid();
    double end = now_s() + seconds;
    while (now_s() < end) {
        int slot = reap();
        if (slot >= 0 && (forks + vforks) % VFORK_EVERY == VFORK_EVERY - 1) {
            pid_t pid = vfork();
            if (pid == 0) {
                execl("/bin/true", "true", (char *)NULL);
                _exit(127);
            }
            if (pid > 0) {
                vforks++;
                live[slot] = pid;
                born[slot] = now_s();
            }
        } else if (slot >= 0) {
            pid_t pid = fork();
            if (pid == 0)
                _exit(child(parent));
            if (pid > 0) {
                forks++;
                live[slot] = pid;
                born[slot] = now_s();
            }
        }
        usleep(FORK_EVERY_US);
    }
    stop = 1;
    for (int i = 0; i < 7; i++)
        pthread_join(t[i], NULL);
    for (;;) {
        reap();
        int any = 0;
        for (int i = 0; i < MAX_LIVE; i++)
            any |= live[i] != 0;
        if (!any)
            break;
        usleep(10000);
    }
    printf("forks %lu vforks %lu exited %lu failed %lu hung %lu inherited %lu\n", forks, vforks,
           exited, failed, hung, inherited);
    fflush(stdout);
    handshake_done();
    handshake_wait_line();
    return 0;
}
