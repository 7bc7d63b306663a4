/*
 * malloc_bench.c - the malloc/free-heavy workload of the overhead benchmark.
 *
 * Usage: malloc_bench THREADS ITERATIONS SIZE
 *
 * Prints "ready <pid>" and waits for a line on stdin, so that probes can be
 * attached before any measured call; then runs THREADS threads, each doing
 * ITERATIONS times { p = malloc(SIZE); write one byte; free(p); }, and
 * prints "ns_per_pair <value>": each thread's elapsed time divided by
 * ITERATIONS, averaged over the threads. (Wall time divided by
 * THREADS * ITERATIONS would understate the cost a thread sees whenever the
 * threads run in parallel.) Then "cpu_ns_per_pair <value>", the same from
 * each thread's CPU time (user and system: the kernel's uprobe handling is
 * charged to the thread that trapped), which time spent preempted by other
 * processes does not inflate. The threads start together, released by a
 * barrier, and each times only its own loop.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The most threads a run may ask for; far more than the benchmark uses. */
#define MAX_THREADS 256

/*
 * The allocator, called through volatile pointers so that the compiler can
 * neither elide a malloc/free pair nor inline anything: every iteration
 * reaches libc's malloc and free, where the probes are.
 */
static void *(*volatile bench_malloc)(size_t) = malloc;
static void (*volatile bench_free)(void *) = free;

/* What one thread is told to do and what it measured. */
struct worker {
    pthread_t thread;
    pthread_barrier_t *start;
    unsigned long iterations;
    size_t size;
    double ns_per_pair;
    double cpu_ns_per_pair;
    int failed;
};

/* Nanoseconds on `clock`. */
static uint64_t clock_ns(clockid_t clock)
{
    struct timespec ts;

    clock_gettime(clock, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* One thread's measured loop of malloc, one-byte write, free. */
static void *worker_run(void *arg)
{
    struct worker *w = arg;
    uint64_t start, end, cpu_start, cpu_end;

    pthread_barrier_wait(w->start);
    start = clock_ns(CLOCK_MONOTONIC);
    cpu_start = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    for (unsigned long i = 0; i < w->iterations; i++) {
        volatile char *p = bench_malloc(w->size);

        if (!p) {
            w->failed = 1;
            return NULL;
        }
        p[0] = (char)i;
        bench_free((void *)p);
    }
    cpu_end = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    end = clock_ns(CLOCK_MONOTONIC);
    w->ns_per_pair = (double)(end - start) / (double)w->iterations;
    w->cpu_ns_per_pair = (double)(cpu_end - cpu_start) / (double)w->iterations;
    return NULL;
}

/* Parses a positive decimal argument no larger than max, or exits. */
static unsigned long parse_arg(const char *name, const char *text, unsigned long max)
{
    char *end;
    unsigned long v;

    errno = 0;
    v = strtoul(text, &end, 10);
    if (errno || end == text || *end || v == 0 || v > max) {
        fprintf(stderr, "malloc_bench: %s must be an integer in 1..%lu, not '%s'\n", name, max,
                text);
        exit(2);
    }
    return v;
}

/* Waits for the go line on stdin; end of input counts as go. */
static void wait_for_go(void)
{
    char line[64];

    if (!fgets(line, sizeof(line), stdin) && ferror(stdin)) {
        perror("malloc_bench: read stdin");
        exit(1);
    }
}

int main(int argc, char **argv)
{
    static struct worker workers[MAX_THREADS];
    pthread_barrier_t start;
    unsigned long threads, iterations;
    size_t size;
    double sum = 0, cpu_sum = 0;
    int err;

    if (argc != 4) {
        fprintf(stderr, "usage: %s THREADS ITERATIONS SIZE\n", argv[0]);
        return 2;
    }
    threads = parse_arg("THREADS", argv[1], MAX_THREADS);
    iterations = parse_arg("ITERATIONS", argv[2], 1ul << 40);
    size = parse_arg("SIZE", argv[3], 1ul << 30);

    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    wait_for_go();

    pthread_barrier_init(&start, NULL, (unsigned)threads);
    for (unsigned long t = 0; t < threads; t++) {
        workers[t].start = &start;
        workers[t].iterations = iterations;
        workers[t].size = size;
        err = pthread_create(&workers[t].thread, NULL, worker_run, &workers[t]);
        if (err) {
            fprintf(stderr, "malloc_bench: pthread_create: %s\n", strerror(err));
            return 1;
        }
    }
    for (unsigned long t = 0; t < threads; t++) {
        pthread_join(workers[t].thread, NULL);
        if (workers[t].failed) {
            fprintf(stderr, "malloc_bench: malloc(%zu) failed in thread %lu\n", size, t);
            return 1;
        }
        sum += workers[t].ns_per_pair;
        cpu_sum += workers[t].cpu_ns_per_pair;
    }
    pthread_barrier_destroy(&start);

    printf("ns_per_pair %.1f\n", sum / (double)threads);
    printf("cpu_ns_per_pair %.1f\n", cpu_sum / (double)threads);
    return 0;
}
