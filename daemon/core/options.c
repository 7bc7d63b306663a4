/*
 * options.c - parses heapprofd's command line and config file into
 * `struct options` through one setter per option, so both accept the same
 * names and values, rejecting anything malformed with a reason.
 */
#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampling_math.h"
#include "strutil.h"

/* Lines of a config file at most, and the length of one. */
#define CONFIG_MAX_LINE 1024

void options_usage(FILE *out)
{
    fprintf(out,
            "usage: heapprofd [--listen ADDR:PORT] [--sample-interval BYTES] [--pid N]...\n"
            "                 [--comm NAME]... [--exe PATH]... [--cgroup PATH]...\n"
            "                 [--max-targets N] [--pin-dir DIR] [--config FILE]\n"
            "  --listen ADDR:PORT       where to serve HTTP (default 127.0.0.1:6060)\n"
            "  --sample-interval BYTES  mean bytes between samples (default 524288;\n"
            "                           1 records every allocation)\n"
            "  --pid N                  profile process N (repeatable)\n"
            "  --comm NAME              profile processes named NAME, as they start\n"
            "  --exe PATH               profile processes running PATH, as they start\n"
            "  --cgroup PATH            profile processes in cgroup PATH or below, e.g.\n"
            "                           /system.slice/redis-server.service\n"
            "  --max-targets N          processes profiled at once (default %d)\n"
            "  --pin-dir DIR            where BPF maps are pinned to survive restarts\n"
            "                           (default %s; 'none' to not pin)\n"
            "  --config FILE            read settings from FILE (name = value lines)\n"
            "  --unix PATH              also serve on a unix socket; callers may profile\n"
            "                           only their own processes unless root\n"
            "  --token-file FILE        TCP requests need 'Authorization: Bearer <token>'\n"
            "  --allow-remote           allow a non-loopback --listen address\n"
            "  --unwind cfi|fp          stacks from .eh_frame tables (default) or frame\n"
            "                           pointers only (no table memory, shorter stacks)\n"
            "  --probe-layout L         auto (default), session, multi or classic\n"
            "  --max-stacks N, --max-counts N, --max-live N, --max-pending N\n"
            "                           BPF map sizes (defaults in docs/operations.md)\n"
            "Profiles: GET /debug/pprof/heap?pid=N (see docs/http-api.md)\n",
            OPTIONS_DEFAULT_MAX_TARGETS, OPTIONS_DEFAULT_PIN_DIR);
}

/* The probe layout named `s`. */
static int parse_layout(const char *s, enum probe_layout *out)
{
    static const enum probe_layout all[] = {LAYOUT_AUTO, LAYOUT_SESSION, LAYOUT_MULTI,
                                            LAYOUT_CLASSIC};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        if (strcmp(s, bpf_state_layout_name(all[i])) == 0) {
            *out = all[i];
            return 0;
        }
    }
    return -EINVAL;
}

/* Splits "HOST:PORT" (HOST may be empty, meaning 127.0.0.1; "[::1]:PORT" for IPv6). */
static int set_listen(struct options *o, const char *v)
{
    const char *colon = strrchr(v, ':');
    uint64_t port;
    size_t hostlen = colon ? (size_t)(colon - v) : 0;
    if (!colon || parse_u64(colon + 1, 1, 65535, &port) != 0 ||
        hostlen >= sizeof(o->listen_host))
        return -EINVAL;
    if (hostlen == 0)
        snprintf(o->listen_host, sizeof(o->listen_host), "127.0.0.1");
    else
        snprintf(o->listen_host, sizeof(o->listen_host), "%.*s", (int)hostlen, v);
    o->listen_port = (uint16_t)port;
    return 0;
}

/* Appends a copy of `v` to a rule list. */
static int add_rule(char **list, size_t *n, const char *v)
{
    if (!*v)
        return -EINVAL;
    if (*n == TARGET_RULES_MAX)
        return -ENOSPC;
    list[*n] = strdup(v);
    if (!list[*n])
        return -ENOMEM;
    (*n)++;
    return 0;
}

/* Copies a path option; -EINVAL if it does not fit. */
static int set_path(char *dst, size_t len, const char *v)
{
    if (strlen(v) >= len)
        return -EINVAL;
    snprintf(dst, len, "%s", v);
    return 0;
}

/* What each option accepts, for its error message. */
static const struct {
    const char *name;
    const char *wants;
} option_help[] = {
    {"listen", "ADDR:PORT with a port 1-65535"},
    {"sample-interval", "bytes in 1..4294967296"},
    {"pid", "a process id in 1..4194304"},
    {"comm", "a command name"},
    {"exe", "an absolute path"},
    {"cgroup", "an absolute cgroup path such as /system.slice/x.service"},
    {"max-targets", "a number in 1..1024"},
    {"pin-dir", "an absolute directory path, or none"},
    {"config", "a file path"},
    {"probe-layout", "auto, session, multi or classic"},
    {"unix", "an absolute socket path"},
    {"token-file", "an absolute file path"},
    {"allow-remote", "yes or no"},
    {"unwind", "cfi or fp"},
    {"max-stacks", "a number of entries in 16..16777216"},
    {"max-counts", "a number of entries in 16..16777216"},
    {"max-live", "a number of entries in 16..16777216"},
    {"max-pending", "a number of entries in 16..16777216"},
};

/* Map sizes outside these are refused: below, nothing fits; above, the
 * kernel memory they take is out of proportion. */
#define MIN_MAP_ENTRIES 16
#define MAX_MAP_ENTRIES (1u << 24)

/* Sets option `name` to `v`; -EINVAL if the value is bad, -ENOENT if the name is unknown. */
static int set_option(struct options *o, const char *name, const char *v)
{
    uint64_t n;
    if (strcmp(name, "listen") == 0)
        return set_listen(o, v);
    if (strcmp(name, "sample-interval") == 0) {
        if (parse_u64(v, 1, HP_MAX_INTERVAL, &n) != 0)
            return -EINVAL;
        o->sample_interval = n;
        return 0;
    }
    if (strcmp(name, "pid") == 0) {
        if (parse_u64(v, 1, HP_MAX_PID, &n) != 0)
            return -EINVAL;
        if (o->npids == HP_MAX_TARGETS)
            return -ENOSPC;
        o->pids[o->npids++] = (pid_t)n;
        return 0;
    }
    if (strcmp(name, "comm") == 0)
        return add_rule(o->rules.comms, &o->rules.ncomms, v);
    if (strcmp(name, "exe") == 0)
        return v[0] == '/' ? add_rule(o->rules.exes, &o->rules.nexes, v) : -EINVAL;
    if (strcmp(name, "cgroup") == 0)
        return v[0] == '/' ? add_rule(o->rules.cgroups, &o->rules.ncgroups, v) : -EINVAL;
    if (strcmp(name, "max-targets") == 0) {
        if (parse_u64(v, 1, HP_MAX_TARGETS, &n) != 0)
            return -EINVAL;
        o->max_targets = (size_t)n;
        return 0;
    }
    if (strcmp(name, "pin-dir") == 0) {
        if (strcmp(v, "none") == 0) {
            o->pin_dir[0] = '\0';
            return 0;
        }
        return v[0] == '/' ? set_path(o->pin_dir, sizeof(o->pin_dir), v) : -EINVAL;
    }
    if (strcmp(name, "config") == 0)
        return set_path(o->config_path, sizeof(o->config_path), v);
    if (strcmp(name, "probe-layout") == 0)
        return parse_layout(v, &o->layout);
    if (strcmp(name, "unix") == 0)
        return v[0] == '/' ? set_path(o->unix_path, sizeof(o->unix_path), v) : -EINVAL;
    if (strcmp(name, "token-file") == 0)
        return v[0] == '/' ? set_path(o->token_file, sizeof(o->token_file), v) : -EINVAL;
    if (strcmp(name, "unwind") == 0) {
        if (strcmp(v, "cfi") != 0 && strcmp(v, "fp") != 0)
            return -EINVAL;
        o->unwind_fp_only = strcmp(v, "fp") == 0;
        return 0;
    }
    if (strcmp(name, "allow-remote") == 0) {
        if (strcmp(v, "yes") != 0 && strcmp(v, "no") != 0)
            return -EINVAL;
        o->allow_remote = strcmp(v, "yes") == 0;
        return 0;
    }
    uint32_t *size = strcmp(name, "max-stacks") == 0    ? &o->map_sizes.stacks
                     : strcmp(name, "max-counts") == 0  ? &o->map_sizes.counts
                     : strcmp(name, "max-live") == 0    ? &o->map_sizes.live
                     : strcmp(name, "max-pending") == 0 ? &o->map_sizes.pending
                                                        : NULL;
    if (size) {
        if (parse_u64(v, MIN_MAP_ENTRIES, MAX_MAP_ENTRIES, &n) != 0)
            return -EINVAL;
        *size = (uint32_t)n;
        return 0;
    }
    return -ENOENT;
}

/* The error message for value `v` of option `name`, which set_option
 * refused with `e`: -ENOSPC when the list it adds to is full (the value may
 * be fine), else a bad value. */
static void bad_value(char *err, size_t errlen, const char *where, const char *name,
                      const char *v, int e)
{
    if (e == -ENOSPC) {
        snprintf(err, errlen, "%s%s: too many given, '%.64s' does not fit (at most %d)", where,
                 name, v, strcmp(name, "pid") == 0 ? HP_MAX_TARGETS : TARGET_RULES_MAX);
        return;
    }
    const char *wants = "a valid value";
    for (size_t i = 0; i < sizeof(option_help) / sizeof(option_help[0]); i++)
        if (strcmp(option_help[i].name, name) == 0)
            wants = option_help[i].wants;
    snprintf(err, errlen, "%s%s wants %s, not '%.64s'", where, name, wants, v);
}

/* Trims spaces and tabs at both ends, in place. */
static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

/* Applies the config file at `path`: `name = value` lines, '#' comments. */
static int read_config(struct options *o, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "re");
    if (!f) {
        snprintf(err, errlen, "config %s: %s", path, strerror(errno));
        return -EINVAL;
    }
    char line[CONFIG_MAX_LINE];
    int lineno = 0, e = 0;
    while (e == 0 && fgets(line, sizeof(line), f)) {
        lineno++;
        char where[300];
        snprintf(where, sizeof(where), "config %.200s:%d: ", path, lineno);
        if (!strchr(line, '\n') && !feof(f)) {
            snprintf(err, errlen, "%sline longer than %d bytes", where, CONFIG_MAX_LINE - 1);
            e = -EINVAL;
            break;
        }
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *s = trim(line);
        if (!*s)
            continue;
        char *eq = strchr(s, '=');
        if (!eq) {
            snprintf(err, errlen, "%swant 'name = value', got '%.64s'", where, s);
            e = -EINVAL;
            break;
        }
        *eq = '\0';
        char *name = trim(s), *value = trim(eq + 1);
        int r = strcmp(name, "config") == 0 ? -ENOENT : set_option(o, name, value);
        if (r == -ENOENT) {
            snprintf(err, errlen, "%sunknown setting '%.64s'", where, name);
            e = -EINVAL;
        } else if (r) {
            bad_value(err, errlen, where, name, value, r);
            e = -EINVAL;
        }
    }
    fclose(f);
    return e;
}

/* The defaults. */
static void set_defaults(struct options *o)
{
    memset(o, 0, sizeof(*o));
    snprintf(o->listen_host, sizeof(o->listen_host), "127.0.0.1");
    o->listen_port = 6060;
    o->sample_interval = 524288;
    o->max_targets = OPTIONS_DEFAULT_MAX_TARGETS;
    snprintf(o->pin_dir, sizeof(o->pin_dir), "%s", OPTIONS_DEFAULT_PIN_DIR);
}

int options_parse(int argc, char **argv, struct options *o, char *err, size_t errlen)
{
    static const struct option longopts[] = {
        {"listen", required_argument, NULL, 0},
        {"sample-interval", required_argument, NULL, 0},
        {"pid", required_argument, NULL, 0},
        {"comm", required_argument, NULL, 0},
        {"exe", required_argument, NULL, 0},
        {"cgroup", required_argument, NULL, 0},
        {"max-targets", required_argument, NULL, 0},
        {"pin-dir", required_argument, NULL, 0},
        {"config", required_argument, NULL, 0},
        {"probe-layout", required_argument, NULL, 0},
        {"unix", required_argument, NULL, 0},
        {"token-file", required_argument, NULL, 0},
        {"allow-remote", optional_argument, NULL, 0},
        {"unwind", required_argument, NULL, 0},
        {"max-stacks", required_argument, NULL, 0},
        {"max-counts", required_argument, NULL, 0},
        {"max-live", required_argument, NULL, 0},
        {"max-pending", required_argument, NULL, 0},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    set_defaults(o);
    /* The file first, so that flags override it. */
    for (int pass = 0; pass < 2; pass++) {
        optind = 1;
        opterr = 0;
        int c, idx;
        while ((c = getopt_long(argc, argv, "", longopts, &idx)) != -1) {
            if (c == 'h') {
                o->show_help = 1;
                return 0;
            }
            if (c != 0) {
                snprintf(err, errlen, "unknown or incomplete option '%s'", argv[optind - 1]);
                return -EINVAL;
            }
            const char *name = longopts[idx].name;
            if (pass == 0) {
                int r = strcmp(name, "config") == 0 ? set_option(o, name, optarg) : 0;
                if (r) {
                    bad_value(err, errlen, "--", name, optarg, r);
                    return -EINVAL;
                }
                continue;
            }
            /* A flag without a value (--allow-remote) means yes. */
            const char *value = optarg ? optarg : "yes";
            int r = strcmp(name, "config") != 0 ? set_option(o, name, value) : 0;
            if (r) {
                bad_value(err, errlen, "--", name, value, r);
                return -EINVAL;
            }
        }
        if (pass == 0 && o->config_path[0] && read_config(o, o->config_path, err, errlen) != 0)
            return -EINVAL;
    }
    if (optind < argc) {
        snprintf(err, errlen, "unexpected argument '%s'", argv[optind]);
        return -EINVAL;
    }
    return 0;
}

void options_free(struct options *o)
{
    target_rules_free(&o->rules);
}
