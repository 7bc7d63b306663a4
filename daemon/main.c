/*
 * main.c - heapprofd's entry point: parses the command line, loads the BPF
 * programs (serving 503 with the reason if they cannot load), attaches the
 * processes named on the command line, serves HTTP, and detaches from
 * processes that exit until SIGINT or SIGTERM.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bpf_state.h"
#include "daemon_ctx.h"
#include "http_server.h"
#include "options.h"
#include "symbol_cache.h"
#include "targets.h"

/* How often exited processes are detached. */
#define REAP_INTERVAL_SECONDS 1

/* Blocks the stop signals in every thread, so sigtimedwait() takes them here. */
static void block_stop_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, set, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* Attaches the --pid processes; a failure is logged, not fatal, as the
 * process may come and go while the daemon keeps serving. */
static void attach_initial_pids(const struct options *o, struct targets *t)
{
    for (size_t i = 0; i < o->npids; i++) {
        char err[512];
        if (targets_ensure(t, o->pids[i], err, sizeof(err)) != 0)
            fprintf(stderr, "heapprofd: --pid %d: %s\n", (int)o->pids[i], err);
    }
}

int main(int argc, char **argv)
{
    struct options opts;
    char err[512];
    if (options_parse(argc, argv, &opts, err, sizeof(err)) != 0) {
        fprintf(stderr, "heapprofd: %s\n", err);
        options_usage(stderr);
        return 2;
    }
    if (opts.show_help) {
        options_usage(stdout);
        return 0;
    }
    sigset_t stop;
    block_stop_signals(&stop);

    struct bpf_state bpf;
    struct targets targets;
    struct unwind_manager unwind;
    struct symbol_cache cache;
    struct daemon_ctx ctx = {.cache = &cache};
    symbol_cache_init(&cache);
    if (bpf_state_load(&bpf, opts.sample_interval, opts.layout, ctx.bpf_error,
                       sizeof(ctx.bpf_error)) == 0) {
        fprintf(stderr, "heapprofd: probes attach as %s links, sample interval %llu bytes\n",
                bpf_state_layout_name(bpf.layout), (unsigned long long)opts.sample_interval);
        ctx.bpf = &bpf;
        ctx.targets = &targets;
        if (unwind_manager_init(&unwind, &bpf) == 0)
            ctx.unwind = &unwind;
        targets_init(&targets, &bpf, ctx.unwind);
        attach_initial_pids(&opts, &targets);
    } else {
        fprintf(stderr, "heapprofd: BPF unavailable: %s\n", ctx.bpf_error);
    }

    struct http_server *server;
    if (http_server_start(&ctx, opts.listen_host, opts.listen_port, &server, err, sizeof(err))) {
        fprintf(stderr, "heapprofd: %s\n", err);
        return 1;
    }
    fprintf(stderr, "heapprofd: listening on %s:%u\n", opts.listen_host,
            (unsigned)opts.listen_port);

    struct timespec tick = {.tv_sec = REAP_INTERVAL_SECONDS};
    for (;;) {
        int sig = sigtimedwait(&stop, NULL, &tick);
        if (sig == SIGINT || sig == SIGTERM)
            break;
        if (ctx.targets)
            targets_reap(ctx.targets);
    }
    fprintf(stderr, "heapprofd: stopping\n");
    http_server_stop(server);
    if (ctx.targets)
        targets_destroy(ctx.targets);
    if (ctx.unwind)
        unwind_manager_destroy(ctx.unwind);
    if (ctx.bpf)
        bpf_state_close(ctx.bpf);
    symbol_cache_destroy(&cache);
    return 0;
}
