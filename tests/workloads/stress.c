/*
 * stress.c - 16 threads calling malloc, calloc, realloc, reallocarray,
 * posix_memalign, aligned_alloc and free as fast as they can, every block
 * filled with a pattern derived from its address and size and checked
 * before it is resized or freed, for test_inprocess.py: the in-process
 * sampler is injected into it and taken out again many times while it
 * runs, and it must never see a corrupted block or crash.
 *
 * Every few milliseconds one thread forks a child that does the same for a
 * while on its own and must exit 0: the child inherits whatever patch and
 * sampler the parent has at that moment.
 *
 * With the argument "idle" its 16 threads only sleep (a millisecond at a
 * time): the benchmark of stop times uses both kinds.
 *
 * Protocol: "ready PID", a line to start, a line to stop; then it checks
 * every block still held, prints "done" and exits 0 if all was well, 1
 * (with what went wrong on stderr) otherwise.
 */
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "handshake.h"

#define THREADS 16
#define SLOTS 256       /* blocks each thread holds at once */
#define MAX_SIZE 1024

static atomic_int stop;
static atomic_long failures;
static atomic_long operations;
static atomic_long forks_ok, forks_failed;

struct block {
    unsigned char *p;
    size_t size;
};

static unsigned char pattern(const unsigned char *p, size_t size, size_t i)
{
    return (unsigned char)(((uintptr_t)p >> 4) ^ size ^ (i * 131));
}

static void fill(unsigned char *p, size_t size)
{
    for (size_t i = 0; i < size; i++)
        p[i] = pattern(p, size, i);
}

/* Checks the pattern of `b`, laid down when it was at `was` (realloc moves it). */
static int intact(const struct block *b, const unsigned char *was, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (b->p[i] != pattern(was, b->size, i))
            return 0;
    return 1;
}

static void fail(const char *what)
{
    atomic_fetch_add(&failures, 1);
    write(2, what, strlen(what));
    write(2, "\n", 1);
}

static uint64_t next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Frees or resizes slot `b` after checking it, or allocates into it. */
static void step(struct block *b, uint64_t *rng)
{
    uint64_t r = next(rng);
    size_t size = 1 + (size_t)(r >> 20) % MAX_SIZE;
    if (b->p) {
        if (!intact(b, b->p, b->size))
            fail("stress: a block's pattern was corrupted");
        if ((r & 7) == 0) {
            unsigned char *was = b->p;
            unsigned char *p = (r & 8) ? realloc(b->p, size) : reallocarray(b->p, 1, size);
            if (!p) {
                fail("stress: realloc failed");
                return;
            }
            size_t keep = size < b->size ? size : b->size;
            struct block moved = {p, b->size};
            if (!intact(&moved, was, keep))
                fail("stress: realloc lost the contents");
            b->p = p;
            b->size = size;
            fill(b->p, size);
        } else {
            free(b->p);
            b->p = NULL;
        }
        return;
    }
    void *p = NULL;
    switch (r % 5) {
    case 0:
        p = calloc(1, size);
        for (size_t i = 0; p && i < size; i++)
            if (((unsigned char *)p)[i] != 0)
                fail("stress: calloc memory not zero");
        break;
    case 1:
        if (posix_memalign(&p, 64, size) != 0)
            p = NULL;
        break;
    case 2:
        p = aligned_alloc(32, (size + 31) & ~(size_t)31);
        size = (size + 31) & ~(size_t)31;
        break;
    default:
        p = malloc(size);
    }
    if (!p) {
        fail("stress: allocation failed");
        return;
    }
    b->p = p;
    b->size = size;
    fill(b->p, size);
}

/* A forked child: the same work for a while, alone. */
static void child_work(uint64_t seed)
{
    static struct block blocks[SLOTS];
    memset(blocks, 0, sizeof(blocks));
    for (int i = 0; i < 20000; i++)
        step(&blocks[next(&seed) % SLOTS], &seed);
    for (int i = 0; i < SLOTS; i++) {
        if (blocks[i].p && !intact(&blocks[i], blocks[i].p, blocks[i].size))
            _exit(1);
        free(blocks[i].p);
    }
    _exit(0);
}

static void maybe_fork(uint64_t *rng)
{
    pid_t c = fork();
    if (c == 0)
        child_work(next(rng));
    int status;
    if (c < 0 || waitpid(c, &status, 0) != c || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        atomic_fetch_add(&forks_failed, 1);
        char what[96];
        snprintf(what, sizeof(what), "stress: a forked child failed (status 0x%x)",
                 c < 0 ? -1 : status);
        fail(what);
    } else {
        atomic_fetch_add(&forks_ok, 1);
    }
}

static void *sleeper(void *arg)
{
    (void)arg;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        struct timespec ms = {0, 1000000};
        nanosleep(&ms, NULL);
    }
    return NULL;
}

static void *worker(void *arg)
{
    uintptr_t id = (uintptr_t)arg;
    uint64_t rng = 0x9e3779b97f4a7c15ULL * (id + 1);
    struct block *blocks = calloc(SLOTS, sizeof(*blocks));
    if (!blocks) {
        fail("stress: no memory for the slots");
        return NULL;
    }
    long ops = 0;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        step(&blocks[next(&rng) % SLOTS], &rng);
        if (++ops % 20000 == 0 && id == 0)
            maybe_fork(&rng);
    }
    for (int i = 0; i < SLOTS; i++) {
        if (blocks[i].p && !intact(&blocks[i], blocks[i].p, blocks[i].size))
            fail("stress: a block's pattern was corrupted at the end");
        free(blocks[i].p);
    }
    free(blocks);
    atomic_fetch_add(&operations, ops);
    return NULL;
}

int main(int argc, char **argv)
{
    int idle = argc > 1 && strcmp(argv[1], "idle") == 0;
    handshake_ready();
    if (!handshake_wait_line())
        return 0;
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        if (pthread_create(&t[i], NULL, idle ? sleeper : worker, (void *)i) != 0)
            handshake_die("stress: pthread_create failed");
    handshake_wait_line();
    atomic_store(&stop, 1);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    char line[160];
    snprintf(line, sizeof(line), "stress: %ld operations, %ld forks ok, %ld failures\n",
             atomic_load(&operations), atomic_load(&forks_ok), atomic_load(&failures));
    write(2, line, strlen(line));
    handshake_done();
    handshake_wait_line();
    return atomic_load(&failures) ? 1 : 0;
}
