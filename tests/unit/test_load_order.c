/*
 * test_load_order.c - the search order of real child processes: a dynamic
 * /bin/sleep, the same with LD_PRELOAD, and a static executable built here
 * (which has no r_debug and takes the maps fallback).
 */
#include "check.h"
#include "load_order.h"
#include "proc_maps.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define JEMALLOC "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"

/* How long a child may take to reach its sleep: generous for loaded CI machines. */
#define READY_TIMEOUT_MS 10000

/* Sleeps for `ms` milliseconds. */
static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* Starts `argv` with `preload` as LD_PRELOAD (or none); returns its pid. */
static pid_t spawn(char *const argv[], const char *preload)
{
    pid_t pid = fork();
    if (pid == 0) {
        if (preload)
            setenv("LD_PRELOAD", preload, 1);
        else
            unsetenv("LD_PRELOAD");
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

/* Whether the child is blocked in a syscall of its own, i.e. past the dynamic linker. */
static bool is_sleeping(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* The state follows the parenthesized command name. */
    const char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && p[2] == 'S';
}

/* Whether some mapping's path contains `needle`. */
static bool maps_have(const struct proc_maps *maps, const char *needle)
{
    for (size_t i = 0; i < maps->n; i++)
        if (strstr(maps->v[i].path, needle))
            return true;
    return false;
}

/*
 * Waits until the child sleeps with both `exe` and `lib` in its maps, and
 * fills `maps`. Waiting for `exe` matters: before execv the forked copy of
 * this test already has libc mapped and may be sleeping too.
 */
static int wait_ready(pid_t pid, const char *exe, const char *lib, struct proc_maps *maps)
{
    for (long waited = 0; waited < READY_TIMEOUT_MS; waited += 10) {
        if (proc_maps_read(pid, maps) == 0) {
            if (maps_have(maps, exe) && maps_have(maps, lib) && is_sleeping(pid))
                return 0;
            proc_maps_free(maps);
        }
        sleep_ms(10);
    }
    return -ETIMEDOUT;
}

/* Kills and reaps a child. */
static void stop(pid_t pid)
{
    if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    }
}

/* The index of the first object whose path ends in `suffix`, or -1. */
static long index_of(const struct load_order *lo, const char *suffix)
{
    for (size_t i = 0; i < lo->n; i++) {
        size_t a = strlen(lo->v[i].path), b = strlen(suffix);
        if (a >= b && strcmp(lo->v[i].path + a - b, suffix) == 0)
            return (long)i;
    }
    return -1;
}

/* The target of /proc/PID/exe. */
static void exe_of(pid_t pid, char *buf, size_t cap)
{
    char link[64];
    snprintf(link, sizeof(link), "/proc/%d/exe", (int)pid);
    ssize_t n = readlink(link, buf, cap - 1);
    buf[n > 0 ? n : 0] = '\0';
}

/* Checks what every listed object must satisfy: a path, its own first mapping. */
static void check_objects(const struct proc_maps *maps, const struct load_order *lo)
{
    for (size_t i = 0; i < lo->n; i++) {
        const struct proc_mapping *pm = lo->v[i].first_mapping;
        CHECK(pm >= maps->v && pm < maps->v + maps->n);
        CHECK_STR_EQ(lo->v[i].path, pm->path);
        CHECK(proc_mapping_is_file(pm));
        for (size_t j = 0; j < i; j++)
            CHECK(lo->v[j].first_mapping != pm);
    }
}

static void a_dynamic_process_lists_the_executable_then_libc(void)
{
    char *argv[] = {"/bin/sleep", "30", NULL};
    struct proc_maps maps = {0};
    struct load_order lo = {0};
    char exe[PATH_MAX];

    pid_t pid = spawn(argv, NULL);
    CHECK(pid > 0);
    CHECK_INT_EQ(wait_ready(pid, "bin/sleep", "libc.so.6", &maps), 0);
    exe_of(pid, exe, sizeof(exe));
    CHECK_INT_EQ(load_order_read(pid, &maps, &lo), 0);
    CHECK_INT_EQ(lo.from_linker, 1);
    CHECK(lo.n >= 3); /* sleep, libc, ld-linux */
    if (lo.n > 0) {
        CHECK_STR_EQ(lo.v[0].path, exe);
        /* A PIE is placed away from 0, and its bias is where its offset-0 mapping starts. */
        CHECK(lo.v[0].load_bias != 0);
        CHECK_U64_EQ(lo.v[0].load_bias, lo.v[0].first_mapping->start);
    }
    long libc = index_of(&lo, "/libc.so.6");
    CHECK(libc > 0);
    if (libc > 0)
        CHECK_U64_EQ(lo.v[libc].load_bias, lo.v[libc].first_mapping->start);
    CHECK(index_of(&lo, "ld-linux-x86-64.so.2") > 0);
    CHECK(index_of(&lo, "linux-vdso.so.1") < 0);
    check_objects(&maps, &lo);
    load_order_free(&lo);
    CHECK(lo.v == NULL && lo.n == 0);
    proc_maps_free(&maps);
    stop(pid);
}

static void a_preloaded_allocator_comes_before_libc(void)
{
    char *argv[] = {"/bin/sleep", "30", NULL};
    struct proc_maps maps = {0};
    struct load_order lo = {0};

    pid_t pid = spawn(argv, JEMALLOC);
    CHECK(pid > 0);
    CHECK_INT_EQ(wait_ready(pid, "bin/sleep", "libjemalloc", &maps), 0);
    CHECK_INT_EQ(load_order_read(pid, &maps, &lo), 0);
    CHECK_INT_EQ(lo.from_linker, 1);
    long jemalloc = index_of(&lo, "/libjemalloc.so.2");
    long libc = index_of(&lo, "/libc.so.6");
    CHECK(jemalloc > 0);
    CHECK(libc > 0);
    CHECK(jemalloc < libc);
    check_objects(&maps, &lo);
    load_order_free(&lo);
    proc_maps_free(&maps);
    stop(pid);
}

static void a_static_executable_falls_back_to_maps_order(void)
{
    char dir[] = "/tmp/heapprof_lo_XXXXXX", cmd[512], path[PATH_MAX];
    struct proc_maps maps = {0};
    struct load_order lo = {0};

    CHECK(mkdtemp(dir) != NULL);
    snprintf(cmd, sizeof(cmd),
             "cd %s && printf '#include <unistd.h>\\nint main(void) { pause(); }\\n' > s.c && "
             "gcc -static -o static s.c",
             dir);
    CHECK_INT_EQ(system(cmd), 0);
    snprintf(path, sizeof(path), "%s/static", dir);

    char *argv[] = {path, NULL};
    pid_t pid = spawn(argv, NULL);
    CHECK(pid > 0);
    CHECK_INT_EQ(wait_ready(pid, path, path, &maps), 0);
    CHECK_INT_EQ(load_order_read(pid, &maps, &lo), 0);
    CHECK_INT_EQ(lo.from_linker, 0);
    CHECK(lo.n >= 1);
    if (lo.n >= 1) {
        CHECK_STR_EQ(lo.v[0].path, path);
        CHECK_U64_EQ(lo.v[0].load_bias, 0); /* ET_EXEC */
    }
    check_objects(&maps, &lo);
    load_order_free(&lo);
    proc_maps_free(&maps);
    stop(pid);

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    CHECK_INT_EQ(system(cmd), 0);
}

static void a_vanished_process_is_esrch(void)
{
    struct proc_maps maps = {0};
    struct load_order lo = {0};

    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    CHECK(pid > 0);
    waitpid(pid, NULL, 0);
    CHECK_INT_EQ(load_order_read(pid, &maps, &lo), -ESRCH);
    CHECK(lo.v == NULL && lo.n == 0);
}

int main(void)
{
    RUN_TEST(a_dynamic_process_lists_the_executable_then_libc);
    RUN_TEST(a_preloaded_allocator_comes_before_libc);
    RUN_TEST(a_static_executable_falls_back_to_maps_order);
    RUN_TEST(a_vanished_process_is_esrch);
    return check_exit_code();
}
