/*
 * options.h - heapprofd's settings, from the command line and a config file.
 *
 * Every command-line flag has a config-file equivalent: a line `name =
 * value` with the flag's name without dashes (docs/configuration.md). Each
 * option is described once, in options_table.c.
 * Flags given on the command line are applied after the file, so they win;
 * repeatable ones (pid, comm, exe, cgroup, trust-uid, trust-group) add to
 * the file's.
 *
 * Ownership: a `struct options` owns its strings; free with options_free().
 */
#ifndef HEAPPROF_OPTIONS_H
#define HEAPPROF_OPTIONS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "access.h"
#include "bpf_state.h"
#include "hp_limits.h"
#include "sampler_choice.h"
#include "target_rules.h"

/* Default mean bytes between samples: Go's and jemalloc's. */
#define OPTIONS_DEFAULT_SAMPLE_INTERVAL 524288
/* Default cap on processes profiled at once: each costs a few probes and
 * the scan of its maps every second. */
#define OPTIONS_DEFAULT_MAX_TARGETS 256
/* Default --idle-detach: a process that only requests named stays
 * attached this long after the last one, long enough for a person's
 * second look or a scraper's next round, short enough that a quick look
 * does not cost for the rest of the day. */
#define OPTIONS_DEFAULT_IDLE_DETACH "10m"
/* The longest --idle-detach: 30 days. */
#define OPTIONS_MAX_IDLE_DETACH_NS (720 * 3600 * 1000000000ull)
/* Default share of max-targets one untrusted caller may hold: 1/8 (32 of
 * 256), so that at least eight users fill the table, not one. */
#define OPTIONS_DEFAULT_PER_UID_SHARE 8
/* Default --history-interval: a point of memory over time per process
 * every 10 s; 360 are kept (history.h), so an hour. */
#define OPTIONS_DEFAULT_HISTORY_INTERVAL "10s"
/* The longest --history-interval: an hour (a history of 15 days). */
#define OPTIONS_MAX_HISTORY_INTERVAL_NS (3600 * 1000000000ull)
/* Default pin directory of the BPF maps (see docs/operations.md). */
#define OPTIONS_DEFAULT_PIN_DIR "/sys/fs/bpf/heapprofd"
#define OPTIONS_DEFAULT_SAMPLER_DIR "/run/heapprofd"

/* Default directory of debug files fetched from debuginfod: under the
 * unit's CacheDirectory=heapprofd, which its sandbox leaves writable. */
#define OPTIONS_DEFAULT_DEBUGINFOD_CACHE "/var/cache/heapprofd/debuginfod"
/* The longest debuginfod-timeout: a debug file of a large program (a
 * browser's, gigabytes) on a slow link; past that, fix the link. */
#define OPTIONS_MAX_DEBUGINFOD_TIMEOUT_NS (3600 * 1000000000ull)

/* What the user asked for. */
struct options {
    char listen_host[64];      /* "127.0.0.1" */
    uint16_t listen_port;      /* 6060 */
    uint64_t sample_interval;  /* mean bytes between samples; 1 records all */
    pid_t pids[HP_MAX_TARGETS];
    size_t npids;
    struct target_rule_set rules; /* --comm, --exe, --cgroup */
    size_t max_targets;        /* processes profiled at once */
    size_t max_targets_per_uid; /* of which attached for one untrusted uid */
    uint64_t idle_detach_ns;   /* a request holds a process this long (0: for ever) */
    uint64_t history_interval_ns; /* between two points of memory over time (0: none kept) */
    char pin_dir[256];         /* "" : maps are not pinned */
    char sampler_dir[200];     /* where the shared sampler file is ("": a memfd per target) */
    char config_path[256];     /* "" : no config file */
    char unix_path[108];       /* "" : no unix socket listener */
    char token_file[256];      /* "" : no bearer token required */
    int allow_remote;          /* a non-loopback --listen address is allowed */
    int open_loopback;         /* TCP callers are not identified: all trusted */
    struct access_trust trust; /* --trust-uid, --trust-group */
    int unwind_fp_only;        /* --unwind fp: no CFI tables, frame pointers only */
    enum probe_layout layout;  /* LAYOUT_AUTO unless --probe-layout says */
    enum sampler_kind sampler; /* --sampler: uprobe (default) or inprocess */
    struct bpf_map_sizes map_sizes; /* --max-stacks etc.; 0: hp_limits.h's */
    char debuginfod_urls[1024];     /* "": the environment's DEBUGINFOD_URLS; "none": off */
    char debuginfod_cache[256];     /* where fetched debug files are kept */
    uint64_t debuginfod_timeout_ns; /* the bound on one fetch */
    int show_help;
};

/*
 * Parses the config file named by --config (if any), then argv, into `o`
 * (defaults first). On a bad argument or line returns -EINVAL with a
 * one-line reason in `err` naming the file and line.
 */
int options_parse(int argc, char **argv, struct options *o, char *err, size_t errlen);

/*
 * Refuses settings that contradict each other, each valid alone:
 * allow-remote without token-file (a remote caller has no uid to check),
 * open-loopback with token-file. -EINVAL with a one-line reason.
 */
int options_check(const struct options *o, char *err, size_t errlen);

/* Frees the strings of `o`. */
void options_free(struct options *o);

/* Prints the usage text. */
void options_usage(FILE *out);

/* Writes the names of the settings that a SIGHUP does not change ("listen,
 * sample-interval, ..."): the maps, listeners or tables were made with them. */
void options_restart_only(char *out, size_t len);

#endif
