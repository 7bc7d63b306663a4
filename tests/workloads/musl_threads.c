/*
 * musl_threads.c - a workload built with musl (musl-gcc, static and
 * dynamic) for tests/integration/test_runtimes.py: the main thread and one
 * other thread allocate. musl has no CFI for its start code and keeps no
 * frame pointers, so its stacks end where tables end: the test checks that
 * complete stacks are counted as complete.
 *
 *   function               thread   calls   size   kept after "done"
 *   alloc_in_main_thread   main     1000    1000   1000
 *   alloc_in_thread        other    1000    3000   500 (every other one is freed)
 */
#include <pthread.h>
#include <stdlib.h>

#include "handshake.h"

#define N_MAIN 1000
#define SIZE_MAIN 1000
#define N_THREAD 1000
#define SIZE_THREAD 3000

void *main_blocks[N_MAIN];
void *thread_blocks[N_THREAD];

__attribute__((noinline)) void alloc_in_main_thread(void)
{
    for (int i = 0; i < N_MAIN; i++)
        if (!(main_blocks[i] = malloc(SIZE_MAIN)))
            handshake_die("musl_threads: malloc failed");
}

__attribute__((noinline)) void alloc_in_thread(void)
{
    for (int i = 0; i < N_THREAD; i++)
        if (!(thread_blocks[i] = malloc(SIZE_THREAD)))
            handshake_die("musl_threads: malloc failed");
    for (int i = 0; i < N_THREAD; i += 2) {
        free(thread_blocks[i]);
        thread_blocks[i] = NULL;
    }
}

static void *thread_main(void *arg)
{
    (void)arg;
    alloc_in_thread();
    return NULL;
}

int main(void)
{
    handshake_ready();
    if (!handshake_wait_line())
        return 1;
    pthread_t t;
    if (pthread_create(&t, NULL, thread_main, NULL) != 0)
        handshake_die("musl_threads: pthread_create failed");
    pthread_join(t, NULL);
    alloc_in_main_thread();
    handshake_done();
    handshake_wait_line();
    return 0;
}
