/*
 * test_safe_open.c - opens of paths a target controls (process/safe_open.c)
 * on real files in a directory made for the test that stands for a
 * process's root: a symlink out of it stays inside, a FIFO and a device
 * node are refused without blocking or being opened, and a file its
 * reader could not read, or too large, is refused.
 * tests/integration/test_hostile.py does it end to end through debug links.
 */
#include "check.h"
#include "safe_open.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

static char root[] = "/tmp/heapprof-safe-open-XXXXXX";

/* Writes `text` to ROOT/`name` with `mode`. */
static void make_file(const char *name, const char *text, mode_t mode)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", root, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    CHECK(fd >= 0);
    CHECK_INT_EQ(write(fd, text, strlen(text)), (int)strlen(text));
    close(fd);
    CHECK_INT_EQ(chmod(path, mode), 0);
}

/* safe_open_in_root(root, name) for anyone, closed; its result. */
static int try_open(const char *name, const struct safe_open_rule *r)
{
    struct stat st;
    int fd = safe_open_in_root(root, name, r, &st);
    if (fd >= 0)
        close(fd);
    return fd < 0 ? fd : 0;
}

static const struct safe_open_rule anyone = {.max_bytes = 1 << 20};

static void a_regular_file_inside_the_root_opens(void)
{
    make_file("plain", "hello", 0644);
    CHECK_INT_EQ(try_open("plain", &anyone), 0);
    CHECK_INT_EQ(try_open("/plain", &anyone), 0);
}

static void an_absolute_symlink_resolves_inside_the_root(void)
{
    char link[PATH_MAX];
    snprintf(link, sizeof(link), "%s/escape", root);
    CHECK_INT_EQ(symlink("/etc/passwd", link), 0);
    /* /etc/passwd exists in ours, not in this root. */
    CHECK_INT_EQ(try_open("escape", &anyone), -ENOENT);
    CHECK_INT_EQ(try_open("../../../../etc/passwd", &anyone), -ENOENT);
}

static void a_fifo_and_a_device_are_refused_without_blocking(void)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/fifo", root);
    CHECK_INT_EQ(mkfifo(path, 0666), 0);
    CHECK_INT_EQ(try_open("fifo", &anyone), -ENOENT); /* a blocking open would hang here */
    snprintf(path, sizeof(path), "%s/null", root);
    CHECK_INT_EQ(mknod(path, S_IFCHR | 0666, makedev(1, 3)), 0);
    CHECK_INT_EQ(try_open("null", &anyone), -ENOENT);
}

static void a_file_the_reader_could_not_read_is_refused(void)
{
    make_file("secret", "root only", 0600);
    struct safe_open_rule user = {.max_bytes = 1 << 20, .reader_uid = 65534, .reader_gid = 65534};
    CHECK_INT_EQ(try_open("secret", &user), -ENOENT);
    CHECK_INT_EQ(try_open("secret", &anyone), 0);
    CHECK_INT_EQ(try_open("plain", &user), 0); /* 0644: others may read */
}

static void a_file_over_the_bound_is_refused(void)
{
    make_file("big", "0123456789", 0644);
    struct safe_open_rule small = {.max_bytes = 9};
    CHECK_INT_EQ(try_open("big", &small), -EFBIG);
}

int main(void)
{
    CHECK(mkdtemp(root) != NULL);
    RUN_TEST(a_regular_file_inside_the_root_opens);
    RUN_TEST(an_absolute_symlink_resolves_inside_the_root);
    RUN_TEST(a_fifo_and_a_device_are_refused_without_blocking);
    RUN_TEST(a_file_the_reader_could_not_read_is_refused);
    RUN_TEST(a_file_over_the_bound_is_refused);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    CHECK_INT_EQ(system(cmd), 0);
    return check_exit_code();
}
