/*
 * test_perf_map.c - perf maps of JIT runtimes (daemon/symbols/perf_map.c):
 * the line format as node and the JVM write it, overlaps, bounds, and the
 * file of a real child process: found under its pid, read on as it grows,
 * read afresh when replaced, and refused when it is a symlink, stale or
 * another user's.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "perf_map.h"
#include "proc_info.h"

/* The name at addr, or "" if none. */
static const char *name_at(struct perf_map *m, uint64_t addr)
{
    static char buf[PERF_MAP_MAX_NAME];
    if (perf_map_lookup(m, addr, buf, sizeof(buf)) != 1)
        buf[0] = '\0';
    return buf;
}

static void lines_of_node_and_the_jvm_are_read_and_a_partial_line_is_left(void)
{
    static const char text[] = "18c4000 300 Builtin:DeoptimizationEntry_Eager\n"
                               "7f5441fc8340 3c8 JS:*allocateNamedBuffers /tmp/buf.js:3:30\n"
                               "0x00007f16a8ec71c0 0x0000000000000270 int java.lang.Object.hashCode()\r\n"
                               "not a symbol line\n"
                               "7f0000000000 0 zero sized\n"
                               "7f0000001000 10\n"
                               "7f0000002000 20 partial";
    struct perf_map *m = perf_map_new(1);
    long used = perf_map_parse(m, text, strlen(text));
    perf_map_sort(m);
    CHECK_INT_EQ(used, (long)(strrchr(text, '\n') - text) + 1);
    CHECK_INT_EQ(m->n, 3);
    CHECK_INT_EQ(m->bad_lines, 3);
    CHECK_STR_EQ(name_at(m, 0x18c4000), "Builtin:DeoptimizationEntry_Eager");
    CHECK_STR_EQ(name_at(m, 0x18c42ff), "Builtin:DeoptimizationEntry_Eager");
    CHECK_STR_EQ(name_at(m, 0x18c4300), "");
    CHECK_STR_EQ(name_at(m, 0x7f5441fc8340 + 0x100), "JS:*allocateNamedBuffers /tmp/buf.js:3:30");
    CHECK_STR_EQ(name_at(m, 0x7f16a8ec71c0), "int java.lang.Object.hashCode()");
    CHECK_STR_EQ(name_at(m, 0x7f0000002000), ""); /* the partial line is not read yet */
    CHECK_STR_EQ(name_at(m, 0), "");
    CHECK_STR_EQ(name_at(m, UINT64_MAX), "");
    perf_map_free(m);
}

static void later_lines_win_where_code_overlaps(void)
{
    static const char text[] = "1000 100 old_big\n"
                               "1040 20 newer_inside\n"
                               "1000 10 newest_at_start\n";
    struct perf_map *m = perf_map_new(1);
    perf_map_parse(m, text, strlen(text));
    perf_map_sort(m);
    CHECK_STR_EQ(name_at(m, 0x1000), "newest_at_start");
    CHECK_STR_EQ(name_at(m, 0x1010), "old_big");
    CHECK_STR_EQ(name_at(m, 0x1045), "newer_inside");
    CHECK_STR_EQ(name_at(m, 0x1060), "old_big");
    CHECK_STR_EQ(name_at(m, 0x10ff), "old_big");
    CHECK_STR_EQ(name_at(m, 0x1100), "");
    perf_map_free(m);
}

static void long_names_are_cut_and_wrapping_ranges_refused(void)
{
    char text[2 * PERF_MAP_MAX_NAME + 64];
    int n = snprintf(text, sizeof(text), "2000 10 ");
    memset(text + n, 'x', 2 * PERF_MAP_MAX_NAME);
    n += 2 * PERF_MAP_MAX_NAME;
    n += snprintf(text + n, sizeof(text) - (size_t)n, "\nffffffffffffff00 200 wraps\n");
    struct perf_map *m = perf_map_new(1);
    perf_map_parse(m, text, (size_t)n);
    perf_map_sort(m);
    CHECK_INT_EQ(strlen(name_at(m, 0x2000)), PERF_MAP_MAX_NAME - 1);
    CHECK_STR_EQ(name_at(m, 0xffffffffffffff80), "");
    CHECK_INT_EQ(m->bad_lines, 1);
    perf_map_free(m);
}

/* A child that waits for a byte on a pipe; its pid, and the pipe's write end. */
static pid_t start_child(int *release)
{
    int p[2];
    if (pipe(p) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        char c;
        close(p[1]);
        ssize_t got = read(p[0], &c, 1);
        _exit(got < 0);
    }
    close(p[0]);
    *release = p[1];
    return pid;
}

static void stop_child(pid_t pid, int release)
{
    close(release);
    waitpid(pid, NULL, 0);
}

static void write_file(const char *path, const char *text, const char *mode)
{
    FILE *f = fopen(path, mode);
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

static void the_map_of_a_process_is_read_on_as_it_grows_and_afresh_when_replaced(void)
{
    int release;
    pid_t pid = start_child(&release);
    CHECK(pid > 0);
    char path[64];
    snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)pid);
    write_file(path, "5000 100 first\n6000 100 sec", "w");
    struct perf_map_cache c;
    perf_map_cache_init(&c);
    struct perf_map *m = NULL;
    CHECK_INT_EQ(perf_map_get(&c, pid, &m), 0);
    if (m) {
        CHECK_STR_EQ(name_at(m, 0x5010), "first");
        CHECK_STR_EQ(name_at(m, 0x6010), "");
        CHECK_U64_EQ(m->read_to, strlen("5000 100 first\n"));
        perf_map_put(&c, m);
    }
    write_file(path, "ond\n7000 100 third\n", "a");
    CHECK_INT_EQ(perf_map_get(&c, pid, &m), 0);
    if (m) {
        CHECK_STR_EQ(name_at(m, 0x5010), "first");
        CHECK_STR_EQ(name_at(m, 0x6010), "second");
        CHECK_STR_EQ(name_at(m, 0x7010), "third");
        CHECK_INT_EQ(m->lines, 3);
        perf_map_put(&c, m);
    }
    /* A new file under the name (a new inode): read from its start. */
    char tmp[80];
    snprintf(tmp, sizeof(tmp), "%s.new", path);
    write_file(tmp, "8000 100 replaced\n", "w");
    CHECK_INT_EQ(rename(tmp, path), 0);
    CHECK_INT_EQ(perf_map_get(&c, pid, &m), 0);
    if (m) {
        CHECK_STR_EQ(name_at(m, 0x5010), "");
        CHECK_STR_EQ(name_at(m, 0x8010), "replaced");
        perf_map_put(&c, m);
    }
    perf_map_cache_destroy(&c);
    unlink(path);
    stop_child(pid, release);
}

static void symlinks_stale_maps_and_other_users_maps_are_refused(void)
{
    int release;
    pid_t pid = start_child(&release);
    char path[64], target[64];
    snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)pid);
    snprintf(target, sizeof(target), "/tmp/perf-%d.target", (int)pid);
    struct perf_map_cache c;
    perf_map_cache_init(&c);
    struct perf_map *m = NULL;

    CHECK_INT_EQ(perf_map_get(&c, pid, &m), -ENOENT); /* none */

    write_file(target, "5000 100 secret\n", "w");
    CHECK_INT_EQ(symlink(target, path), 0);
    CHECK_INT_EQ(perf_map_get(&c, pid, &m), -ENOENT);
    unlink(path);

    /* Written before the process started: a runtime that had the pid before left it. */
    write_file(path, "5000 100 stale\n", "w");
    struct timeval old[2] = {{.tv_sec = 946684800}, {.tv_sec = 946684800}}; /* 2000-01-01 */
    CHECK_INT_EQ(utimes(path, old), 0);
    CHECK_INT_EQ(perf_map_get(&c, pid, &m), -ENOENT);

    /* Owned by neither root nor the process's owner (root here). */
    write_file(path, "5000 100 someone_elses\n", "w");
    CHECK_INT_EQ(chown(path, 4242, 4242), 0);
    CHECK_INT_EQ(perf_map_get(&c, pid, &m), -ENOENT);
    CHECK_INT_EQ(chown(path, 0, 0), 0);
    CHECK_INT_EQ(perf_map_get(&c, pid, &m), 0);
    if (m) {
        CHECK_STR_EQ(name_at(m, 0x5000), "someone_elses");
        perf_map_put(&c, m);
    }
    perf_map_cache_destroy(&c);
    unlink(path);
    unlink(target);
    stop_child(pid, release);
    CHECK_INT_EQ(perf_map_get(&c, pid, &m), -ESRCH);
}

static void a_process_knows_its_own_pid_in_its_namespace(void)
{
    pid_t ns;
    CHECK_INT_EQ(proc_ns_pid(getpid(), &ns), 0);
    CHECK_INT_EQ(ns, getpid()); /* the test runs in the initial pid namespace */
    CHECK_INT_EQ(proc_ns_pid(-1, &ns) < 0, 1);
}

int main(void)
{
    RUN_TEST(lines_of_node_and_the_jvm_are_read_and_a_partial_line_is_left);
    RUN_TEST(later_lines_win_where_code_overlaps);
    RUN_TEST(long_names_are_cut_and_wrapping_ranges_refused);
    if (geteuid() != 0) {
        fprintf(stderr, "FAIL: the file tests need root (chown, other users' files)\n");
        return 1;
    }
    RUN_TEST(the_map_of_a_process_is_read_on_as_it_grows_and_afresh_when_replaced);
    RUN_TEST(symlinks_stale_maps_and_other_users_maps_are_refused);
    RUN_TEST(a_process_knows_its_own_pid_in_its_namespace);
    return check_exit_code();
}
