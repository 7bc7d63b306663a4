/*
 * test_options.c - the command line and the config file (options.c): every
 * flag and its config key set the same field; every bad value is refused
 * with a reason naming the option (and for the file, its path and line);
 * flags win over the file, and repeatable ones add to it; settings that
 * contradict each other are refused together (options_check).
 */
#include "check.h"
#include "options.h"
#include "options_table.h"
#include "strutil.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Parses the NULL-terminated flags after "heapprofd"; returns options_parse's result. */
static int parse(struct options *o, char *err, size_t errlen, const char *const *flags)
{
    char *argv[64] = {"heapprofd"};
    int argc = 1;
    while (flags[argc - 1] && argc < 63) {
        argv[argc] = (char *)flags[argc - 1];
        argc++;
    }
    err[0] = '\0';
    return options_parse(argc, argv, o, err, errlen);
}

#define PARSE(o, err, ...) parse(o, err, sizeof(err), (const char *const[]){__VA_ARGS__, NULL})

/* A config file with `text` in a fresh temporary path (written to `path`). */
static void write_config(char *path, size_t len, const char *text)
{
    snprintf(path, len, "/tmp/heapprof_options_XXXXXX");
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    if (fd < 0)
        return;
    CHECK_INT_EQ(write(fd, text, strlen(text)), (long long)strlen(text));
    close(fd);
}

/* The setting `name` holds in `o`, as text (the last one, for lists). */
static void setting(const struct options *o, const char *name, char *out, size_t len)
{
    const struct target_rule_set *r = &o->rules;
    const struct bpf_map_sizes *s = &o->map_sizes;
    out[0] = '\0';
    if (strcmp(name, "listen") == 0)
        snprintf(out, len, "%s:%u", o->listen_host, (unsigned)o->listen_port);
    else if (strcmp(name, "sample-interval") == 0)
        snprintf(out, len, "%llu", (unsigned long long)o->sample_interval);
    else if (strcmp(name, "pid") == 0 && o->npids)
        snprintf(out, len, "%d", (int)o->pids[o->npids - 1]);
    else if (strcmp(name, "comm") == 0 && r->ncomms)
        snprintf(out, len, "%s", r->comms[r->ncomms - 1]);
    else if (strcmp(name, "exe") == 0 && r->nexes)
        snprintf(out, len, "%s", r->exes[r->nexes - 1]);
    else if (strcmp(name, "cgroup") == 0 && r->ncgroups)
        snprintf(out, len, "%s", r->cgroups[r->ncgroups - 1]);
    else if (strcmp(name, "max-targets") == 0)
        snprintf(out, len, "%zu", o->max_targets);
    else if (strcmp(name, "pin-dir") == 0)
        snprintf(out, len, "%s", o->pin_dir);
    else if (strcmp(name, "probe-layout") == 0)
        snprintf(out, len, "%s", bpf_state_layout_name(o->layout));
    else if (strcmp(name, "sampler") == 0)
        snprintf(out, len, "%s", sampler_name(o->sampler));
    else if (strcmp(name, "unix") == 0)
        snprintf(out, len, "%s", o->unix_path);
    else if (strcmp(name, "token-file") == 0)
        snprintf(out, len, "%s", o->token_file);
    else if (strcmp(name, "allow-remote") == 0)
        snprintf(out, len, "%s", o->allow_remote ? "yes" : "no");
    else if (strcmp(name, "open-loopback") == 0)
        snprintf(out, len, "%s", o->open_loopback ? "yes" : "no");
    else if (strcmp(name, "trust-uid") == 0 && o->trust.nuids)
        snprintf(out, len, "%u", (unsigned)o->trust.uids[o->trust.nuids - 1]);
    else if (strcmp(name, "trust-group") == 0 && o->trust.ngids)
        snprintf(out, len, "%u", (unsigned)o->trust.gids[o->trust.ngids - 1]);
    else if (strcmp(name, "max-targets-per-uid") == 0)
        snprintf(out, len, "%zu", o->max_targets_per_uid);
    else if (strcmp(name, "unwind") == 0)
        snprintf(out, len, "%s", o->unwind_fp_only ? "fp" : "cfi");
    else if (strcmp(name, "max-stacks") == 0)
        snprintf(out, len, "%u", s->stacks);
    else if (strcmp(name, "max-counts") == 0)
        snprintf(out, len, "%u", s->counts);
    else if (strcmp(name, "max-live") == 0)
        snprintf(out, len, "%u", s->live);
    else if (strcmp(name, "max-pending") == 0)
        snprintf(out, len, "%u", s->pending);
}

/* What a target rule may end in, as the options' help says. */
#define RULE_SAMPLER ", optionally followed by ' sampler=uprobe|inprocess' and ' uid=USER'"

/* Each option with a value it takes (and the setting that gives) and one it refuses. */
static const struct {
    const char *name, *value, *gives, *bad, *wants;
} OPTIONS[] = {
    {"listen", "0.0.0.0:8080", "0.0.0.0:8080", "6060", "ADDR:PORT with a port 1-65535"},
    {"listen", "[::1]:7070", "[::1]:7070", "[::1]:65536", "ADDR:PORT with a port 1-65535"},
    {"listen", ":7070", "127.0.0.1:7070", "localhost:0", "ADDR:PORT with a port 1-65535"},
    {"sample-interval", "1", "1", "0", "bytes in 1..4294967296"},
    {"sample-interval", "4294967296", "4294967296", "4294967297", "bytes in 1..4294967296"},
    {"pid", "4194304", "4194304", "4194305", "a process id in 1..4194304"},
    {"pid", "1", "1", "-1", "a process id in 1..4194304"},
    {"comm", "redis-server", "redis-server", "", "a command name" RULE_SAMPLER},
    {"exe", "/usr/bin/redis-server", "/usr/bin/redis-server", "usr/bin/x",
     "an absolute path" RULE_SAMPLER},
    {"cgroup", "/system.slice/x.service", "/system.slice/x.service", "system.slice",
     "an absolute cgroup path such as /system.slice/x.service" RULE_SAMPLER},
    {"max-targets", "1024", "1024", "1025", "a number in 1..1024"},
    {"max-targets", "1", "1", "0", "a number in 1..1024"},
    {"pin-dir", "/sys/fs/bpf/other", "/sys/fs/bpf/other", "sys/fs/bpf",
     "an absolute directory path, or none"},
    {"pin-dir", "none", "", "None", "an absolute directory path, or none"},
    {"probe-layout", "classic", "classic", "fast", "auto, session, multi or classic"},
    {"probe-layout", "session", "session", "", "auto, session, multi or classic"},
    {"sampler", "inprocess", "inprocess", "fast", "uprobe or inprocess"},
    {"sampler", "uprobe", "uprobe", "", "uprobe or inprocess"},
    {"comm", "redis-server sampler=inprocess", "redis-server", "redis-server sampler=fast",
     "a command name" RULE_SAMPLER},
    {"unix", "/run/heapprofd.sock", "/run/heapprofd.sock", "heapprofd.sock",
     "an absolute socket path"},
    {"token-file", "/etc/heapprofd/token", "/etc/heapprofd/token", "token",
     "an absolute file path"},
    {"allow-remote", "yes", "yes", "maybe", "yes or no"},
    {"allow-remote", "no", "no", "1", "yes or no"},
    {"open-loopback", "yes", "yes", "on", "yes or no"},
    {"trust-uid", "root", "0", "no-such-user-of-heapprofd", "a uid or a user name that exists"},
    {"trust-uid", "4294967294", "4294967294", "4294967295", "a uid or a user name that exists"},
    {"trust-group", "root", "0", "no-such-group-of-heapprofd", "a group name or gid that exists"},
    {"max-targets-per-uid", "1024", "1024", "1025", "a number in 1..1024"},
    {"max-targets-per-uid", "1", "1", "0", "a number in 1..1024"},
    {"unwind", "fp", "fp", "dwarf", "cfi or fp"},
    {"unwind", "cfi", "cfi", "FP", "cfi or fp"},
    {"max-stacks", "16", "16", "15", "a number of entries in 16..16777216"},
    {"max-counts", "16777216", "16777216", "16777217", "a number of entries in 16..16777216"},
    {"max-live", "4096", "4096", "4k", "a number of entries in 16..16777216"},
    {"max-pending", "65536", "65536", " 65536", "a number of entries in 16..16777216"},
};
#define NOPTIONS (sizeof(OPTIONS) / sizeof(OPTIONS[0]))

static void no_arguments_give_the_documented_defaults(void)
{
    struct options o;
    char err[512];
    CHECK_INT_EQ(PARSE(&o, err, NULL), 0);
    CHECK_STR_EQ(o.listen_host, "127.0.0.1");
    CHECK_INT_EQ(o.listen_port, 6060);
    CHECK_U64_EQ(o.sample_interval, 524288);
    CHECK_INT_EQ(o.max_targets, OPTIONS_DEFAULT_MAX_TARGETS);
    CHECK_STR_EQ(o.pin_dir, "/sys/fs/bpf/heapprofd");
    CHECK_INT_EQ(o.npids + o.rules.ncomms + o.rules.nexes + o.rules.ncgroups, 0);
    CHECK_STR_EQ(o.config_path, "");
    CHECK_STR_EQ(o.unix_path, "");
    CHECK_STR_EQ(o.token_file, "");
    CHECK_STR_EQ(bpf_state_layout_name(o.layout), "auto");
    CHECK_INT_EQ(o.allow_remote + o.unwind_fp_only + o.show_help, 0);
    CHECK_INT_EQ(o.map_sizes.stacks + o.map_sizes.counts + o.map_sizes.live + o.map_sizes.pending,
                 0);
    options_free(&o);
}

static void every_flag_sets_its_setting(void)
{
    for (size_t i = 0; i < NOPTIONS; i++) {
        struct options o;
        char err[512], flag[64], got[512];
        snprintf(flag, sizeof(flag), "--%s=%s", OPTIONS[i].name, OPTIONS[i].value);
        int e = PARSE(&o, err, flag);
        setting(&o, OPTIONS[i].name, got, sizeof(got));
        if (e != 0 || strcmp(got, OPTIONS[i].gives) != 0) {
            fprintf(stderr, "%s:%d: %s: expected 0 and \"%s\", got %d and \"%s\" (%s)\n", __FILE__,
                    __LINE__, flag, OPTIONS[i].gives, e, got, err);
            check_failures++;
        }
        options_free(&o);
    }
}

static void every_config_key_sets_the_setting_of_its_flag(void)
{
    for (size_t i = 0; i < NOPTIONS; i++) {
        struct options o;
        char err[512], path[64], text[256], got[512];
        /* Spaces and tabs around either side, and a comment after it. */
        snprintf(text, sizeof(text), "# heapprofd\n\n \t%s\t=  %s   # why\n", OPTIONS[i].name,
                 OPTIONS[i].value);
        write_config(path, sizeof(path), text);
        int e = PARSE(&o, err, "--config", path);
        setting(&o, OPTIONS[i].name, got, sizeof(got));
        /* A value with surrounding spaces is trimmed in the file, not on the command line. */
        if (e != 0 || strcmp(got, OPTIONS[i].gives) != 0) {
            fprintf(stderr,
                    "%s:%d: config \"%s = %s\": expected 0 and \"%s\", got %d and "
                    "\"%s\" (%s)\n",
                    __FILE__, __LINE__, OPTIONS[i].name, OPTIONS[i].value, OPTIONS[i].gives, e, got,
                    err);
            check_failures++;
        }
        options_free(&o);
        unlink(path);
    }
}

static void a_bad_flag_value_is_refused_with_what_the_flag_wants(void)
{
    for (size_t i = 0; i < NOPTIONS; i++) {
        struct options o;
        char err[512], flag[64], want[512];
        snprintf(flag, sizeof(flag), "--%s=%s", OPTIONS[i].name, OPTIONS[i].bad);
        snprintf(want, sizeof(want), "--%s wants %s, not '%s'", OPTIONS[i].name, OPTIONS[i].wants,
                 OPTIONS[i].bad);
        CHECK_INT_EQ(PARSE(&o, err, flag), -EINVAL);
        CHECK_STR_EQ(err, want);
        options_free(&o);
    }
}

static void a_bad_config_value_is_refused_naming_the_file_and_line(void)
{
    for (size_t i = 0; i < NOPTIONS; i++) {
        if (OPTIONS[i].bad[0] == ' ')
            continue; /* the file trims it: no longer bad there */
        struct options o;
        char err[512], path[64], text[256], want[512];
        snprintf(text, sizeof(text), "# heapprofd\n\nsample-interval = 1\n%s = %s\n",
                 OPTIONS[i].name, OPTIONS[i].bad);
        write_config(path, sizeof(path), text);
        snprintf(want, sizeof(want), "config %s:4: %s wants %s, not '%s'", path, OPTIONS[i].name,
                 OPTIONS[i].wants, OPTIONS[i].bad);
        CHECK_INT_EQ(PARSE(&o, err, "--config", path), -EINVAL);
        CHECK_STR_EQ(err, want);
        options_free(&o);
        unlink(path);
    }
}

/* Fails unless the config text is refused with exactly "config PATH:" + `want`. */
static void check_config_refused(const char *text, const char *want)
{
    struct options o;
    char err[512], path[64], full[512];
    write_config(path, sizeof(path), text);
    snprintf(full, sizeof(full), "config %s:%s", path, want);
    CHECK_INT_EQ(PARSE(&o, err, "--config", path), -EINVAL);
    CHECK_STR_EQ(err, full);
    options_free(&o);
    unlink(path);
}

static void malformed_config_lines_are_refused_naming_the_line(void)
{
    check_config_refused("listen = :7070\nnosuch = 1\n", "2: unknown setting 'nosuch'");
    check_config_refused("\n\njust words\n", "3: want 'name = value', got 'just words'");
    /* A config file does not name another. */
    check_config_refused("config = /etc/other.conf\n", "1: unknown setting 'config'");
    char text[1200];
    memset(text, 'x', sizeof(text) - 2);
    memcpy(text, "comm = ", 7);
    text[sizeof(text) - 2] = '\n';
    text[sizeof(text) - 1] = '\0';
    check_config_refused(text, "1: line longer than 1023 bytes");
}

static void a_config_line_ending_in_crlf_reads_as_without(void)
{
    struct options o;
    char err[512], path[64];
    write_config(path, sizeof(path), "comm = redis\r\nsample-interval = 4096\r\n");
    CHECK_INT_EQ(PARSE(&o, err, "--config", path), 0);
    CHECK_INT_EQ(o.rules.ncomms, 1);
    CHECK_STR_EQ(o.rules.ncomms ? o.rules.comms[0] : NULL, "redis");
    CHECK_U64_EQ(o.sample_interval, 4096);
    options_free(&o);
    unlink(path);
}

static void a_missing_config_file_is_refused_with_the_reason(void)
{
    struct options o;
    char err[512];
    CHECK_INT_EQ(PARSE(&o, err, "--config", "/nonexistent/heapprofd.conf"), -EINVAL);
    CHECK_STR_EQ(err, "config /nonexistent/heapprofd.conf: No such file or directory");
    options_free(&o);
}

static void flags_win_over_the_file_and_repeated_ones_add_to_it(void)
{
    struct options o;
    char err[512], path[64];
    write_config(path, sizeof(path),
                 "sample-interval = 4096\ncomm = from-file\npid = 10\nlisten = :7000\n");
    /* --config after the flags: the file is still read first. */
    CHECK_INT_EQ(PARSE(&o, err, "--sample-interval", "1", "--comm", "from-flag", "--pid", "20",
                       "--config", path),
                 0);
    CHECK_U64_EQ(o.sample_interval, 1);
    CHECK_INT_EQ(o.listen_port, 7000);
    CHECK_INT_EQ(o.rules.ncomms, 2);
    if (o.rules.ncomms == 2) {
        CHECK_STR_EQ(o.rules.comms[0], "from-file");
        CHECK_STR_EQ(o.rules.comms[1], "from-flag");
    }
    CHECK_INT_EQ(o.npids, 2);
    if (o.npids == 2) {
        CHECK_INT_EQ(o.pids[0], 10);
        CHECK_INT_EQ(o.pids[1], 20);
    }
    options_free(&o);
    unlink(path);
}

static void unknown_incomplete_and_extra_arguments_are_refused(void)
{
    struct options o;
    char err[512];
    CHECK_INT_EQ(PARSE(&o, err, "--nosuch"), -EINVAL);
    CHECK_STR_EQ(err, "unknown or incomplete option '--nosuch'");
    options_free(&o);
    CHECK_INT_EQ(PARSE(&o, err, "--sample-interval", "1", "--pid"), -EINVAL);
    CHECK_STR_EQ(err, "unknown or incomplete option '--pid'");
    options_free(&o);
    CHECK_INT_EQ(PARSE(&o, err, "--pid", "1", "stray"), -EINVAL);
    CHECK_STR_EQ(err, "unexpected argument 'stray'");
    options_free(&o);
    CHECK_INT_EQ(PARSE(&o, err, "-p", "1"), -EINVAL);
    CHECK_STR_EQ(err, "unknown or incomplete option '-p'");
    options_free(&o);
}

static void allow_remote_alone_means_yes_and_help_asks_for_usage(void)
{
    struct options o;
    char err[512];
    CHECK_INT_EQ(PARSE(&o, err, "--allow-remote"), 0);
    CHECK_INT_EQ(o.allow_remote, 1);
    options_free(&o);
    CHECK_INT_EQ(PARSE(&o, err, "--help"), 0);
    CHECK_INT_EQ(o.show_help, 1);
    options_free(&o);
}

static void settings_that_contradict_each_other_are_refused_together(void)
{
    struct options o;
    char err[512];
    CHECK_INT_EQ(PARSE(&o, err, "--allow-remote", "--listen", "0.0.0.0:6060"), 0);
    CHECK_INT_EQ(options_check(&o, err, sizeof(err)), -EINVAL);
    CHECK(strncmp(err, "allow-remote needs token-file", 29) == 0);
    options_free(&o);
    CHECK_INT_EQ(PARSE(&o, err, "--allow-remote", "--token-file", "/etc/heapprofd/token"), 0);
    CHECK_INT_EQ(options_check(&o, err, sizeof(err)), 0);
    options_free(&o);
    CHECK_INT_EQ(PARSE(&o, err, "--open-loopback", "--token-file", "/etc/heapprofd/token"), 0);
    CHECK_INT_EQ(options_check(&o, err, sizeof(err)), -EINVAL);
    CHECK(strncmp(err, "open-loopback and token-file contradict", 39) == 0);
    options_free(&o);
    CHECK_INT_EQ(PARSE(&o, err, "--open-loopback"), 0);
    CHECK_INT_EQ(options_check(&o, err, sizeof(err)), 0);
    options_free(&o);
}

static void the_per_uid_cap_is_an_eighth_of_max_targets_unless_set(void)
{
    struct options o;
    char err[512];
    CHECK_INT_EQ(PARSE(&o, err, "--pin-dir", "none"), 0);
    CHECK_INT_EQ(o.max_targets_per_uid, OPTIONS_DEFAULT_MAX_TARGETS / 8);
    options_free(&o);
    CHECK_INT_EQ(PARSE(&o, err, "--max-targets", "20"), 0);
    CHECK_INT_EQ(o.max_targets_per_uid, 2);
    options_free(&o);
    CHECK_INT_EQ(PARSE(&o, err, "--max-targets", "7"), 0);
    CHECK_INT_EQ(o.max_targets_per_uid, 1); /* at least one */
    options_free(&o);
    CHECK_INT_EQ(PARSE(&o, err, "--max-targets", "8", "--max-targets-per-uid", "5"), 0);
    CHECK_INT_EQ(o.max_targets_per_uid, 5);
    options_free(&o);
    /* Trust lists add up, from the file and the flags, each id once. */
    CHECK_INT_EQ(PARSE(&o, err, "--trust-uid", "0", "--trust-uid", "root", "--trust-uid", "7",
                       "--trust-group", "0"),
                 0);
    CHECK_INT_EQ(o.trust.nuids, 2);
    CHECK_INT_EQ(o.trust.ngids, 1);
    options_free(&o);
}

static void lists_and_paths_stop_at_their_bounds(void)
{
    struct options o;
    char err[512], path[64], *text = malloc(64 * (TARGET_RULES_MAX + 1));
    CHECK(text != NULL);
    if (!text)
        return;
    /* TARGET_RULES_MAX comm rules fit; one more is refused on its line. */
    text[0] = '\0';
    for (int i = 0; i <= TARGET_RULES_MAX; i++)
        sprintf(text + strlen(text), "comm = c%d\n", i);
    write_config(path, sizeof(path), text);
    CHECK_INT_EQ(PARSE(&o, err, "--config", path), -EINVAL);
    CHECK(strstr(err, ":65: comm: too many given, 'c64' does not fit (at most 64)") != NULL);
    options_free(&o);
    unlink(path);
    free(text);
    /* HP_MAX_TARGETS pids fit; one more is "too many", not a bad pid. */
    text = malloc(32 * (HP_MAX_TARGETS + 1));
    CHECK(text != NULL);
    if (!text)
        return;
    text[0] = '\0';
    for (int i = 1; i <= HP_MAX_TARGETS + 1; i++)
        sprintf(text + strlen(text), "pid = %d\n", i);
    write_config(path, sizeof(path), text);
    CHECK_INT_EQ(PARSE(&o, err, "--config", path), -EINVAL);
    CHECK(strstr(err, "pid: too many given, '1025' does not fit (at most 1024)") != NULL);
    options_free(&o);
    unlink(path);
    free(text);
    /* A path that does not fit its field is refused, not cut short. */
    char longpath[400] = "/";
    memset(longpath + 1, 'd', sizeof(longpath) - 2);
    longpath[sizeof(longpath) - 1] = '\0';
    char flag[420];
    snprintf(flag, sizeof(flag), "--pin-dir=%s", longpath);
    CHECK_INT_EQ(PARSE(&o, err, flag), -EINVAL);
    CHECK(strncmp(err, "--pin-dir wants an absolute directory path, or none, not '/ddd", 62) == 0);
    options_free(&o);
    snprintf(flag, sizeof(flag), "--listen=%.70s:80", longpath);
    CHECK_INT_EQ(PARSE(&o, err, flag), -EINVAL);
    options_free(&o);
}

static void a_rule_may_choose_the_sampler_of_its_processes(void)
{
    struct options o;
    char err[512];
    CHECK_INT_EQ(PARSE(&o, err, "--sampler", "uprobe", "--comm", "redis-server sampler=inprocess",
                       "--exe", "/usr/bin/x", "--cgroup", "/system.slice sampler=uprobe"),
                 0);
    CHECK_INT_EQ(o.sampler, SAMPLER_UPROBE);
    CHECK_STR_EQ(o.rules.comms[0], "redis-server");
    CHECK_INT_EQ(o.rules.comm_samplers[0], SAMPLER_INPROCESS);
    CHECK_INT_EQ(o.rules.exe_samplers[0], -1);
    CHECK_STR_EQ(o.rules.cgroups[0], "/system.slice");
    CHECK_INT_EQ(o.rules.cgroup_samplers[0], SAMPLER_UPROBE);
    options_free(&o);
    /* Nothing but the sampler: no name. */
    CHECK_INT_EQ(PARSE(&o, err, "--comm", " sampler=inprocess"), -EINVAL);
    options_free(&o);
    /* An owner, by number or name, in either order with the sampler. */
    CHECK_INT_EQ(PARSE(&o, err, "--comm", "redis-server uid=0 sampler=uprobe", "--exe",
                       "/usr/bin/x sampler=inprocess uid=root", "--cgroup", "/system.slice"),
                 0);
    CHECK_STR_EQ(o.rules.comms[0], "redis-server");
    CHECK(o.rules.comm_owners[0].named);
    CHECK_INT_EQ(o.rules.comm_owners[0].uid, 0);
    CHECK_INT_EQ(o.rules.comm_samplers[0], SAMPLER_UPROBE);
    CHECK_STR_EQ(o.rules.exes[0], "/usr/bin/x");
    CHECK(o.rules.exe_owners[0].named);
    CHECK_INT_EQ(o.rules.exe_owners[0].uid, 0);
    CHECK_INT_EQ(o.rules.exe_samplers[0], SAMPLER_INPROCESS);
    CHECK(!o.rules.cgroup_owners[0].named);
    options_free(&o);
    /* A user that does not exist. */
    CHECK_INT_EQ(PARSE(&o, err, "--comm", "redis-server uid=no-such-user-here"), -EINVAL);
    options_free(&o);
}

static void the_usage_lists_every_option_once_with_limits_from_the_constants(void)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    CHECK(f != NULL);
    if (!f)
        return;
    options_usage(f);
    fclose(f);
    for (size_t i = 0; i < option_count; i++) {
        if (!option_table[i].set)
            continue; /* --help */
        char line[64];
        int n = 0;
        snprintf(line, sizeof(line), "\n  --%s", option_table[i].name);
        for (const char *p = text; (p = strstr(p, line)) != NULL; p += strlen(line))
            if (p[strlen(line)] == ' ' || p[strlen(line)] == '\n')
                n++;
        if (n != 1) {
            fprintf(stderr, "%s:%d: '%s' heads %d lines of the usage, not 1:\n%s\n", __FILE__,
                    __LINE__, line + 1, n, text);
            check_failures++;
        }
    }
    /* The limits in the texts are the constants the parser checks (the
     * usage text wraps lines, so look at the rows' texts filled in). */
    char want[64], help[512];
    snprintf(want, sizeof(want), "default %d, at most %d", OPTIONS_DEFAULT_MAX_TARGETS,
             HP_MAX_TARGETS);
    for (size_t i = 0; i < option_count; i++) {
        const struct option_def *d = &option_table[i];
        if (strcmp(d->name, "max-targets") == 0) {
            option_expand(d, d->help, help, sizeof(help));
            CHECK(strstr(help, want) != NULL);
            CHECK(strstr(text, "\n  --max-targets N          processes profiled at once") != NULL);
        } else if (strcmp(d->name, "idle-detach") == 0) {
            option_expand(d, d->help, help, sizeof(help));
            CHECK(strstr(help, "default 10m, at most 720h") != NULL);
        }
    }
    free(text);
}

static void durations_are_written_as_they_are_read(void)
{
    static const struct {
        uint64_t ns;
        const char *text;
    } cases[] = {{0, "0"}, {720 * 3600000000000ull, "720h"}, {600000000000ull, "10m"},
                 {90000000000ull, "90s"}, {1500000000ull, "1500ms"}, {1500, "1500ns"}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[32];
        uint64_t back;
        format_duration(cases[i].ns, out, sizeof(out));
        CHECK_STR_EQ(out, cases[i].text);
        if (cases[i].ns % 1000000 == 0) {
            CHECK_INT_EQ(parse_duration(out, UINT64_MAX, &back), 0);
            CHECK_U64_EQ(back, cases[i].ns);
        }
    }
}

int main(void)
{
    RUN_TEST(no_arguments_give_the_documented_defaults);
    RUN_TEST(every_flag_sets_its_setting);
    RUN_TEST(every_config_key_sets_the_setting_of_its_flag);
    RUN_TEST(a_bad_flag_value_is_refused_with_what_the_flag_wants);
    RUN_TEST(a_bad_config_value_is_refused_naming_the_file_and_line);
    RUN_TEST(malformed_config_lines_are_refused_naming_the_line);
    RUN_TEST(a_config_line_ending_in_crlf_reads_as_without);
    RUN_TEST(a_missing_config_file_is_refused_with_the_reason);
    RUN_TEST(flags_win_over_the_file_and_repeated_ones_add_to_it);
    RUN_TEST(unknown_incomplete_and_extra_arguments_are_refused);
    RUN_TEST(allow_remote_alone_means_yes_and_help_asks_for_usage);
    RUN_TEST(settings_that_contradict_each_other_are_refused_together);
    RUN_TEST(the_per_uid_cap_is_an_eighth_of_max_targets_unless_set);
    RUN_TEST(lists_and_paths_stop_at_their_bounds);
    RUN_TEST(a_rule_may_choose_the_sampler_of_its_processes);
    RUN_TEST(the_usage_lists_every_option_once_with_limits_from_the_constants);
    RUN_TEST(durations_are_written_as_they_are_read);
    return check_exit_code();
}
