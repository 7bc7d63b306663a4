/*
 * tailcalls.c - glibc's allocator functions that jump to one another
 * (reallocarray to realloc, realloc(NULL, n) to malloc), called by many
 * threads at once while others only yield the CPU, for test_exact.py: each
 * call must be counted once, at its caller, even when its thread is
 * switched out or moved to another CPU between the entries of the function
 * it called and the one that function jumped to.
 *
 * That is where a profiler that keeps its "last entry" per CPU loses track,
 * and where a return probe has put the uretprobe trampoline in place of the
 * caller's return address: a lost continuation shows up as a leaf in
 * [uprobes] (0x7fffffffdfff) or as an allocation counted twice.
 *
 * Each kind of call is made from its own function (the leaf the profile
 * must show), with a size of its own; every block is freed at once. One
 * goes through a function of the program that jumps to malloc
 * (tailcalls_jump.c), on which test_exact.py puts another tool's return
 * probe, as it does on one_round, whose return address then hides too. The
 * threads are made before "ready", so that their own allocations are not
 * in the profile: after "go" only the calls below allocate.
 *
 * With the argument "resize" each worker instead resizes one block of its
 * own with reallocarray(p, 1, n), ROUNDS times: glibc's reallocarray jumps
 * to realloc, which calls nothing else, so the profiler must see exactly
 * one continuation per call (its nested_calls counter).
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "handshake.h"

#define WORKERS 8
#define YIELDERS 4
#define ROUNDS 3000 /* per worker, of each of the four calls */

/* Sizes, one per caller (keep in step with test_exact.py). */
#define REALLOCARRAY_N 3
#define REALLOCARRAY_M 40 /* 120 bytes */
#define REALLOC_NULL_SIZE 200
#define MALLOC_SIZE 72
#define JUMP_SIZE 56

void *jump_to_malloc(size_t n); /* tailcalls_jump.c: jmp malloc */

static atomic_int started;
static atomic_int workers_left = WORKERS;

/* reallocarray(NULL, 3, 40): glibc jumps to realloc, which jumps to malloc. */
__attribute__((noinline)) void tail_reallocarray(void)
{
    void *p = reallocarray(NULL, REALLOCARRAY_N, REALLOCARRAY_M);
    handshake_touch(p, REALLOCARRAY_N * REALLOCARRAY_M);
    free(p);
}

/* realloc(NULL, 200): glibc jumps to malloc. */
__attribute__((noinline)) void tail_realloc_null(void)
{
    void *p = realloc(NULL, REALLOC_NULL_SIZE);
    handshake_touch(p, REALLOC_NULL_SIZE);
    free(p);
}

/* malloc(72): no jump; on a CPU another thread just left in the middle of one. */
__attribute__((noinline)) void tail_malloc(void)
{
    void *p = malloc(MALLOC_SIZE);
    handshake_touch(p, MALLOC_SIZE);
    free(p);
}

/* malloc(56) through jump_to_malloc, which jumps to it. */
__attribute__((noinline)) void tail_jump(void)
{
    void *p = jump_to_malloc(JUMP_SIZE);
    handshake_touch(p, JUMP_SIZE);
    free(p);
}

static void wait_for_go(void)
{
    while (!atomic_load(&started))
        sched_yield();
}

/* One call of each kind (a frame of its own, entered after "go"). */
__attribute__((noinline)) void one_round(void)
{
    tail_reallocarray();
    tail_realloc_null();
    tail_malloc();
    tail_jump();
}

static void *worker(void *arg)
{
    (void)arg;
    wait_for_go();
    for (int i = 0; i < ROUNDS; i++)
        one_round();
    atomic_fetch_sub(&workers_left, 1);
    return NULL;
}

/* The "resize" worker: one block, resized back and forth. The first
 * malloc may come before the profiler attaches; it is not a continuation. */
static void *resizer(void *arg)
{
    (void)arg;
    void *p = malloc(REALLOC_NULL_SIZE);
    handshake_touch(p, REALLOC_NULL_SIZE);
    wait_for_go();
    for (int i = 0; i < ROUNDS; i++) {
        size_t n = i & 1 ? REALLOC_NULL_SIZE : MALLOC_SIZE;
        p = reallocarray(p, 1, n);
        handshake_touch(p, n);
    }
    free(p);
    atomic_fetch_sub(&workers_left, 1);
    return NULL;
}

/* Keeps every CPU's run queue full, so that workers are switched out (and
 * moved between CPUs) at any point, in the middle of a call included. */
static void *yielder(void *arg)
{
    (void)arg;
    wait_for_go();
    while (atomic_load(&workers_left) > 0)
        sched_yield();
    return NULL;
}

int main(int argc, char **argv)
{
    void *(*work)(void *) = argc > 1 && strcmp(argv[1], "resize") == 0 ? resizer : worker;
    pthread_t t[WORKERS + YIELDERS];
    for (int i = 0; i < WORKERS + YIELDERS; i++)
        if (pthread_create(&t[i], NULL, i < WORKERS ? work : yielder, NULL) != 0)
            handshake_die("tailcalls: pthread_create failed");
    handshake_ready();
    if (!handshake_wait_line())
        return 0;
    atomic_store(&started, 1);
    for (int i = 0; i < WORKERS + YIELDERS; i++)
        pthread_join(t[i], NULL);
    handshake_done();
    handshake_wait_line();
    return 0;
}
