/*
 * metrics.c - writes heapprofd's Prometheus metrics (see metrics.h).
 */
#include "metrics.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "entry_families.h"
#include "free_ring.h"
#include "debuginfod_fetch.h"
#include "hp_limits.h"
#include "probe_cost.h"
#include "report_opt.h"
#include "visible_targets.h"

/* One metric with its HELP and TYPE lines. */
static int emit_metric(struct strbuf *out, const char *name, const char *type, const char *help,
                       unsigned long long value)
{
    int e = strbuf_printf(out, "# HELP heapprofd_%s %s\n# TYPE heapprofd_%s %s\n", name, help, name,
                          type);
    return e ? e : strbuf_printf(out, "heapprofd_%s %llu\n", name, value);
}

/* Processes whose flag of the optimized report function could not be set,
 * by errno (report_opt.h): the log says each cause once. */
static int emit_report_opt_failures(struct strbuf *out)
{
    struct report_opt_failure f[REPORT_OPT_CAUSES];
    size_t n = report_opt_failures(f);
    int e = strbuf_printf(out,
                          "# HELP heapprofd_report_opt_failures_total Processes in which the "
                          "optimized report function could not be enabled (the plain one is "
                          "used), by errno.\n"
                          "# TYPE heapprofd_report_opt_failures_total counter\n");
    for (size_t i = 0; i < n && e == 0; i++) {
        const char *name = strerrorname_np(f[i].err);
        e = name ? strbuf_printf(out, "heapprofd_report_opt_failures_total{errno=\"%s\"} %llu\n",
                                 name, (unsigned long long)f[i].count)
                 : strbuf_printf(out, "heapprofd_report_opt_failures_total{errno=\"%d\"} %llu\n",
                                 f[i].err, (unsigned long long)f[i].count);
    }
    return e;
}

/* Escapes a label value for the Prometheus text format (backslash, quote, newline). */
static void label_escape(char *dst, size_t len, const char *src)
{
    size_t o = 0;
    for (; *src && o + 3 < len; src++) {
        if (*src == '\\' || *src == '"') {
            dst[o++] = '\\';
            dst[o++] = *src;
        } else if (*src == '\n') {
            dst[o++] = '\\';
            dst[o++] = 'n';
        } else {
            dst[o++] = *src;
        }
    }
    dst[o] = '\0';
}

/* What the per-target families read: a target and its count totals. */
struct target_row {
    const struct target_info *info;
    const struct hp_counts *totals;
    uint64_t now;
};

/* Writes the value of one family for one target (after its labels). */
typedef int (*target_value_fn)(struct strbuf *out, const struct target_row *r);

static int value_inuse(struct strbuf *out, const struct target_row *r)
{
    int64_t v = r->totals->inuse_bytes;
    return strbuf_printf(out, " %lld\n", (long long)(v > 0 ? v >> HP_BYTES_SHIFT : 0));
}

static int value_allocated(struct strbuf *out, const struct target_row *r)
{
    return strbuf_printf(out, " %llu\n",
                         (unsigned long long)(r->totals->alloc_bytes >> HP_BYTES_SHIFT));
}

static int value_hits(struct strbuf *out, const struct target_row *r)
{
    return strbuf_printf(out, " %llu\n", (unsigned long long)r->info->probe_hits);
}

static int value_added_cpu(struct strbuf *out, const struct target_row *r)
{
    struct cost_estimate c;
    probe_cost_estimate(r->info->probe_hits, r->info->ns_per_hit, r->info->cpu_ns, &c);
    return strbuf_printf(out, " %.6f\n", c.added_cpu_seconds);
}

static int value_detach_in(struct strbuf *out, const struct target_row *r)
{
    double left = holders_seconds_left(&r->info->holders, r->now);
    if (isinf(left))
        return strbuf_printf(out, " +Inf\n");
    return strbuf_printf(out, " %.3f\n", left);
}

static int value_forks_unprofiled(struct strbuf *out, const struct target_row *r)
{
    return strbuf_printf(out, " %llu\n", (unsigned long long)r->info->forks_unprofiled);
}

/* Writes whole lines of one family for one target (labels of its own). */
typedef int (*target_lines_fn)(struct strbuf *out, const char *name, const char *labels,
                               const struct target_row *r);

/* One line per reason that holds the target: {pid, comm, reason} 1. */
static int lines_held(struct strbuf *out, const char *name, const char *labels,
                      const struct target_row *r)
{
    int e = 0;
    for (int k = 0; k < HOLD_KINDS && e == 0; k++)
        if (holders_holds(&r->info->holders, (enum hold_kind)k, r->now))
            e = strbuf_printf(out, "heapprofd_%s{%s,reason=\"%s\"} 1\n", name, labels,
                              hold_kind_name((enum hold_kind)k));
    return e;
}

/* Its sampler, and why not the in-process one when it was asked for and
 * could not be used: {pid, comm, sampler, reason} 1. */
static int lines_sampler(struct strbuf *out, const char *name, const char *labels,
                         const struct target_row *r)
{
    char reason[512];
    label_escape(reason, sizeof(reason), r->info->sampler_note);
    return strbuf_printf(out, "heapprofd_%s{%s,sampler=\"%s\",reason=\"%s\"} 1\n", name, labels,
                         r->info->sampler, reason);
}

/* The entry families its calls reach its sampler by: {pid, comm, family} 1
 * each (entry_families.h). */
static int lines_interposed(struct strbuf *out, const char *name, const char *labels,
                            const struct target_row *r)
{
    int e = 0;
    for (int f = 0; f < ENTRY_FAMILY_COUNT && e == 0; f++)
        if (r->info->families & (1u << f))
            e = strbuf_printf(out, "heapprofd_%s{%s,family=\"%s\"} 1\n", name, labels,
                              entry_family_name((enum entry_family)f));
    return e;
}

/* The per-target families, each contiguous as the text format wants: a
 * value after the {pid, comm} labels, or lines with labels of their own. */
static const struct {
    const char *name, *type, *help;
    target_value_fn value;
    target_lines_fn lines;
} target_families[] = {
    {"target_inuse_bytes", "gauge", "Estimated bytes in use, per profiled process.", value_inuse, NULL},
    {"target_allocated_bytes_total", "counter",
     "Estimated bytes allocated since attach, per profiled process.", value_allocated, NULL},
    {"target_probe_hits_total", "counter",
     "Probe runs (traps into the kernel) in the process since attach.", value_hits, NULL},
    {"target_added_cpu_seconds_total", "counter",
     "Estimated CPU time heapprofd's probes added to the process since attach (probe hits "
     "times the calibrated cost of one).", value_added_cpu, NULL},
    {"target_held", "gauge",
     "Why the process is profiled: pid, rule, fork, request or window (one series each).",
     NULL, lines_held},
    {"target_sampler", "gauge",
     "The sampler of each profiled process (reason: why the in-process sampler was not used).",
     NULL, lines_sampler},
    {"target_interposed", "gauge",
     "The allocator entry families the process's calls reach its sampler by (c, cxx, jemalloc, "
     "tcmalloc, mimalloc): probed, or whose relocation slots the in-process sampler took at "
     "its attach (one series each).",
     NULL, lines_interposed},
    {"target_detach_in_seconds", "gauge",
     "Seconds until the process is detached unless asked for again (+Inf: held while it runs).",
     value_detach_in, NULL},
    {"target_forks_unprofiled_total", "counter",
     "Children the process forked that could not be profiled (--max-targets); they run with "
     "its probes, unprofiled.", value_forks_unprofiled, NULL},
};

/* Per profiled process `who` may profile: its estimated bytes, its cost,
 * why it is held, its sampler. */
static int write_target_metrics(struct daemon_ctx *ctx, const struct caller *who,
                                struct strbuf *out)
{
    struct visible_targets v;
    int e = visible_targets_get(ctx, who, true, &v);
    const struct target_info *info = v.info;
    size_t n = v.n;
    uint64_t now = monotonic_ns();
    size_t nfam = sizeof(target_families) / sizeof(target_families[0]);
    for (size_t f = 0; f < nfam && e == 0; f++) {
        e = strbuf_printf(out, "# HELP heapprofd_%s %s\n# TYPE heapprofd_%s %s\n",
                          target_families[f].name, target_families[f].help, target_families[f].name,
                          target_families[f].type);
        for (size_t i = 0; i < n && e == 0; i++) {
            char comm[64], labels[96];
            label_escape(comm, sizeof(comm), info[i].comm);
            snprintf(labels, sizeof(labels), "pid=\"%d\",comm=\"%s\"", (int)info[i].pid, comm);
            struct target_row r = {.info = &info[i], .totals = &v.totals[i], .now = now};
            if (target_families[f].lines) {
                e = target_families[f].lines(out, target_families[f].name, labels, &r);
                continue;
            }
            e = strbuf_printf(out, "heapprofd_%s{%s}", target_families[f].name, labels);
            if (e == 0)
                e = target_families[f].value(out, &r);
        }
    }
    visible_targets_free(&v);
    return e;
}

/* The watch on process lifetimes: events, exec-time attaches, forks. */
static int write_watch_metrics(struct daemon_ctx *ctx, struct strbuf *out)
{
    struct process_watch_stats w;
    process_watch_stats(ctx->watch, &w);
    const struct {
        const char *name, *type, *help;
        uint64_t value;
    } plain[] = {
        {"process_events_up", "gauge",
         "1 if exec, fork and exit events come from BPF (else a 1 s scan alone).",
         (uint64_t)w.events_on},
        {"process_events_lost_total", "counter",
         "Process events dropped, the ring buffer full (the scan catches up).", w.events_lost},
        {"process_watch_full_total", "counter",
         "Processes whose forks and exit could not be watched (map full).", w.watch_full},
        {"scan_attached_total", "counter",
         "Processes a rule matched that the 1 s scan attached (no event for them).",
         w.scan_attached},
        {"forks_attached_total", "counter", "Children of profiled processes attached.",
         w.forks_attached},
        {"forks_unprofiled_total", "counter",
         "Children of profiled processes that could not be attached (--max-targets); their "
         "inherited probes are taken out.",
         w.forks_unprofiled},
    };
    int e = 0;
    for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]) && e == 0; i++)
        e = emit_metric(out, plain[i].name, plain[i].type, plain[i].help,
                        (unsigned long long)plain[i].value);
    if (e == 0)
        e = strbuf_printf(out,
                          "# HELP heapprofd_process_events_total Process events received.\n"
                          "# TYPE heapprofd_process_events_total counter\n"
                          "heapprofd_process_events_total{event=\"exec\"} %llu\n"
                          "heapprofd_process_events_total{event=\"fork\"} %llu\n"
                          "heapprofd_process_events_total{event=\"exit\"} %llu\n",
                          (unsigned long long)w.execs, (unsigned long long)w.forks,
                          (unsigned long long)w.exits);
    if (e == 0)
        e = strbuf_printf(out,
                          "# HELP heapprofd_exec_attach_seconds Delay from exec to attached, "
                          "of processes a rule matched at their exec.\n"
                          "# TYPE heapprofd_exec_attach_seconds summary\n"
                          "heapprofd_exec_attach_seconds_sum %.6f\n"
                          "heapprofd_exec_attach_seconds_count %llu\n",
                          w.exec_attach_delay_ns / 1e9, (unsigned long long)w.exec_attached);
    if (e == 0)
        e = strbuf_printf(out,
                          "# HELP heapprofd_exec_missed_total Processes a rule matched at their "
                          "exec that were not attached, by reason.\n"
                          "# TYPE heapprofd_exec_missed_total counter\n"
                          "heapprofd_exec_missed_total{reason=\"queue_full\"} %llu\n"
                          "heapprofd_exec_missed_total{reason=\"exited\"} %llu\n"
                          "heapprofd_exec_missed_total{reason=\"max_targets\"} %llu\n"
                          "heapprofd_exec_missed_total{reason=\"error\"} %llu\n",
                          (unsigned long long)w.exec_missed[EXEC_MISSED_QUEUE_FULL],
                          (unsigned long long)w.exec_missed[EXEC_MISSED_EXITED],
                          (unsigned long long)w.exec_missed[EXEC_MISSED_MAX_TARGETS],
                          (unsigned long long)w.exec_missed[EXEC_MISSED_ERROR]);
    static const unsigned bounds_ms[FORK_DELAY_BUCKETS] = FORK_DELAY_BOUNDS_MS;
    if (e == 0)
        e = strbuf_printf(out,
                          "# HELP heapprofd_fork_attach_seconds Delay from fork to attached, "
                          "of children of profiled processes.\n"
                          "# TYPE heapprofd_fork_attach_seconds histogram\n");
    for (size_t b = 0; b < FORK_DELAY_BUCKETS && e == 0; b++)
        e = strbuf_printf(out, "heapprofd_fork_attach_seconds_bucket{le=\"%g\"} %llu\n",
                          bounds_ms[b] / 1e3, (unsigned long long)w.fork_delay_buckets[b]);
    if (e == 0)
        e = strbuf_printf(out,
                          "heapprofd_fork_attach_seconds_bucket{le=\"+Inf\"} %llu\n"
                          "heapprofd_fork_attach_seconds_sum %.6f\n"
                          "heapprofd_fork_attach_seconds_count %llu\n",
                          (unsigned long long)w.forks_attached, w.fork_delay_ns / 1e9,
                          (unsigned long long)w.forks_attached);
    return e;
}

/* The BPF side's counters and map fill; nothing when BPF is unavailable. */
static int write_bpf_metrics(struct daemon_ctx *ctx, struct strbuf *out)
{
    uint64_t stats[HP_STAT_COUNT];
    int e = bpf_state_read_stats(ctx->bpf, stats);
    for (int i = 0; i < HP_STAT_COUNT && e == 0; i++) {
        char name[96];
        snprintf(name, sizeof(name), "%s_total", bpf_state_stat_name((enum hp_stat)i));
        e = emit_metric(out, name, "counter", "Counted by the BPF programs, all processes.",
                        (unsigned long long)stats[i]);
    }
    if (e == 0)
        e = emit_metric(out, "stacks_pruned_total", "counter",
                        "Stacks deleted because no count row named them any more.",
                        __atomic_load_n(&ctx->bpf->stacks_pruned, __ATOMIC_RELAXED));
    struct map_fill f;
    if (e == 0)
        e = bpf_state_map_fill(ctx->bpf, &f);
    if (e == 0)
        e = strbuf_printf(out,
                          "# HELP heapprofd_map_entries Entries in use in each BPF map.\n"
                          "# TYPE heapprofd_map_entries gauge\n"
                          "heapprofd_map_entries{map=\"counts\"} %zu\n"
                          "heapprofd_map_entries{map=\"live\"} %zu\n"
                          "heapprofd_map_entries{map=\"stacks\"} %zu\n"
                          "heapprofd_map_entries{map=\"pending\"} %zu\n",
                          f.counts, f.live, f.stacks, f.pending);
    if (e == 0)
        e = strbuf_printf(out,
                          "# HELP heapprofd_map_capacity Capacity of each BPF map.\n"
                          "# TYPE heapprofd_map_capacity gauge\n"
                          "heapprofd_map_capacity{map=\"counts\"} %u\n"
                          "heapprofd_map_capacity{map=\"live\"} %u\n"
                          "heapprofd_map_capacity{map=\"stacks\"} %u\n"
                          "heapprofd_map_capacity{map=\"pending\"} %u\n",
                          ctx->bpf->capacity.counts, ctx->bpf->capacity.live,
                          ctx->bpf->capacity.stacks, ctx->bpf->capacity.pending);
    return e;
}

/* The in-process sampler's fallbacks and the stops of its last injection
 * and restore. */
static int write_inprocess_counters(const struct targets_counters *c, struct strbuf *out)
{
    unsigned long long fallbacks = c->inprocess_fallbacks;
    unsigned long long inject_ns = c->last_inject_stop_ns;
    unsigned long long restore_ns = c->last_restore_stop_ns;
    int e = emit_metric(out, "inprocess_fallbacks_total", "counter",
                        "Processes given uprobes because the in-process sampler could not be "
                        "used (the reason is in heapprofd_target_sampler).",
                        fallbacks);
    if (e == 0)
        e = strbuf_printf(out,
                          "# HELP heapprofd_inprocess_stop_seconds How long the in-process "
                          "sampler's last attach, and last detach, held a thread of its "
                          "process in stops.\n"
                          "# TYPE heapprofd_inprocess_stop_seconds gauge\n"
                          "heapprofd_inprocess_stop_seconds{at=\"attach\"} %.6f\n"
                          "heapprofd_inprocess_stop_seconds{at=\"detach\"} %.6f\n",
                          inject_ns / 1e9, restore_ns / 1e9);
    /* The paths of sampled calls: the ring of frees and the optimized report. */
    struct free_ring_counters fr;
    free_ring_counters(&fr);
    struct report_opt_kernel ro = report_opt_get();
    if (e == 0)
        e = emit_metric(out, "free_ring_drains_total", "counter",
                        "Drains of the in-process sampler's rings of frees.", fr.drains);
    if (e == 0)
        e = emit_metric(out, "free_ring_entries_total", "counter",
                        "Ring entries applied (frees of sampled pointers).", fr.entries);
    if (e == 0)
        e = emit_metric(out, "free_ring_drain_errors_total", "counter",
                        "Rings that could not be read or written, or made no sense.", fr.errors);
    if (e == 0)
        e = emit_report_opt_failures(out);
    if (e == 0)
        e = strbuf_printf(out,
                          "# HELP heapprofd_uprobe_nop5_optimized Whether this kernel turns a "
                          "uprobe on a 5-byte nop into a trampoline call (1), so that sampled "
                          "allocations report through it; 0: it does not (or it is turned "
                          "off); -1: not probed.\n"
                          "# TYPE heapprofd_uprobe_nop5_optimized gauge\n"
                          "heapprofd_uprobe_nop5_optimized %d\n"
                          "# HELP heapprofd_report_probe_hit_seconds CPU time a hit of the "
                          "in-process sampler's report probe adds, measured at start.\n"
                          "# TYPE heapprofd_report_probe_hit_seconds gauge\n"
                          "heapprofd_report_probe_hit_seconds{function=\"plain\"} %.9f\n"
                          "heapprofd_report_probe_hit_seconds{function=\"nop5\"} %.9f\n",
                          ro.optimizes, ro.plain_ns / 1e9, ro.optimized_ns / 1e9);
    return e;
}

/* The target table's counters; nothing when BPF is unavailable. */
/* The kernel's release and the BPF features heapprofd probed in it at
 * start: a 0 is one it does without (the start line says what that costs). */
static int write_kernel_features(const struct kernel_features *kf, struct strbuf *out)
{
    char release[sizeof(kf->release) * 2];
    label_escape(release, sizeof(release), kf->release);
    int e = strbuf_printf(out,
                          "# HELP heapprofd_kernel_info The running kernel's release.\n"
                          "# TYPE heapprofd_kernel_info gauge\n"
                          "heapprofd_kernel_info{release=\"%s\"} 1\n"
                          "# HELP heapprofd_kernel_feature Whether the kernel has a BPF feature "
                          "heapprofd uses (1), or heapprofd does without it (0); since: the "
                          "Linux version that brought it (docs/operations.md).\n"
                          "# TYPE heapprofd_kernel_feature gauge\n",
                          release);
    for (int f = 0; f < KF_COUNT && e == 0; f++)
        e = strbuf_printf(out, "heapprofd_kernel_feature{feature=\"%s\",since=\"%s\"} %d\n",
                          kernel_feature_name(f), kernel_feature_since(f), kf->has[f] ? 1 : 0);
    return e;
}

static int write_target_counters(struct daemon_ctx *ctx, struct strbuf *out)
{
    struct targets_counters c;
    struct probe_cost cost;
    targets_read_counters(ctx->targets, &c, &cost);
    unsigned long long errors = c.attach_errors;
    unsigned long long attached = c.attached_total;
    unsigned long long detached = c.detached_total;
    unsigned long long reattached = c.reattached_total;
    unsigned long long idle = c.idle_detached_total;
    unsigned long long ns_per_hit = cost.ns_per_hit;
    unsigned long long ns_per_sharer = cost.ns_per_sharer;
    unsigned long long ns_when_shared = cost.ns_when_shared;
    unsigned long long attach_ns = c.last_attach_ns;
    unsigned long long detach_ns = c.last_detach_ns;
    int e = emit_metric(out, "targets", "gauge", "Processes being profiled.",
                        targets_list(ctx->targets, NULL, 0));
    if (e == 0)
        e = emit_metric(out, "attach_errors_total", "counter",
                        "Attempts to profile a process that failed, the process still there "
                        "(races with its exit or exec are heapprofd_attach_raced_total).",
                        errors);
    if (e == 0)
        e = strbuf_printf(out,
                          "# HELP heapprofd_attach_raced_total Attaches that failed because "
                          "their process exited or exec'd meanwhile: no error.\n"
                          "# TYPE heapprofd_attach_raced_total counter\n"
                          "heapprofd_attach_raced_total{reason=\"exited\"} %llu\n"
                          "heapprofd_attach_raced_total{reason=\"exec\"} %llu\n",
                          (unsigned long long)c.attach_raced[RACE_EXITED],
                          (unsigned long long)c.attach_raced[RACE_EXEC]);
    if (e == 0)
        e = emit_metric(out, "attached_total", "counter", "Processes attached.", attached);
    if (e == 0)
        e = emit_metric(out, "detached_total", "counter",
                        "Processes detached (exited, idle, or pid reused).", detached);
    if (e == 0)
        e = emit_metric(out, "reattached_total", "counter",
                        "Processes attached again after they exec'd.", reattached);
    if (e == 0)
        e = emit_metric(out, "idle_detached_total", "counter",
                        "Processes detached because nothing held them any more (--idle-detach, "
                        "the end of a seconds= window, a parent let go).",
                        idle);
    if (e == 0)
        e = strbuf_printf(out,
                          "# HELP heapprofd_probe_hit_cost_seconds CPU time one probe hit adds "
                          "to a process, calibrated at start-up (0: not calibrated).\n"
                          "# TYPE heapprofd_probe_hit_cost_seconds gauge\n"
                          "heapprofd_probe_hit_cost_seconds %.9f\n"
                          "# HELP heapprofd_probe_hit_cost_shared_seconds CPU time a probe "
                          "hit costs more when other targets have links on the same library "
                          "(when=first: once any has; when=each: for each), calibrated.\n"
                          "# TYPE heapprofd_probe_hit_cost_shared_seconds gauge\n"
                          "heapprofd_probe_hit_cost_shared_seconds{when=\"first\"} %.9f\n"
                          "heapprofd_probe_hit_cost_shared_seconds{when=\"each\"} %.9f\n",
                          ns_per_hit / 1e9, ns_when_shared / 1e9, ns_per_sharer / 1e9);
    if (e == 0)
        e = strbuf_printf(out,
                          "# HELP heapprofd_last_attach_seconds Time the last attach took.\n"
                          "# TYPE heapprofd_last_attach_seconds gauge\n"
                          "heapprofd_last_attach_seconds %.6f\n"
                          "# HELP heapprofd_last_detach_seconds Time removing the probes of the "
                          "last detached process took.\n"
                          "# TYPE heapprofd_last_detach_seconds gauge\n"
                          "heapprofd_last_detach_seconds %.6f\n",
                          attach_ns / 1e9, detach_ns / 1e9);
    if (e == 0)
        e = strbuf_printf(out,
                          "# HELP heapprofd_probe_layout How probes are attached.\n"
                          "# TYPE heapprofd_probe_layout gauge\n"
                          "heapprofd_probe_layout{layout=\"%s\"} 1\n",
                          bpf_state_layout_name(ctx->bpf->layout));
    if (e == 0)
        e = write_kernel_features(&ctx->bpf->kernel, out);
    if (e == 0)
        e = write_inprocess_counters(&c, out);
    return e;
}

/* The unwind tables' counters; nothing with frame pointers only. */
static int write_unwind_metrics(struct daemon_ctx *ctx, struct strbuf *out)
{
    struct unwind_stats us;
    unwind_manager_stats(ctx->unwind, &us);
    int e = emit_metric(out, "unwind_tables_built_total", "counter",
                        "Unwind tables built from .eh_frame/.debug_frame.", us.tables_built);
    if (e == 0)
        e = emit_metric(out, "unwind_table_failures_total", "counter",
                        "Files without usable CFI, or unreadable (unwound by frame pointers).",
                        us.build_failures);
    if (e == 0)
        e = emit_metric(out, "unwind_tables_rows_full_total", "counter",
                        "Tables that did not fit the rows array (frame pointers used).",
                        us.rows_full);
    if (e == 0)
        e = emit_metric(out, "unwind_update_errors_total", "counter",
                        "Processes whose unwind tables could not all be given (logged).",
                        us.update_errors);
    if (e == 0)
        e = strbuf_printf(out,
                          "# HELP heapprofd_unwind_table_build_seconds_total Time spent building "
                          "unwind tables.\n"
                          "# TYPE heapprofd_unwind_table_build_seconds_total counter\n"
                          "heapprofd_unwind_table_build_seconds_total %.6f\n",
                          us.build_ns / 1e9);
    if (e == 0)
        e = strbuf_printf(out,
                          "# HELP heapprofd_unwind_rows Unwind table rows in use, of %u.\n"
                          "# TYPE heapprofd_unwind_rows gauge\n"
                          "heapprofd_unwind_rows %zu\n"
                          "# HELP heapprofd_unwind_files Files with unwind tables loaded.\n"
                          "# TYPE heapprofd_unwind_files gauge\n"
                          "heapprofd_unwind_files %zu\n",
                          HP_MAX_UNWIND_ROWS, us.rows_used, us.files);
    return e;
}

/* The HTTP server's and the profile builds' counters. */
static int write_request_metrics(struct daemon_ctx *ctx, struct strbuf *out)
{
    int e = emit_metric(out, "http_requests_total", "counter", "HTTP requests answered.",
                        atomic_load(&ctx->requests));
    if (e == 0)
        e = emit_metric(out, "http_request_errors_total", "counter",
                        "HTTP requests answered with an error status.",
                        atomic_load(&ctx->request_errors));
    if (e == 0)
        e = emit_metric(out, "profiles_served_total", "counter", "Profiles served.",
                        atomic_load(&ctx->profiles_served));
    if (e == 0)
        e = emit_metric(out, "delta_windows_open", "gauge",
                        "Delta profiles (seconds=) in their window now.",
                        atomic_load(&ctx->delta_windows_open));
    if (e == 0)
        e = strbuf_printf(out,
                          "# HELP heapprofd_profile_build_seconds Time spent building and "
                          "encoding profiles (sum and count: divide for the mean per scrape).\n"
                          "# TYPE heapprofd_profile_build_seconds summary\n"
                          "heapprofd_profile_build_seconds_sum %.6f\n"
                          "heapprofd_profile_build_seconds_count %llu\n",
                          atomic_load(&ctx->profile_build_ns) / 1e9,
                          (unsigned long long)atomic_load(&ctx->profile_builds));
    return e;
}

/* The symbol cache's size and use. */
static int write_symbol_cache_metrics(struct daemon_ctx *ctx, struct strbuf *out)
{
    struct symbol_cache_stats sc;
    symbol_cache_stats(ctx->cache, &sc);
    int e =
        strbuf_printf(out,
                      "# HELP heapprofd_symbol_cache_files ELF files open for symbolization, "
                      "of %llu.\n"
                      "# TYPE heapprofd_symbol_cache_files gauge\n"
                      "heapprofd_symbol_cache_files %llu\n"
                      "# HELP heapprofd_symbol_cache_bytes Bytes of ELF and debug files they map, "
                      "of %llu.\n"
                      "# TYPE heapprofd_symbol_cache_bytes gauge\n"
                      "heapprofd_symbol_cache_bytes %llu\n",
                      (unsigned long long)sc.max_entries, (unsigned long long)sc.entries,
                      (unsigned long long)sc.max_bytes, (unsigned long long)sc.bytes);
    if (e == 0)
        e = emit_metric(out, "symbol_cache_hits_total", "counter",
                        "Mappings whose file was open already.", sc.hits);
    if (e == 0)
        e = emit_metric(out, "symbol_cache_misses_total", "counter",
                        "Mappings whose file had to be opened.", sc.misses);
    if (e == 0)
        e = emit_metric(out, "symbol_cache_evictions_total", "counter",
                        "Files closed to keep the cache within its bounds or idle too long.",
                        sc.evictions);
    return e;
}

/* Fetches of debug files from debuginfod, when servers are configured. */
static int write_debuginfod_metrics(struct daemon_ctx *ctx, struct strbuf *out)
{
    struct debuginfod_fetch_stats st;
    struct symbol_cache_stats sc;
    debuginfod_fetch_stats(ctx->cache->fetch, &st);
    symbol_cache_stats(ctx->cache, &sc);
    int e = strbuf_printf(out, "# HELP heapprofd_debuginfod_fetches_total Debug files fetched "
                               "from debuginfod by build ID, by how the fetch ended.\n"
                               "# TYPE heapprofd_debuginfod_fetches_total counter\n");
    for (int r = 0; r < DEBUGINFOD_NRESULTS && e == 0; r++)
        e = strbuf_printf(out, "heapprofd_debuginfod_fetches_total{result=\"%s\"} %llu\n",
                          debuginfod_result_name(r), (unsigned long long)st.fetches[r]);
    if (e == 0)
        e = emit_metric(out, "debuginfod_pending", "gauge",
                        "Build IDs queued for debuginfod or in flight.", st.pending);
    if (e == 0)
        e = emit_metric(out, "debuginfod_refused_total", "counter",
                        "Asks for a debug file not queued (queue full); asked again later.",
                        st.refused);
    if (e == 0)
        e = emit_metric(out, "symbol_cache_reopened_total", "counter",
                        "Files opened anew for a debug file debuginfod brought.", sc.reopened);
    return e;
}

int metrics_write(struct daemon_ctx *ctx, const struct caller *who, struct strbuf *out)
{
    int e =
        emit_metric(out, "bpf_up", "gauge", "1 if the BPF programs are loaded.", ctx->bpf != NULL);
    if (e == 0 && ctx->bpf)
        e = write_bpf_metrics(ctx, out);
    if (e == 0 && ctx->targets)
        e = write_target_counters(ctx, out);
    if (e == 0 && ctx->unwind)
        e = write_unwind_metrics(ctx, out);
    if (e == 0)
        e = write_request_metrics(ctx, out);
    if (e == 0 && ctx->targets && ctx->bpf)
        e = write_target_metrics(ctx, who, out);
    if (e == 0 && ctx->watch)
        e = write_watch_metrics(ctx, out);
    if (e == 0 && ctx->cache)
        e = write_symbol_cache_metrics(ctx, out);
    if (e == 0 && ctx->cache && ctx->cache->fetch)
        e = write_debuginfod_metrics(ctx, out);
    return e;
}
