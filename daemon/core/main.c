/*
 * main.c - heapprofd's entry point: reads the settings, loads the BPF
 * programs (serving 503 with the reason if they cannot load), adopts the
 * processes a previous daemon profiled, attaches the configured ones,
 * serves HTTP, and every second detaches from exited processes and picks up
 * new matching ones, until SIGINT or SIGTERM. SIGHUP rereads the config.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "access.h"
#include "bpf_state.h"
#include "daemon_ctx.h"
#include "http_server.h"
#include "options.h"
#include "proc_info.h"
#include "sd_notify.h"
#include "symbol_cache.h"
#include "target_rules.h"
#include "targets.h"
#include "unwind_manager.h"
#include "views.h"

/* How often exited processes are detached and new matching ones attached. */
#define SCAN_INTERVAL_SECONDS 1
/* Processes whose attach failed, remembered so a rule does not retry them
 * every second (a kernel thread named like a target, a process without
 * malloc). */
#define FAILED_MEMORY 256

/* What the main loop keeps between scans. */
struct scan_state {
    struct targets *targets;
    struct {
        pid_t pid;
        uint64_t start_time;
    } failed[FAILED_MEMORY];
    size_t next_failed;
};

/* Blocks the signals we wait for in every thread, so sigtimedwait() takes them here. */
static void block_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, set, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* Whether the attach of this very process failed before. */
static int failed_before(struct scan_state *s, pid_t pid, uint64_t start_time)
{
    for (size_t i = 0; i < FAILED_MEMORY; i++)
        if (s->failed[i].pid == pid && s->failed[i].start_time == start_time)
            return 1;
    return 0;
}

/* Attaches to a process a rule matched, once; failures are logged once. */
static void attach_matching(pid_t pid, void *arg)
{
    struct scan_state *s = arg;
    uint64_t start_time;
    char err[512];
    if (proc_start_time(pid, &start_time) != 0 || failed_before(s, pid, start_time))
        return;
    int e = targets_ensure(s->targets, pid, err, sizeof(err));
    /* Over the cap (-ENOSPC): not remembered, so retried at each scan and
     * attached once a slot frees. No allocator yet (-ENOENT): a process
     * matched right after exec has no libc mapped until the dynamic linker
     * runs, so it is retried too. */
    if (e == 0 || e == -EAGAIN || e == -ENOSPC || e == -ENOENT || e == -ESRCH)
        return;
    fprintf(stderr, "heapprofd: pid %d matches a target rule but: %s\n", (int)pid, err);
    s->failed[s->next_failed].pid = pid;
    s->failed[s->next_failed].start_time = start_time;
    s->next_failed = (s->next_failed + 1) % FAILED_MEMORY;
}

/* Attaches the --pid processes; a failure is logged, not fatal, as the
 * process may come and go while the daemon keeps serving. */
static void attach_pids(const struct options *o, struct targets *t)
{
    for (size_t i = 0; i < o->npids; i++) {
        char err[512];
        if (targets_ensure(t, o->pids[i], err, sizeof(err)) != 0)
            fprintf(stderr, "heapprofd: --pid %d: %s\n", (int)o->pids[i], err);
    }
}

/* Rereads the config on SIGHUP: target rules, pids and the cap take effect
 * now; what the BPF maps or the listener were made with needs a restart. */
static void reload(int argc, char **argv, struct options *opts, struct targets *t)
{
    struct options fresh;
    char err[512];
    sd_notify_send("RELOADING=1");
    if (options_parse(argc, argv, &fresh, err, sizeof(err)) != 0) {
        fprintf(stderr, "heapprofd: reload: %s; keeping the old settings\n", err);
        options_free(&fresh);
        sd_notify_send("READY=1");
        return;
    }
    if (fresh.sample_interval != opts->sample_interval || fresh.listen_port != opts->listen_port ||
        strcmp(fresh.listen_host, opts->listen_host) != 0 ||
        strcmp(fresh.pin_dir, opts->pin_dir) != 0 || fresh.layout != opts->layout)
        fprintf(stderr, "heapprofd: reload: listen, sample-interval, pin-dir and probe-layout "
                        "changes take effect at the next restart\n");
    options_free(opts);
    *opts = fresh;
    if (t) {
        pthread_mutex_lock(&t->lock);
        t->max_targets = opts->max_targets;
        pthread_mutex_unlock(&t->lock);
        attach_pids(opts, t);
    }
    fprintf(stderr, "heapprofd: reloaded %s\n", opts->config_path[0] ? opts->config_path : "");
    sd_notify_send("READY=1");
}

/* The BPF side of the daemon: loads the programs, adopts the processes of
 * a previous daemon and attaches the --pid ones. Returns 0, or -1 if the
 * daemon must not start (its pin directory); with BPF unavailable it
 * returns 0 and leaves ctx->bpf NULL, so that requests get 503. */
static int start_profiling(const struct options *opts, struct daemon_ctx *ctx,
                           struct bpf_state *bpf, struct targets *targets,
                           struct unwind_manager *unwind)
{
    char err[512];
    int e = bpf_state_load(bpf, opts->sample_interval, opts->layout, opts->pin_dir,
                           &opts->map_sizes, ctx->bpf_error, sizeof(ctx->bpf_error));
    if (e && bpf->refused) {
        /* The pin directory is unusable, or holds maps that would be
         * misread (serving wrong profiles): refuse to start. */
        fprintf(stderr, "heapprofd: %s\n", ctx->bpf_error);
        return -1;
    }
    if (bpf->notice[0])
        fprintf(stderr, "heapprofd: %s\n", bpf->notice);
    if (e) {
        fprintf(stderr, "heapprofd: BPF unavailable: %s\n", ctx->bpf_error);
        return 0;
    }
    fprintf(stderr, "heapprofd: probes attach as %s links, sample interval %llu bytes%s%s\n",
            bpf_state_layout_name(bpf->layout), (unsigned long long)opts->sample_interval,
            opts->pin_dir[0] ? ", maps pinned in " : "", opts->pin_dir);
    ctx->bpf = bpf;
    ctx->targets = targets;
    if (!opts->unwind_fp_only && unwind_manager_init(unwind, bpf) == 0)
        ctx->unwind = unwind;
    targets_init(targets, bpf, ctx->unwind, opts->max_targets);
    targets->on_exit = views_snapshot_exited;
    targets->on_exit_arg = ctx;
    int adopted = targets_adopt(targets, err, sizeof(err));
    if (adopted > 0)
        fprintf(stderr, "heapprofd: adopted %d processes from the pinned maps\n", adopted);
    if (err[0])
        fprintf(stderr, "heapprofd: could not adopt from the pinned maps (their counts are "
                        "gone): %s\n", err);
    attach_pids(opts, targets);
    return 0;
}

/* Scans every second (exited processes, rule matches) and rereads the
 * config on SIGHUP, until SIGINT or SIGTERM. */
static void serve_until_stopped(int argc, char **argv, struct options *opts,
                                struct daemon_ctx *ctx, sigset_t *sigs, struct scan_state *scan)
{
    struct timespec tick = {.tv_sec = SCAN_INTERVAL_SECONDS};
    for (;;) {
        int sig = sigtimedwait(sigs, NULL, &tick);
        if (sig == SIGINT || sig == SIGTERM)
            break;
        if (sig == SIGHUP) {
            reload(argc, argv, opts, ctx->targets);
            continue;
        }
        if (!ctx->targets)
            continue;
        targets_reap(ctx->targets);
        target_rules_scan(&opts->rules, attach_matching, scan);
    }
    fprintf(stderr, "heapprofd: stopping\n");
}

int main(int argc, char **argv)
{
    struct options opts;
    char err[512];
    if (options_parse(argc, argv, &opts, err, sizeof(err)) != 0) {
        fprintf(stderr, "heapprofd: %s\n", err);
        options_usage(stderr);
        options_free(&opts);
        return 2;
    }
    if (opts.show_help) {
        options_usage(stdout);
        options_free(&opts);
        return 0;
    }
    /* Settings that can be wrong are checked before anything is loaded. */
    char token[ACCESS_MAX_TOKEN + 1];
    if (opts.token_file[0] &&
        access_read_token(opts.token_file, token, sizeof(token), err, sizeof(err)) != 0) {
        fprintf(stderr, "heapprofd: %s\n", err);
        options_free(&opts);
        return 1;
    }
    sigset_t sigs;
    block_signals(&sigs);

    struct bpf_state bpf;
    struct targets targets;
    struct unwind_manager unwind;
    struct symbol_cache cache;
    struct exited_profiles exited;
    struct daemon_ctx ctx = {.cache = &cache, .exited = &exited};
    symbol_cache_init(&cache);
    exited_profiles_init(&exited);
    struct http_server *server = NULL;
    int rc = start_profiling(&opts, &ctx, &bpf, &targets, &unwind) ? 1 : 0;
    struct scan_state scan = {.targets = ctx.targets};
    if (rc == 0 && ctx.targets)
        target_rules_scan(&opts.rules, attach_matching, &scan);

    struct http_listen how = {
        .host = opts.listen_host,
        .port = opts.listen_port,
        .allow_remote = opts.allow_remote,
        .token = opts.token_file[0] ? token : NULL,
        .unix_path = opts.unix_path[0] ? opts.unix_path : NULL,
    };
    if (rc == 0 && http_server_start(&ctx, &how, &server, err, sizeof(err))) {
        fprintf(stderr, "heapprofd: %s\n", err);
        rc = 1;
    }
    if (rc == 0) {
        if (how.unix_path)
            fprintf(stderr, "heapprofd: listening on unix socket %s\n", how.unix_path);
        fprintf(stderr, "heapprofd: listening on %s:%u\n", opts.listen_host,
                (unsigned)opts.listen_port);
        sd_notify_send("READY=1");
        serve_until_stopped(argc, argv, &opts, &ctx, &sigs, &scan);
    }
    sd_notify_send("STOPPING=1");
    http_server_stop(server);
    /* Probes go; with pinned maps the counts stay for the next daemon. */
    if (ctx.targets)
        targets_destroy(ctx.targets, opts.pin_dir[0] != '\0');
    if (ctx.unwind)
        unwind_manager_destroy(ctx.unwind);
    if (ctx.bpf)
        bpf_state_close(ctx.bpf);
    symbol_cache_destroy(&cache);
    exited_profiles_destroy(&exited);
    options_free(&opts);
    return rc;
}
