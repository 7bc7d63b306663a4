/*
 * loader_hold.c - a process with one of its dynamic linker's locks held on
 * purpose, for test_loader_lock.py. Mode "dlopen": the load lock, by a
 * thread inside a dlopen whose constructor waits (slow_ctor.c); an attach
 * meanwhile must fall back with its reason. Mode "iterate": the list's
 * write lock, by a thread inside a dl_iterate_phdr callback that waits; an
 * attach meanwhile must not wait for it. Mode "dead": the load lock
 * marked held by a thread that is not in the process, as a fork child
 * would inherit it from a glibc that did not free it there (the lock is
 * found by its shape in `_rtld_global`, as daemon/inject/load_lock.c
 * does); an attach meanwhile must fall back at once. Every time, every
 * thread keeps its own signal mask. Another thread allocates all along, so that the
 * process visibly runs.
 *
 * Usage: loader_hold LIBRARY dlopen|iterate|dead. Protocol: "ready PID"; on a
 * line, takes the lock and prints "held" once it has it; on a line, lets
 * it go and prints "released"; on a line (or EOF), prints "ops N" (the
 * allocating thread's rounds) and "done", and exits.
 */
#include <dlfcn.h>
#include <link.h>
#include <string.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "handshake.h"

static void *(*volatile do_malloc)(size_t) = malloc;
static volatile int stop;
static volatile unsigned long ops;
static const char *library;

static void *allocate(void *arg)
{
    (void)arg;
    while (!stop) {
        void *p = do_malloc(100);
        handshake_touch(p, 100);
        free(p);
        ops++;
        usleep(100);
    }
    return NULL;
}

static void *load(void *arg)
{
    (void)arg;
    if (!dlopen(library, RTLD_NOW))
        handshake_die(dlerror());
    return NULL;
}

/* The descriptors of the "iterate" mode's wait, as slow_ctor.c's. */
static int iterate_in, iterate_wait;

/* Says it is in, then waits for a byte, as slow_ctor.c does. */
static int wait_inside(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)info;
    (void)size;
    (void)data;
    char c = 1;
    if (write(iterate_in, &c, 1) != 1)
        abort();
    while (recv(iterate_wait, &c, 1, 0) < 0)
        ;
    return 1;
}

/* glibc's pthread_mutex_t prefix, and a tid no thread has (pid_max is
 * at most 2^22). */
struct mutex_prefix {
    int lock;
    unsigned count;
    int owner;
    unsigned nusers;
    int kind;
};
#define NO_SUCH_TID 0x7ffffff0

/* glibc's _dl_load_lock: after the count of namespaces (1-16), the first
 * of two recursive mutexes. */
static struct mutex_prefix *load_lock(void)
{
    unsigned char *g = dlsym(RTLD_DEFAULT, "_rtld_global");
    for (size_t o = 0; g && o + 8 + 80 <= 16384; o += 8) {
        unsigned long nns;
        memcpy(&nns, g + o, sizeof(nns));
        struct mutex_prefix *a = (struct mutex_prefix *)(g + o + 8),
                            *b = (struct mutex_prefix *)(g + o + 48);
        if (nns >= 1 && nns <= 16 && (a->kind & 0x7f) == 1 && (b->kind & 0x7f) == 1)
            return a;
    }
    handshake_die("no _dl_load_lock found");
    return NULL;
}

static void *iterate(void *arg)
{
    (void)arg;
    dl_iterate_phdr(wait_inside, NULL);
    return NULL;
}

/* Says the loader is free again, waits for the test's word, stops the
 * allocating thread and reports how many calls it made. */
static int finish(pthread_t allocator)
{
    printf("released\n");
    fflush(stdout);
    handshake_wait_line();
    stop = 1;
    pthread_join(allocator, NULL);
    printf("ops %lu\n", ops);
    fflush(stdout);
    handshake_done();
    return 0;
}

/* Mode "dead": the load lock held by nobody there is, then given back. */
static int dead_owner(void)
{
    struct mutex_prefix *m = load_lock();
    pthread_t allocator;
    pthread_create(&allocator, NULL, allocate, NULL);
    handshake_ready();
    if (!handshake_wait_line())
        return 1;
    int free_word = 0;
    if (!__atomic_compare_exchange_n(&m->lock, &free_word, 1, 0, __ATOMIC_ACQUIRE,
                                     __ATOMIC_RELAXED))
        handshake_die("the load lock is held");
    m->owner = NO_SUCH_TID;
    m->count = 1;
    printf("held\n");
    fflush(stdout);
    if (!handshake_wait_line())
        return 1;
    m->owner = 0;
    m->count = 0;
    __atomic_store_n(&m->lock, 0, __ATOMIC_RELEASE);
    void *h = dlopen(library, RTLD_NOW); /* the loader works again */
    if (!h)
        handshake_die(dlerror());
    return finish(allocator);
}

int main(int argc, char **argv)
{
    if (argc < 3 ||
        (strcmp(argv[2], "dlopen") && strcmp(argv[2], "iterate") && strcmp(argv[2], "dead")))
        handshake_die("usage: loader_hold LIBRARY dlopen|iterate|dead");
    library = argv[1];
    if (strcmp(argv[2], "dead") == 0)
        return dead_owner();
    int by_dlopen = strcmp(argv[2], "dlopen") == 0;
    int in[2], wait[2];
    if (pipe(in) || socketpair(AF_UNIX, SOCK_STREAM, 0, wait))
        handshake_die("pipe");
    char num[16];
    snprintf(num, sizeof(num), "%d", in[1]);
    setenv("SLOW_CTOR_IN", num, 1);
    snprintf(num, sizeof(num), "%d", wait[1]);
    setenv("SLOW_CTOR_WAIT", num, 1);
    iterate_in = in[1];
    iterate_wait = wait[1];
    pthread_t allocator, loader;
    pthread_create(&allocator, NULL, allocate, NULL);
    handshake_ready();
    if (!handshake_wait_line())
        return 1;
    pthread_create(&loader, NULL, by_dlopen ? load : iterate, NULL);
    char c;
    if (read(in[0], &c, 1) != 1)
        handshake_die("the lock was not taken");
    printf("held\n");
    fflush(stdout);
    if (!handshake_wait_line())
        return 1;
    if (write(wait[0], &c, 1) != 1)
        handshake_die("release");
    pthread_join(loader, NULL);
    return finish(allocator);
}
