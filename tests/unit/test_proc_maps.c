/*
 * test_proc_maps.c - the /proc/PID/maps parser on literal text and on this
 * process's own maps.
 */
#include "check.h"
#include "proc_maps.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* One line of every kind the kernel prints, padded as it pads them. */
static const char SAMPLE[] =
    "55d0c0a00000-55d0c0a02000 r--p 00000000 fd:01 1835021                    /usr/bin/cat\n"
    "55d0c0a02000-55d0c0a07000 r-xp 00002000 fd:01 1835021                    /usr/bin/cat\n"
    "55d0c1c4e000-55d0c1c6f000 rw-p 00000000 00:00 0                          [heap]\n"
    "7f1e2c000000-7f1e2c021000 rw-p 00000000 00:00 0 \n"
    "7f1e2c021000-7f1e30000000 ---p 00000000 00:00 0\n"
    "7f1e30000000-7f1e30001000 r--s ffffffffff000000 103:0a 42  /tmp/dir with spaces/a b.so\n"
    "7f1e30001000-7f1e30002000 rw-s 00000000 00:05 7  /memfd:jit (deleted)\n"
    "7f1e30002000-7f1e30003000 r-xp 00001000 08:02 99  /opt/old lib.so (deleted)\n"
    "7ffd5a1f0000-7ffd5a211000 rw-p 00000000 00:00 0                          [stack]\n"
    "7ffd5a3c6000-7ffd5a3c8000 r-xp 00000000 00:00 0                          [vdso]\n"
    "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]";

static void every_kind_of_line_parses(void)
{
    struct proc_maps m = {0};

    CHECK_INT_EQ(proc_maps_parse(SAMPLE, strlen(SAMPLE), &m), 0);
    CHECK_INT_EQ(m.n, 11);
    if (m.n != 11)
        goto out;

    CHECK_U64_EQ(m.v[1].start, 0x55d0c0a02000);
    CHECK_U64_EQ(m.v[1].end, 0x55d0c0a07000);
    CHECK_U64_EQ(m.v[1].offset, 0x2000);
    CHECK_U64_EQ(m.v[1].inode, 1835021);
    CHECK_INT_EQ(m.v[1].dev_major, 0xfd);
    CHECK_INT_EQ(m.v[1].dev_minor, 1);
    CHECK(m.v[1].readable && !m.v[1].writable && m.v[1].executable && !m.v[1].shared);
    CHECK(!m.v[1].deleted);
    CHECK_STR_EQ(m.v[1].path, "/usr/bin/cat");
    CHECK(proc_mapping_is_file(&m.v[1]));

    CHECK_STR_EQ(m.v[2].path, "[heap]");
    CHECK(!proc_mapping_is_file(&m.v[2]));
    CHECK_STR_EQ(m.v[3].path, "");
    CHECK_STR_EQ(m.v[4].path, "");
    CHECK(!m.v[4].readable && !m.v[4].writable && !m.v[4].executable);
    CHECK(!proc_mapping_is_file(&m.v[4]));

    CHECK_STR_EQ(m.v[5].path, "/tmp/dir with spaces/a b.so");
    CHECK_U64_EQ(m.v[5].offset, 0xffffffffff000000);
    CHECK_INT_EQ(m.v[5].dev_major, 0x103);
    CHECK_INT_EQ(m.v[5].dev_minor, 0xa);
    CHECK(m.v[5].shared && !m.v[5].writable);

    CHECK_STR_EQ(m.v[6].path, "/memfd:jit");
    CHECK(m.v[6].deleted);
    CHECK_STR_EQ(m.v[7].path, "/opt/old lib.so");
    CHECK(m.v[7].deleted);
    CHECK_U64_EQ(m.v[7].offset, 0x1000);

    CHECK_STR_EQ(m.v[8].path, "[stack]");
    CHECK_STR_EQ(m.v[9].path, "[vdso]");
    CHECK(!proc_mapping_is_file(&m.v[9]));
    CHECK_U64_EQ(m.v[10].start, 0xffffffffff600000);
    CHECK_STR_EQ(m.v[10].path, "[vsyscall]");
out:
    proc_maps_free(&m);
    CHECK(m.v == NULL && m.n == 0);
}

static void malformed_lines_are_einval(void)
{
    static const char *const bad[] = {
        "garbage\n",
        "1000-2000 r-xp 00000000 fd:01\n",             /* no inode */
        "1000 r-xp 00000000 fd:01 5 /x\n",             /* no end */
        "2000-1000 r-xp 00000000 fd:01 5 /x\n",        /* end before start */
        "1000-2000 rwzp 00000000 fd:01 5 /x\n",        /* bad permission */
        "1000-2000 r-xp 00000000 fd01 5 /x\n",         /* no colon in dev */
        "1000-2000 r-xp 00000000 fd:01 5x /x\n",       /* junk after inode */
        "1000-2000 r-xp 10000000000000000 fd:01 5 /x", /* offset overflows */
        "1000-2000 r-xp 0 fd:01 5 /x\n\n",             /* empty line */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct proc_maps m = {0};
        int rc = proc_maps_parse(bad[i], strlen(bad[i]), &m);
        if (rc != -EINVAL)
            fprintf(stderr, "line %zu: \"%s\"\n", i, bad[i]);
        CHECK_INT_EQ(rc, -EINVAL);
        CHECK(m.v == NULL && m.n == 0);
    }
    struct proc_maps m = {0};
    CHECK_INT_EQ(proc_maps_parse("", 0, &m), 0);
    CHECK_INT_EQ(m.n, 0);
    proc_maps_free(&m);
}

static void find_respects_the_boundaries(void)
{
    /* Unsorted on purpose, with a gap between 0x3000 and 0x5000. */
    static const char text[] = "5000-6000 r--p 00000000 00:00 0\n"
                               "1000-2000 r--p 00000000 00:00 0\n"
                               "2000-3000 r--p 00000000 00:00 0\n";
    struct proc_maps m = {0};

    CHECK_INT_EQ(proc_maps_parse(text, strlen(text), &m), 0);
    CHECK_INT_EQ(m.n, 3);
    CHECK(proc_maps_find(&m, 0) == NULL);
    CHECK(proc_maps_find(&m, 0xfff) == NULL);
    CHECK(proc_maps_find(&m, 0x1000) == &m.v[0]);
    CHECK(proc_maps_find(&m, 0x1fff) == &m.v[0]);
    CHECK(proc_maps_find(&m, 0x2000) == &m.v[1]);
    CHECK(proc_maps_find(&m, 0x2fff) == &m.v[1]);
    CHECK(proc_maps_find(&m, 0x3000) == NULL);
    CHECK(proc_maps_find(&m, 0x4fff) == NULL);
    CHECK(proc_maps_find(&m, 0x5000) == &m.v[2]);
    CHECK(proc_maps_find(&m, 0x5fff) == &m.v[2]);
    CHECK(proc_maps_find(&m, 0x6000) == NULL);
    CHECK(proc_maps_find(&m, UINT64_MAX) == NULL);
    proc_maps_free(&m);

    struct proc_maps empty = {0};
    CHECK(proc_maps_find(&empty, 0x1000) == NULL);
}

/* A function whose address must fall in an executable mapping of this binary. */
__attribute__((noinline)) int a_function_in_the_test_binary(int x)
{
    return x + 7;
}

static void a_line_overlapping_an_earlier_one_replaces_it(void)
{
    /*
     * The kernel prints maps a page at a time; a VMA merged with its
     * neighbour between two reads shows up before (first line) and after
     * (second line). The later line wins, and find() stays right.
     */
    static const char merged[] = "1000-2000 r--p 00000000 00:00 0 /old\n"
                                 "1000-4000 r--p 00000000 00:00 0 /new\n"
                                 "5000-6000 r--p 00000000 00:00 0 /next\n";
    struct proc_maps m = {0};
    CHECK_INT_EQ(proc_maps_parse(merged, strlen(merged), &m), 0);
    CHECK_INT_EQ(m.n, 2);
    if (m.n == 2) {
        CHECK_STR_EQ(m.v[0].path, "/new");
        CHECK_STR_EQ(m.v[1].path, "/next");
        CHECK(proc_maps_find(&m, 0x3fff) == &m.v[0]);
    }
    proc_maps_free(&m);

    /* Out of order as well: the line read later still wins. */
    static const char unsorted[] = "3000-4000 r--p 00000000 00:00 0 /a\n"
                                   "0000-3800 r--p 00000000 00:00 0 /b\n";
    CHECK_INT_EQ(proc_maps_parse(unsorted, strlen(unsorted), &m), 0);
    CHECK_INT_EQ(m.n, 1);
    if (m.n == 1)
        CHECK_STR_EQ(m.v[0].path, "/b");
    CHECK(proc_maps_find(&m, 0x3900) == NULL);
    proc_maps_free(&m);
}

static void own_maps_hold_own_code(void)
{
    struct proc_maps m = {0};
    char exe[PATH_MAX];
    uint64_t addr = (uint64_t)(uintptr_t)&a_function_in_the_test_binary;

    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    CHECK(n > 0);
    exe[n > 0 ? n : 0] = '\0';
    CHECK_INT_EQ(proc_maps_read(getpid(), &m), 0);
    CHECK(m.n > 5);
    const struct proc_mapping *pm = proc_maps_find(&m, addr);
    CHECK(pm != NULL);
    if (pm) {
        CHECK_STR_EQ(pm->path, exe);
        CHECK(pm->executable && pm->readable && !pm->writable);
        CHECK(pm->inode != 0);
        CHECK(proc_mapping_is_file(pm));
    }
    for (size_t i = 1; i < m.n; i++)
        CHECK(m.v[i - 1].end <= m.v[i].start);
    pm = proc_maps_find(&m, (uint64_t)(uintptr_t)&n);
    CHECK(pm != NULL);
    if (pm)
        CHECK_STR_EQ(pm->path, "[stack]");
    proc_maps_free(&m);
}

static void a_large_maps_file_is_read_to_the_end(void)
{
    /* Alternating protections keep the kernel from merging the pages into one
     * VMA: 4096 lines of ~50 bytes is several times the first read buffer. */
    enum { PAGES = 4096 };
    long page = sysconf(_SC_PAGESIZE);
    struct proc_maps m = {0};
    char *base = mmap(NULL, (size_t)page * PAGES, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    CHECK(base != MAP_FAILED);
    if (base == MAP_FAILED)
        return;
    for (size_t i = 0; i < PAGES; i += 2)
        mprotect(base + i * (size_t)page, (size_t)page, PROT_NONE);
    CHECK_INT_EQ(proc_maps_read(getpid(), &m), 0);
    CHECK(m.n >= PAGES);
    const struct proc_mapping *last =
        proc_maps_find(&m, (uint64_t)(uintptr_t)base + (uint64_t)page * PAGES - 1);
    CHECK(last != NULL);
    if (last) {
        CHECK(last->readable);
        CHECK_U64_EQ(last->end - last->start, page);
    }
    proc_maps_free(&m);
    munmap(base, (size_t)page * PAGES);
}

static void a_missing_pid_is_esrch(void)
{
    struct proc_maps m = {0};

    /* A child that has exited and been reaped leaves a pid nothing uses. */
    pid_t pid = fork();
    if (pid == 0)
        _exit(0);
    CHECK(pid > 0);
    waitpid(pid, NULL, 0);
    CHECK_INT_EQ(proc_maps_read(pid, &m), -ESRCH);
    CHECK_INT_EQ(proc_maps_read(0, &m), -EINVAL);
    CHECK(m.v == NULL);
}

int main(void)
{
    RUN_TEST(every_kind_of_line_parses);
    RUN_TEST(malformed_lines_are_einval);
    RUN_TEST(find_respects_the_boundaries);
    RUN_TEST(a_line_overlapping_an_earlier_one_replaces_it);
    RUN_TEST(own_maps_hold_own_code);
    RUN_TEST(a_large_maps_file_is_read_to_the_end);
    RUN_TEST(a_missing_pid_is_esrch);
    return check_exit_code();
}
