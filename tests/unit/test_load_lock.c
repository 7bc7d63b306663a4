/*
 * test_load_lock.c - daemon/inject/load_lock.c: glibc's load lock found by
 * its shape in `_rtld_global`, checked against this very process's glibc
 * (inside dl_iterate_phdr, the lock after it, the list's write lock, is
 * held by this thread: so the pair found is the loader's), and shapes
 * that are absent or ambiguous refused.
 */
#include <errno.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "check.h"
#include "load_lock.h"

/* The prefix of glibc's pthread_mutex_t. */
struct mutex_prefix {
    int lock;
    unsigned count;
    int owner;
    unsigned nusers;
    int kind;
};

struct seen {
    uint64_t lock;
    int load_owner, write_owner, write_held;
};

static int look_inside(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)info;
    (void)size;
    struct seen *s = data;
    const struct mutex_prefix *load = (const struct mutex_prefix *)s->lock;
    const struct mutex_prefix *write = (const struct mutex_prefix *)(s->lock + 40);
    s->load_owner = load->owner;
    s->write_owner = write->owner;
    s->write_held = write->lock;
    return 1;
}

static void the_lock_found_is_this_glibc_s_load_lock(void)
{
    struct load_lock_place p;
    char err[256] = "";
    int e = load_lock_find(getpid(), &p, err, sizeof(err));
    CHECK_INT_EQ(e, 0);
    if (e)
        fprintf(stderr, "  %s\n", err);
    CHECK(p.lock != 0);
    if (!p.lock)
        return;
    struct seen s = {.lock = p.lock};
    dl_iterate_phdr(look_inside, &s);
    CHECK_INT_EQ(s.write_owner, gettid());
    CHECK(s.write_held != 0);
    CHECK(s.load_owner != gettid());
    const struct mutex_prefix *load = (const struct mutex_prefix *)p.lock;
    CHECK_INT_EQ(load->kind & 0x7f, 1);
    CHECK_INT_EQ(load->lock, 0);
}

static void the_executable_s_program_headers_are_the_kernel_s(void)
{
    struct load_lock_place p;
    char err[256];
    CHECK_INT_EQ(load_lock_find(getpid(), &p, err, sizeof(err)), 0);
    CHECK_U64_EQ(p.exe_phdr, getauxval(AT_PHDR));
    CHECK_U64_EQ(p.exe_phnum, getauxval(AT_PHNUM));
}

/* The count of namespaces, then two recursive mutexes, at `at`. */
static void put_shape(uint8_t *buf, size_t at)
{
    uint64_t one = 1;
    int kind = 1;
    memcpy(buf + at, &one, sizeof(one));
    memcpy(buf + at + 8 + 16, &kind, sizeof(kind));
    memcpy(buf + at + 8 + 40 + 16, &kind, sizeof(kind));
}

static void a_shape_absent_or_seen_twice_is_refused(void)
{
    static uint8_t buf[4096];
    memset(buf, 0, sizeof(buf));
    CHECK_INT_EQ(load_lock_scan(buf, sizeof(buf)), -ENOENT);
    put_shape(buf, 1024);
    CHECK_INT_EQ(load_lock_scan(buf, sizeof(buf)), 1024 + 8);
    /* One mutex alone after a count is not the pair. */
    uint64_t two = 2;
    int kind = 1;
    memcpy(buf + 2048, &two, sizeof(two));
    memcpy(buf + 2048 + 8 + 16, &kind, sizeof(kind));
    CHECK_INT_EQ(load_lock_scan(buf, sizeof(buf)), 1024 + 8);
    put_shape(buf, 3000);
    CHECK_INT_EQ(load_lock_scan(buf, sizeof(buf)), -EEXIST);
    /* Cut short before the second mutex ends: not found. */
    CHECK_INT_EQ(load_lock_scan(buf, 1024 + 8 + 40 + 20), -ENOENT);
}

int main(void)
{
    the_lock_found_is_this_glibc_s_load_lock();
    the_executable_s_program_headers_are_the_kernel_s();
    a_shape_absent_or_seen_twice_is_refused();
    return check_exit_code();
}
