/*
 * main.c - heapprofd's entry point: reads the settings, loads the BPF
 * programs (serving 503 with the reason if they cannot load), adopts the
 * processes a previous daemon profiled, attaches the configured ones,
 * starts the watch on process lifetimes (process_watch.h: exec-time
 * attach, forks, exits, idle detach), and serves HTTP until SIGINT or
 * SIGTERM. SIGHUP rereads the config.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "access.h"
#include "bpf_state.h"
#include "daemon_ctx.h"
#include "free_drain.h"
#include "debuginfod_fetch.h"
#include "http_server.h"
#include "options.h"
#include "probe_cost.h"
#include "process_events.h"
#include "process_watch.h"
#include "report_opt.h"
#include "sd_notify.h"
#include "symbol_cache.h"
#include "target_rules.h"
#include "targets.h"
#include "unwind_manager.h"
#include "views.h"

/* Blocks the signals we wait for in every thread, so sigwaitinfo() takes them here. */
static void block_signals(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, set, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* The audit line of an attach the daemon's own settings made (--pid, a
 * rule, a fork of a profiled process): targets' on_attached hook. */
static void audit_own_attach(void *arg, const struct target_info *t, enum hold_kind why)
{
    (void)arg;
    const char *listener = why == HOLD_PID    ? "--pid"
                           : why == HOLD_RULE ? "target rule"
                                              : "fork of a profiled process";
    struct caller config = {.via = ACCESS_VIA_CONFIG, .listener = listener, .trusted = 1};
    access_audit_attach(stderr, &config, t->pid, t->comm, t->sampler);
}

/* Attaches the --pid processes; a failure is logged, not fatal, as the
 * process may come and go while the daemon keeps serving. */
static void attach_pids(const struct options *o, struct targets *t)
{
    struct hold_request how = {.kind = HOLD_PID, .until_ns = HOLD_FOREVER};
    for (size_t i = 0; i < o->npids; i++) {
        char err[512];
        if (targets_hold(t, o->pids[i], &how, err, sizeof(err)) != 0)
            fprintf(stderr, "heapprofd: --pid %d: %s\n", (int)o->pids[i], err);
    }
}

/* Rereads the config on SIGHUP: target rules, pids, the cap and
 * --idle-detach take effect now (for holds made from now on); what the BPF
 * maps or the listener were made with needs a restart. */
static void reload(int argc, char **argv, struct options *opts, struct daemon_ctx *ctx)
{
    struct targets *t = ctx->targets;
    struct options fresh;
    char err[512];
    sd_notify_send("RELOADING=1");
    if (options_parse(argc, argv, &fresh, err, sizeof(err)) != 0 ||
        options_check(&fresh, err, sizeof(err)) != 0) {
        fprintf(stderr, "heapprofd: reload: %s; keeping the old settings\n", err);
        options_free(&fresh);
        sd_notify_send("READY=1");
        return;
    }
    if (fresh.sample_interval != opts->sample_interval || fresh.listen_port != opts->listen_port ||
        strcmp(fresh.listen_host, opts->listen_host) != 0 ||
        strcmp(fresh.pin_dir, opts->pin_dir) != 0 || fresh.layout != opts->layout ||
        strcmp(fresh.sampler_dir, opts->sampler_dir) != 0 ||
        memcmp(&fresh.trust, &opts->trust, sizeof(fresh.trust)) != 0 ||
        fresh.open_loopback != opts->open_loopback || fresh.allow_remote != opts->allow_remote ||
        strcmp(fresh.unix_path, opts->unix_path) != 0 ||
        strcmp(fresh.token_file, opts->token_file) != 0 ||
        fresh.unwind_fp_only != opts->unwind_fp_only ||
        fresh.history_interval_ns != opts->history_interval_ns ||
        strcmp(fresh.debuginfod_urls, opts->debuginfod_urls) != 0 ||
        strcmp(fresh.debuginfod_cache, opts->debuginfod_cache) != 0 ||
        fresh.debuginfod_timeout_ns != opts->debuginfod_timeout_ns ||
        memcmp(&fresh.map_sizes, &opts->map_sizes, sizeof(fresh.map_sizes)) != 0) {
        char names[512];
        options_restart_only(names, sizeof(names));
        fprintf(stderr, "heapprofd: reload: changes to %s take effect at the next restart\n",
                names);
    }
    options_free(opts);
    *opts = fresh;
    if (t) {
        /* The sampler is for processes attached from now on. */
        struct targets_settings set = {.max_targets = opts->max_targets,
                                       .max_per_owner = opts->max_targets_per_uid,
                                       .sampler = opts->sampler,
                                       .idle_ns = opts->idle_detach_ns};
        targets_set_settings(t, &set);
        attach_pids(opts, t);
    }
    if (ctx->watch && process_watch_set_rules(ctx->watch, &opts->rules) != 0)
        fprintf(stderr, "heapprofd: reload: out of memory; keeping the old target rules\n");
    fprintf(stderr, "heapprofd: reloaded %s\n", opts->config_path[0] ? opts->config_path : "");
    sd_notify_send("READY=1");
}

/* The start-up calibration of a probe hit's cost, on a thread of its own:
 * it takes ~0.5 s (links made and removed, each waiting for RCU), which
 * serving need not wait for; until it is done, costs are not estimated. */
struct calibration {
    pthread_t thread;
    int started;
    atomic_int stop; /* set when the daemon stops: the calibration gives up */
    struct targets *targets;
};

/* The calibration thread: measures, then hands the costs to the targets. */
static void *calibrate(void *arg)
{
    struct calibration *c = arg;
    struct probe_cost cost;
    char err[512];
    int e = probe_cost_calibrate(c->targets->bpf, &c->stop, &cost, err, sizeof(err));
    if (e) {
        if (e != -ECANCELED) /* the daemon is stopping: nothing to say */
            fprintf(stderr, "heapprofd: no cost estimates: calibrating a probe hit: %s\n", err);
        return NULL;
    }
    targets_set_cost(c->targets, &cost);
    struct bpf_state *bpf = c->targets->bpf;
    struct report_opt_kernel ro = report_opt_get(); /* probed before any attach */
    fprintf(stderr, "heapprofd: a probe hit costs ~%llu ns of CPU here; with other targets of "
            "the same library ~%llu ns more, and ~%llu ns for each (%d pairs of calls, %.0f hits "
            "a pair, %s links); a report probe ~%llu ns, on a 5-byte nop ~%llu ns (%s)\n",
            (unsigned long long)cost.ns_per_hit,
            (unsigned long long)cost.ns_when_shared, (unsigned long long)cost.ns_per_sharer,
            PROBE_COST_CALLS, cost.hits_per_pair, bpf_state_layout_name(bpf->layout),
            (unsigned long long)ro.plain_ns, (unsigned long long)ro.optimized_ns,
            ro.optimizes == 1   ? "optimized by this kernel: sampled allocations use it"
            : ro.optimizes == 0 ? "not optimized: sampled allocations trap"
                                : "not probed");
    return NULL;
}

/* The sampler file every in-process target maps, with its report probes
 * for all: attaches then register no probe of their own. */
static void open_shared_sampler(const struct options *opts, struct bpf_state *bpf,
                                struct inprocess_shared *shared)
{
    char err[512];
    if (!opts->sampler_dir[0])
        return;
    if (inprocess_shared_open(bpf, opts->sampler_dir, shared, err, sizeof(err)) == 0)
        fprintf(stderr, "heapprofd: in-process targets map %s\n", shared->file.path);
    else
        fprintf(stderr, "heapprofd: %s; each in-process target gets a memfd and probes of its "
                "own (slower to attach)\n", err);
}

/* The targets and the watch on process lifetimes: the event source, the
 * processes of a previous daemon, the --pid ones, the rules' matches. */
static void start_targets(const struct options *opts, struct daemon_ctx *ctx,
                          struct targets *targets, const struct inprocess_shared *shared,
                          struct calibration *cal)
{
    char err[512];
    struct process_events *events = NULL;
    targets_init(targets, ctx->bpf, ctx->unwind, opts->max_targets);
    /* Whether the in-process sampler's optimized report function may be
     * used: found before the first attach, which asks (~30 ms). */
    struct report_opt_kernel ro;
    report_opt_probe(ctx->bpf, &ro);
    targets->shared = shared;
    targets->settings.max_per_owner = opts->max_targets_per_uid;
    targets->settings.sampler = opts->sampler;
    targets->settings.idle_ns = opts->idle_detach_ns;
    targets->callbacks.on_attached = audit_own_attach;
    targets->callbacks.on_farewell = views_keep_last_profile;
    targets->callbacks.on_farewell_arg = ctx;
    cal->targets = targets;
    cal->started = pthread_create(&cal->thread, NULL, calibrate, cal) == 0;
    if (!cal->started)
        fprintf(stderr, "heapprofd: no cost estimates: no thread to calibrate them\n");
    if (process_events_open(&events, err, sizeof(err)) != 0)
        fprintf(stderr, "heapprofd: %s; new processes are found by a scan every second\n", err);
    targets->events = events;
    ctx->targets = targets;
    int adopted = targets_adopt(targets, err, sizeof(err));
    if (adopted > 0)
        fprintf(stderr, "heapprofd: adopted %d processes from the pinned maps\n", adopted);
    if (err[0])
        fprintf(stderr, "heapprofd: could not adopt from the pinned maps (their counts are "
                        "gone): %s\n", err);
    attach_pids(opts, targets);
    int e = process_watch_start(&ctx->watch, targets, &opts->rules, events);
    ctx->free_drain = free_drain_start(targets);
    if (e)
        fprintf(stderr, "heapprofd: watch processes: %s; targets stay until the daemon stops\n",
                strerror(-e));
}

/* The BPF side of the daemon: loads the programs and starts the targets.
 * Returns 0, or -1 if the daemon must not start (its pin directory); with
 * BPF unavailable it returns 0 and leaves ctx->bpf NULL, so that requests
 * get 503. */
static int start_profiling(const struct options *opts, struct daemon_ctx *ctx,
                           struct bpf_state *bpf, struct targets *targets,
                           struct unwind_manager *unwind, struct inprocess_shared *shared,
                           struct calibration *cal)
{
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
    fprintf(stderr, "heapprofd: probes attach as %s links, %s sampler, sample interval %llu "
            "bytes%s%s, Linux %s\n", bpf_state_layout_name(bpf->layout),
            sampler_name(opts->sampler), (unsigned long long)opts->sample_interval,
            opts->pin_dir[0] ? ", maps pinned in " : "", opts->pin_dir, bpf->kernel.release);
    if (bpf->gave_up[0])
        fprintf(stderr, "heapprofd: this kernel lacks, and heapprofd does without: %s\n",
                bpf->gave_up);
    ctx->bpf = bpf;
    if (!opts->unwind_fp_only && unwind_manager_init(unwind, bpf) == 0)
        ctx->unwind = unwind;
    open_shared_sampler(opts, bpf, shared);
    start_targets(opts, ctx, targets, shared, cal);
    return 0;
}

/* Rereads the config on SIGHUP, until SIGINT or SIGTERM. */
static void serve_until_stopped(int argc, char **argv, struct options *opts,
                                struct daemon_ctx *ctx, sigset_t *sigs)
{
    for (;;) {
        int sig = sigwaitinfo(sigs, NULL);
        if (sig == SIGINT || sig == SIGTERM)
            break;
        if (sig == SIGHUP)
            reload(argc, argv, opts, ctx);
    }
    fprintf(stderr, "heapprofd: stopping\n");
}

/* The fetcher of debug files from debuginfod, if servers are named (by
 * debuginfod-urls, else by the environment's DEBUGINFOD_URLS), or NULL. It
 * sets libdebuginfod's environment, so it starts before any other thread. */
static struct debuginfod_fetch *start_debuginfod(const struct options *o)
{
    char urls[sizeof(o->debuginfod_urls)];
    const char *env = getenv("DEBUGINFOD_URLS");
    snprintf(urls, sizeof(urls), "%s", o->debuginfod_urls[0] ? o->debuginfod_urls : env ? env : "");
    if (!urls[0] || strcmp(urls, "none") == 0)
        return NULL;
    char err[512];
    struct debuginfod_fetch *f;
    if (debuginfod_fetch_start(urls, o->debuginfod_cache, o->debuginfod_timeout_ns, &f, err,
                               sizeof(err)) != 0) {
        fprintf(stderr, "heapprofd: %s; debug files are not fetched\n", err);
        return NULL;
    }
    fprintf(stderr, "heapprofd: debug files missing here are fetched from debuginfod (%s) into %s\n",
            urls, o->debuginfod_cache);
    return f;
}

/* Says at start who may profile what over TCP, the escape hatch loudest. */
static void log_access(const struct options *o)
{
    if (o->open_loopback)
        fprintf(stderr, "heapprofd: open-loopback: every local user may profile every process "
                        "through %s:%u (callers are not identified)\n",
                o->listen_host, (unsigned)o->listen_port);
    else if (o->token_file[0])
        fprintf(stderr, "heapprofd: TCP callers need the bearer token, which may profile any "
                        "process\n");
    else
        fprintf(stderr, "heapprofd: TCP callers are known by their socket's uid: root, %zu "
                        "trust-uid and %zu trust-group entries may profile any process, other "
                        "users their own (at most %zu attached each)\n",
                o->trust.nuids, o->trust.ngids, o->max_targets_per_uid);
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
    if (!opts.show_help && options_check(&opts, err, sizeof(err)) != 0) {
        fprintf(stderr, "heapprofd: %s\n", err);
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
    struct history history;
    struct snapshots snapshots;
    struct daemon_ctx ctx = {.cache = &cache, .exited = &exited, .snapshots = &snapshots};
    symbol_cache_init(&cache);
    struct debuginfod_fetch *fetch = start_debuginfod(&opts);
    symbol_cache_set_fetch(&cache, fetch);
    exited_profiles_init(&exited);
    snapshots_init(&snapshots);
    struct http_server *server = NULL;
    struct calibration cal = {.started = 0};
    struct inprocess_shared shared = {.file.fd = -1, .links.link_fd = -1};
    int rc = start_profiling(&opts, &ctx, &bpf, &targets, &unwind, &shared, &cal) ? 1 : 0;
    /* Memory over time: a point of every target each --history-interval. */
    if (rc == 0 && opts.history_interval_ns &&
        history_init(&history, &ctx, opts.history_interval_ns) == 0) {
        ctx.history = &history;
        if (history_start(&history) != 0)
            fprintf(stderr, "heapprofd: no memory history: no thread to take it\n");
    }

    struct http_listen how = {
        .host = opts.listen_host,
        .port = opts.listen_port,
        .allow_remote = opts.allow_remote,
        .token = opts.token_file[0] ? token : NULL,
        .unix_path = opts.unix_path[0] ? opts.unix_path : NULL,
        .trust = &opts.trust,
        .open_loopback = opts.open_loopback,
    };
    if (rc == 0 && http_server_start(&ctx, &how, &server, err, sizeof(err))) {
        fprintf(stderr, "heapprofd: %s\n", err);
        rc = 1;
    }
    if (rc == 0) {
        if (how.unix_path)
            fprintf(stderr, "heapprofd: listening on unix socket %s\n", how.unix_path);
        log_access(&opts);
        fprintf(stderr, "heapprofd: listening on %s:%u\n", opts.listen_host,
                (unsigned)opts.listen_port);
        sd_notify_send("READY=1");
        serve_until_stopped(argc, argv, &opts, &ctx, &sigs);
    }
    sd_notify_send("STOPPING=1");
    if (ctx.targets)
        targets_stop_soon(ctx.targets); /* a detach under way skips tidying the maps */
    http_server_stop(server);
    process_watch_stop(ctx.watch);
    free_drain_stop(ctx.free_drain);
    if (ctx.history)
        history_destroy(ctx.history); /* its thread reads the targets */
    if (cal.started) {
        atomic_store(&cal.stop, 1);
        pthread_join(cal.thread, NULL); /* its links use the BPF object */
    }
    /* Probes go; with pinned maps the counts stay for the next daemon. */
    if (ctx.targets)
        targets_destroy(ctx.targets, opts.pin_dir[0] != '\0');
    inprocess_shared_close(&shared);
    if (ctx.unwind)
        unwind_manager_destroy(ctx.unwind);
    if (ctx.bpf)
        bpf_state_close(ctx.bpf);
    symbol_cache_destroy(&cache);
    debuginfod_fetch_stop(fetch);
    exited_profiles_destroy(&exited);
    snapshots_destroy(&snapshots);
    options_free(&opts);
    return rc;
}
