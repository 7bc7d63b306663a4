/*
 * options_table.c - every heapprofd option, one row each (see
 * options_table.h), and the setters the rows name. Generic setters (a
 * number, a duration, a path, yes/no, a choice) write the member the row
 * names with offsetof(); the others (listen, pid, the rules, the trust
 * lists) know their member.
 */
#include "options_table.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include "debuginfod_fetch.h"
#include "sampling_math.h"
#include "strutil.h"

/* The member `m` of struct options, for a generic setter. */
#define FIELD(m) .field = offsetof(struct options, m), .size = sizeof(((struct options *)0)->m)
/* A number macro as text, for a default or a limit written into a text. */
#define STR_(x) #x
#define STR(x) STR_(x)

/* Map sizes outside these are refused: below, nothing fits; above, the
 * kernel memory they take is out of proportion. */
#define MIN_MAP_ENTRIES 16
#define MAX_MAP_ENTRIES (1u << 24)

/* The member a generic setter writes. */
static void *member(struct options *o, const struct option_def *d)
{
    return (char *)o + d->field;
}

/* A number in [min, max] into a member of 4 or 8 bytes. */
static int set_number(struct options *o, const struct option_def *d, const char *v)
{
    uint64_t n;
    if (parse_u64(v, d->min, d->max, &n) != 0)
        return -EINVAL;
    if (d->size == sizeof(uint32_t)) {
        uint32_t n32 = (uint32_t)n;
        memcpy(member(o, d), &n32, sizeof(n32));
    } else {
        memcpy(member(o, d), &n, sizeof(n));
    }
    return 0;
}

/* A duration of `min` to `max` nanoseconds into a uint64_t member. */
static int set_duration(struct options *o, const struct option_def *d, const char *v)
{
    uint64_t ns;
    if (parse_duration(v, d->max, &ns) != 0 || ns < d->min)
        return -EINVAL;
    memcpy(member(o, d), &ns, sizeof(ns));
    return 0;
}

/* A path into a char array member; -EINVAL if it does not fit (a path
 * cut short would name another file). */
static int set_path(struct options *o, const struct option_def *d, const char *v)
{
    if (strlen(v) >= d->size)
        return -EINVAL;
    snprintf(member(o, d), d->size, "%s", v);
    return 0;
}

/* An absolute path: the daemon's working directory is no one's business. */
static int set_abs_path(struct options *o, const struct option_def *d, const char *v)
{
    return v[0] == '/' ? set_path(o, d, v) : -EINVAL;
}

/* An absolute directory, or "none": an empty member. */
static int set_path_or_none(struct options *o, const struct option_def *d, const char *v)
{
    if (strcmp(v, "none") == 0) {
        *(char *)member(o, d) = '\0';
        return 0;
    }
    return set_abs_path(o, d, v);
}

/* "yes" or "no" into an int member. */
static int set_yes_no(struct options *o, const struct option_def *d, const char *v)
{
    int yes = strcmp(v, "yes") == 0;
    if (!yes && strcmp(v, "no") != 0)
        return -EINVAL;
    memcpy(member(o, d), &yes, sizeof(yes));
    return 0;
}

/* One of the row's choices into an int (or enum) member: its index. */
static int set_choice(struct options *o, const struct option_def *d, const char *v)
{
    _Static_assert(sizeof(enum probe_layout) == sizeof(int) &&
                       sizeof(enum sampler_kind) == sizeof(int),
                   "set_choice writes an int");
    const char *name;
    for (int i = 0; (name = d->choice(i)) != NULL; i++) {
        if (strcmp(v, name) == 0) {
            memcpy(member(o, d), &i, sizeof(i));
            return 0;
        }
    }
    return -EINVAL;
}

/* "HOST:PORT": HOST may be empty, meaning 127.0.0.1; "[::1]:PORT" for IPv6. */
static int set_listen(struct options *o, const struct option_def *d, const char *v)
{
    const char *colon = strrchr(v, ':');
    uint64_t port;
    size_t hostlen = colon ? (size_t)(colon - v) : 0;
    if (!colon || parse_u64(colon + 1, d->min, d->max, &port) != 0 ||
        hostlen >= sizeof(o->listen_host))
        return -EINVAL;
    if (hostlen == 0)
        snprintf(o->listen_host, sizeof(o->listen_host), "127.0.0.1");
    else
        snprintf(o->listen_host, sizeof(o->listen_host), "%.*s", (int)hostlen, v);
    o->listen_port = (uint16_t)port;
    return 0;
}

/* One more process to profile from the start. */
static int set_pid(struct options *o, const struct option_def *d, const char *v)
{
    uint64_t n;
    if (parse_u64(v, d->min, d->max, &n) != 0)
        return -EINVAL;
    if (o->npids == (size_t)d->most)
        return -ENOSPC;
    o->pids[o->npids++] = (pid_t)n;
    return 0;
}

/* A rule by command name. */
static int set_comm(struct options *o, const struct option_def *d, const char *v)
{
    (void)d;
    return target_rules_add(o->rules.comms, o->rules.comm_samplers, o->rules.comm_owners,
                            &o->rules.ncomms, v);
}

/* A rule by executable: an absolute path, as /proc/PID/exe reads. */
static int set_exe(struct options *o, const struct option_def *d, const char *v)
{
    (void)d;
    return v[0] == '/' ? target_rules_add(o->rules.exes, o->rules.exe_samplers, o->rules.exe_owners,
                                          &o->rules.nexes, v)
                       : -EINVAL;
}

/* A rule by cgroup: an absolute path in the v2 hierarchy. */
static int set_cgroup(struct options *o, const struct option_def *d, const char *v)
{
    (void)d;
    return v[0] == '/' ? target_rules_add(o->rules.cgroups, o->rules.cgroup_samplers,
                                          o->rules.cgroup_owners, &o->rules.ncgroups, v)
                       : -EINVAL;
}

/* A trusted uid or user name. */
static int set_trust_uid(struct options *o, const struct option_def *d, const char *v)
{
    (void)d;
    return access_trust_add_uid(&o->trust, v);
}

/* A trusted group name or gid. */
static int set_trust_group(struct options *o, const struct option_def *d, const char *v)
{
    (void)d;
    return access_trust_add_group(&o->trust, v);
}

/* The probe layouts, by the names bpf_state gives them. */
static const char *layout_choice(int i)
{
    return i >= LAYOUT_AUTO && i <= LAYOUT_CLASSIC ? bpf_state_layout_name(i) : NULL;
}

/* The samplers, by the names sampler_choice gives them. */
static const char *sampler_choice(int i)
{
    return i >= SAMPLER_UPROBE && i <= SAMPLER_INPROCESS ? sampler_name(i) : NULL;
}

/* The unwinders: index 1 (fp) is unwind_fp_only's true. */
static const char *unwind_choice(int i)
{
    static const char *const names[] = {"cfi", "fp"};
    return i >= 0 && i < 2 ? names[i] : NULL;
}

/* What a target rule may end in. */
#define RULE_SAMPLER ", optionally followed by ' sampler=uprobe|inprocess' and ' uid=USER'"
/* The limits of a BPF map size. */
#define MAP_SIZE                                                                                   \
    .set = set_number, .min = MIN_MAP_ENTRIES, .max = MAX_MAP_ENTRIES,                             \
    .wants = "a number of entries in {min}..{max}", .flags = OPT_RESTART

/* The first two members positional, so that a row reads like a getopt
 * entry (tests/package/check_manpage.py finds the flags that way). */
const struct option_def option_table[] = {
    {"listen", required_argument, "ADDR:PORT", set_listen, .def = "127.0.0.1:6060", .min = 1,
     .max = UINT16_MAX, .help = "where to serve HTTP (default {default})",
     .wants = "ADDR:PORT with a port {min}-{max}", .flags = OPT_RESTART},
    {"sample-interval", required_argument, "BYTES", set_number,
     .def = STR(OPTIONS_DEFAULT_SAMPLE_INTERVAL), .min = 1, .max = HP_MAX_INTERVAL,
     FIELD(sample_interval),
     .help = "mean bytes between samples (default {default}; 1 records every allocation)",
     .wants = "bytes in {min}..{max}", .flags = OPT_RESTART},
    {"pid", required_argument, "N", set_pid, .min = 1, .max = HP_MAX_PID, .most = HP_MAX_TARGETS,
     .help = "profile process N (repeatable, at most {most})",
     .wants = "a process id in {min}..{max}"},
    {"comm", required_argument, "NAME", set_comm, .most = TARGET_RULES_MAX,
     .help = "profile processes named NAME, as they start (repeatable, at most {most})",
     .wants = "a command name" RULE_SAMPLER},
    {"exe", required_argument, "PATH", set_exe, .most = TARGET_RULES_MAX,
     .help = "profile processes running PATH, as they start (repeatable, at most {most})",
     .wants = "an absolute path" RULE_SAMPLER},
    {"cgroup", required_argument, "PATH", set_cgroup, .most = TARGET_RULES_MAX,
     .help = "profile processes in cgroup PATH or below, e.g. "
             "/system.slice/redis-server.service (repeatable, at most {most})",
     .wants = "an absolute cgroup path such as /system.slice/x.service" RULE_SAMPLER},
    {"max-targets", required_argument, "N", set_number, .def = STR(OPTIONS_DEFAULT_MAX_TARGETS),
     .min = 1, .max = HP_MAX_TARGETS, FIELD(max_targets),
     .help = "processes profiled at once (default {default}, at most {max})",
     .wants = "a number in {min}..{max}"},
    {"idle-detach", required_argument, "DURATION", set_duration, .def = OPTIONS_DEFAULT_IDLE_DETACH,
     .max = OPTIONS_MAX_IDLE_DETACH_NS, FIELD(idle_detach_ns),
     .help = "detach a process that only requests named after that long without one "
             "(default {default}, at most {max}; 0: never)",
     .wants = "a duration such as 90s, 10m or 1h, at most {max}; 0 never detaches",
     .flags = OPT_DURATION},
    {"history-interval", required_argument, "DURATION", set_duration,
     .def = OPTIONS_DEFAULT_HISTORY_INTERVAL, .max = OPTIONS_MAX_HISTORY_INTERVAL_NS,
     FIELD(history_interval_ns),
     .help = "take a point of each process's memory over time this often, keeping "
             "360 (default {default}: an hour; at most {max}; 0: keep none)",
     .wants = "a duration such as 10s or 1m, at most {max}; 0 keeps no history",
     .flags = OPT_DURATION | OPT_RESTART},
    {"pin-dir", required_argument, "DIR", set_path_or_none, .def = OPTIONS_DEFAULT_PIN_DIR,
     FIELD(pin_dir),
     .help = "where BPF maps are pinned to survive restarts (default {default}; 'none' to "
             "not pin)",
     .wants = "an absolute directory path, or none", .flags = OPT_RESTART},
    {"config", required_argument, "FILE", set_path, FIELD(config_path),
     .help = "read settings from FILE (name = value lines)", .wants = "a file path",
     .flags = OPT_NOT_IN_FILE | OPT_FIRST},
    {"unix", required_argument, "PATH", set_abs_path, FIELD(unix_path),
     .help = "also serve on a unix socket; callers may profile only their own processes "
             "unless trusted",
     .wants = "an absolute socket path", .flags = OPT_RESTART},
    {"token-file", required_argument, "FILE", set_abs_path, FIELD(token_file),
     .help = "TCP requests need 'Authorization: Bearer <token>'", .wants = "an absolute file path",
     .flags = OPT_RESTART},
    {"allow-remote", optional_argument, NULL, set_yes_no, FIELD(allow_remote),
     .help = "allow a non-loopback --listen address (needs --token-file)", .wants = "yes or no",
     .flags = OPT_RESTART},
    {"trust-uid", required_argument, "UID", set_trust_uid, .most = ACCESS_MAX_TRUSTED,
     .help =
         "this uid or user may profile any process (repeatable, at most {most}; root always may)",
     .wants = "a uid or a user name that exists", .flags = OPT_RESTART},
    {"trust-group", required_argument, "GROUP", set_trust_group, .most = ACCESS_MAX_TRUSTED,
     .help = "members of GROUP may profile any process (repeatable, at most {most})",
     .wants = "a group name or gid that exists", .flags = OPT_RESTART},
    {"open-loopback", optional_argument, NULL, set_yes_no, FIELD(open_loopback),
     .help = "every local TCP caller may profile every process (no peer check: single-user "
             "machines only)",
     .wants = "yes or no", .flags = OPT_RESTART},
    {"max-targets-per-uid", required_argument, "N", set_number, .min = 1, .max = HP_MAX_TARGETS,
     FIELD(max_targets_per_uid),
     .help = "processes one untrusted caller may have attached (default "
             "max-targets/" STR(OPTIONS_DEFAULT_PER_UID_SHARE) ", at most {max})",
     .wants = "a number in {min}..{max}"},
    {"unwind", required_argument, "cfi|fp", set_choice, .def = "cfi", .choice = unwind_choice,
     FIELD(unwind_fp_only),
     .help = "stacks from .eh_frame tables (cfi) or frame pointers only (fp: no table "
             "memory, shorter stacks); default {default}",
     .wants = "{choices}", .flags = OPT_RESTART},
    {"probe-layout", required_argument, "L", set_choice, .def = "auto", .choice = layout_choice,
     FIELD(layout), .help = "how probes attach: {choices} (default {default})",
     .wants = "{choices}", .flags = OPT_RESTART},
    {"sampler", required_argument, "S", set_choice, .def = "inprocess", .choice = sampler_choice,
     FIELD(sampler),
     .help = "{choices} (default {default}); inprocess samples inside the process, so that "
             "only sampled calls reach the kernel; per rule: --comm 'NAME sampler=inprocess'",
     .wants = "{choices}"},
    {"sampler-dir", required_argument, "DIR", set_path_or_none, .def = OPTIONS_DEFAULT_SAMPLER_DIR,
     FIELD(sampler_dir),
     .help = "root's directory for the in-process sampler's file, which every target maps "
             "(default {default}; 'none': a memfd per target, and probes registered per "
             "process)",
     .wants = "an absolute directory path, or none", .flags = OPT_RESTART},
    {"max-stacks", required_argument, "N", MAP_SIZE, FIELD(map_sizes.stacks),
     .help = "entries of the BPF map of stacks (default " STR(HP_MAX_STACKS) ")"},
    {"max-counts", required_argument, "N", MAP_SIZE, FIELD(map_sizes.counts),
     .help = "entries of the BPF map of counts per stack (default " STR(HP_MAX_COUNTS) ")"},
    {"max-live", required_argument, "N", MAP_SIZE, FIELD(map_sizes.live),
     .help = "entries of the BPF map of live sampled allocations (default " STR(HP_MAX_LIVE) ")"},
    {"max-pending", required_argument, "N", MAP_SIZE, FIELD(map_sizes.pending),
     .help =
         "entries of the BPF map of allocator calls in flight (default " STR(HP_MAX_PENDING) ")"},
    {"debuginfod-urls", required_argument, "URLS", set_path, FIELD(debuginfod_urls),
     .help = "fetch missing debug files by build ID from these debuginfod servers "
             "(space-separated; default: the environment's DEBUGINFOD_URLS; 'none': never)",
     .wants = "space-separated server URLs, or none", .flags = OPT_RESTART},
    {"debuginfod-cache", required_argument, "DIR", set_abs_path,
     .def = OPTIONS_DEFAULT_DEBUGINFOD_CACHE, FIELD(debuginfod_cache),
     .help = "where debug files fetched from debuginfod are kept (default {default})",
     .wants = "an absolute directory path", .flags = OPT_RESTART},
    {"debuginfod-timeout", required_argument, "DURATION", set_duration,
     .def = DEBUGINFOD_FETCH_DEFAULT_TIMEOUT, .min = 1000000000,
     .max = OPTIONS_MAX_DEBUGINFOD_TIMEOUT_NS, FIELD(debuginfod_timeout_ns),
     .help = "the longest one debug file's fetch may take, off the request path (default "
             "{default}, at most {max})",
     .wants = "a duration such as 30s or 5m, from {min} to {max}",
     .flags = OPT_DURATION | OPT_RESTART},
    {"help", no_argument, NULL, NULL, .help = "print the usage and exit", .flags = OPT_NOT_IN_FILE},
};

const size_t option_count = sizeof(option_table) / sizeof(option_table[0]);

/* The row's choices as "a, b or c". */
static void write_choices(const struct option_def *d, char *out, size_t len)
{
    size_t n = 0, used = 0;
    while (d->choice && d->choice((int)n))
        n++;
    out[0] = '\0';
    for (size_t i = 0; i < n && used < len; i++) {
        const char *sep = i == 0 ? "" : i + 1 == n ? " or " : ", ";
        int w = snprintf(out + used, len - used, "%s%s", sep, d->choice((int)i));
        used += w > 0 ? (size_t)w : 0;
    }
}

/* A limit of the row, as a number or (OPT_DURATION) a duration. */
static void write_limit(const struct option_def *d, uint64_t v, char *out, size_t len)
{
    if (d->flags & OPT_DURATION)
        format_duration(v, out, len);
    else
        snprintf(out, len, "%llu", (unsigned long long)v);
}

/* What {name} (`n` bytes at `name`) stands for in the row's texts; -ENOENT
 * for a name that is not a fill-in (the braces are then the text's own). */
static int fill_in(const struct option_def *d, const char *name, size_t n, char *out, size_t len)
{
    if (n == 3 && strncmp(name, "min", n) == 0)
        write_limit(d, d->min, out, len);
    else if (n == 3 && strncmp(name, "max", n) == 0)
        write_limit(d, d->max, out, len);
    else if (n == 4 && strncmp(name, "most", n) == 0)
        snprintf(out, len, "%d", d->most);
    else if (n == 7 && strncmp(name, "default", n) == 0)
        snprintf(out, len, "%s", d->def ? d->def : "none");
    else if (n == 7 && strncmp(name, "choices", n) == 0)
        write_choices(d, out, len);
    else
        return -ENOENT;
    return 0;
}

void option_expand(const struct option_def *d, const char *text, char *out, size_t len)
{
    size_t used = 0;
    char fill[256];
    while (*text && used + 1 < len) {
        const char *end = *text == '{' ? strchr(text, '}') : NULL;
        if (end && fill_in(d, text + 1, (size_t)(end - text - 1), fill, sizeof(fill)) == 0) {
            int w = snprintf(out + used, len - used, "%s", fill);
            used = w > 0 && (size_t)w < len - used ? used + (size_t)w : len - 1;
            text = end + 1;
        } else {
            out[used++] = *text++;
        }
    }
    out[used] = '\0';
}
