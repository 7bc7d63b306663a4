/*
 * ring_exact.c - a workload whose every allocation is known, made so that
 * frees of sampled pointers go through the in-process sampler's ring of
 * frees and are drained later (tests/integration/test_free_ring.py, run
 * with --sample-interval 1): frees spread over several drains, addresses
 * freed and handed out again before a drain, reallocs, a burst of frees
 * larger than the ring (the rest trap), and children forked with entries
 * still in the ring.
 *
 * Protocol: "ready PID"; on a line, ROUNDS rounds ROUND_MS apart, forking
 * CHILDREN children after round FORK_ROUND ("child PID" each), then "done";
 * on another line (or EOF) the parent signals its children and exits 0
 * once they all exited 0. Each child waits for SIGUSR1 (the test sends it
 * once the child is profiled) in short sleeps, not in sigwait(), which a
 * stop would fail with EINTR (so the in-process sampler would not be put
 * in), then does its own work, prints
 * "child-done PID", and waits for SIGTERM. Totals per function are tabled
 * in test_free_ring.py; keep the two in step.
 */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "handshake.h"

#define ROUNDS 10
#define ROUND_MS 40
#define FORK_ROUND 4
#define CHILDREN 3
#define KEEP 50       /* keep_blocks: malloc(200) per round, kept */
#define CHURN 300     /* churn: malloc(64) and free at once, per round */
#define GROW 20       /* grow: malloc(16) then realloc(p, 1000), kept, per round */
#define LATER 100     /* freed_later: malloc(128), freed the next round */
#define BURST 10000   /* burst: malloc(48) x 10000, then all freed (more than the ring) */

static void *kept[ROUNDS * (KEEP + GROW)];
static size_t nkept;
static void *later[LATER];
static void *burst_ptrs[BURST];
static void *(*volatile do_malloc)(size_t) = malloc;
static void (*volatile do_free)(void *) = free;
static void *(*volatile do_realloc)(void *, size_t) = realloc;

__attribute__((noinline)) void keep_blocks(size_t size, int n)
{
    for (int i = 0; i < n; i++) {
        kept[nkept] = do_malloc(size);
        handshake_touch(kept[nkept++], size);
    }
}

/* Freed at once: the next malloc of that size gets the same address back,
 * before any drain has seen the free. */
__attribute__((noinline)) void churn(size_t size, int n)
{
    for (int i = 0; i < n; i++) {
        void *p = do_malloc(size);
        handshake_touch(p, size);
        do_free(p);
    }
}

__attribute__((noinline)) void grow(size_t from, size_t to, int n)
{
    for (int i = 0; i < n; i++) {
        void *p = do_malloc(from);
        handshake_touch(p, from);
        kept[nkept] = do_realloc(p, to);
        handshake_touch(kept[nkept++], to);
    }
}

__attribute__((noinline)) void freed_later(void)
{
    for (int i = 0; i < LATER; i++) {
        do_free(later[i]);
        later[i] = do_malloc(128);
        handshake_touch(later[i], 128);
    }
}

__attribute__((noinline)) void burst(void)
{
    for (int i = 0; i < BURST; i++) {
        burst_ptrs[i] = do_malloc(48);
        handshake_touch(burst_ptrs[i], 48);
    }
    for (int i = 0; i < BURST; i++)
        do_free(burst_ptrs[i]);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* A child's work, once it is profiled. */
__attribute__((noinline)) void child_work(void)
{
    nkept = 0;
    keep_blocks(300, 100);
    churn(32, 200);
    grow(8, 500, 10);
}

static volatile sig_atomic_t go_on;

static void on_usr1(int sig)
{
    (void)sig;
    go_on = 1;
}

static void child(void)
{
    while (!go_on)
        sleep_ms(5);
    child_work();
    handshake_say_pid("child-done", (long)getpid());
    pause(); /* until SIGTERM */
    _exit(0);
}

int main(void)
{
    struct sigaction sa = {.sa_handler = on_usr1};
    sigaction(SIGUSR1, &sa, NULL);
    pid_t children[CHILDREN];
    handshake_ready();
    if (!handshake_wait_line())
        return 1;
    for (int r = 0; r < ROUNDS; r++) {
        keep_blocks(200, KEEP);
        churn(64, CHURN);
        grow(16, 1000, GROW);
        freed_later();
        if (r == FORK_ROUND) {
            burst();
            for (int c = 0; c < CHILDREN; c++) {
                children[c] = fork();
                if (children[c] < 0)
                    handshake_die("ring_exact: fork failed");
                if (children[c] == 0)
                    child();
                handshake_say_pid("child", (long)children[c]);
            }
        }
        sleep_ms(ROUND_MS);
    }
    for (int i = 0; i < LATER; i++)
        do_free(later[i]);
    handshake_done();
    handshake_wait_line();
    int bad = 0;
    for (int c = 0; c < CHILDREN; c++) {
        int status;
        kill(children[c], SIGTERM);
        waitpid(children[c], &status, 0);
        bad += !(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
    }
    return bad ? 3 : 0;
}
