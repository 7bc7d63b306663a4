/*
 * options.c - heapprofd's command line, config file and usage text, all
 * made from the one table of options (options_table.c): the getopt
 * entries, the lines of --help, the keys of the file and the error texts.
 * Both the flags and the file go through the row's setter, so they accept
 * the same names and values, and refuse anything malformed with a reason.
 */
#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "options_table.h"

/* Lines of a config file at most, and the length of one. */
#define CONFIG_MAX_LINE 1024
/* The usage text: the column where an option's text starts, and the width
 * it wraps at (help2man reads the text from the column on). */
#define USAGE_TEXT_COLUMN 27
#define USAGE_WIDTH 79
/* The longest text of a row, filled in. */
#define OPTION_TEXT_MAX 512

/* Prints `text` with the cursor at column `col`, wrapped at USAGE_WIDTH;
 * continuation lines start at column `indent`. */
static void print_wrapped(FILE *out, const char *text, int col, int indent)
{
    int first = 1;
    while (*text) {
        size_t word = strcspn(text, " ");
        if (!first && col + 1 + (int)word > USAGE_WIDTH) {
            fprintf(out, "\n%*s", indent, "");
            col = indent;
        } else if (!first) {
            fputc(' ', out);
            col++;
        }
        fprintf(out, "%.*s", (int)word, text);
        col += (int)word;
        text += word;
        text += strspn(text, " ");
        first = 0;
    }
    fputc('\n', out);
}

void options_usage(FILE *out)
{
    char synopsis[4096] = "";
    size_t used = 0;
    for (size_t i = 0; i < option_count && used < sizeof(synopsis); i++) {
        const struct option_def *d = &option_table[i];
        if (d->set) /* not --help */
            used += (size_t)snprintf(synopsis + used, sizeof(synopsis) - used, "%s[--%s%s%s]%s",
                                     used ? " " : "", d->name, d->value ? " " : "",
                                     d->value ? d->value : "", d->most ? "..." : "");
    }
    fputs("usage: heapprofd ", out);
    print_wrapped(out, synopsis, 17, 17);
    for (size_t i = 0; i < option_count; i++) {
        const struct option_def *d = &option_table[i];
        char text[OPTION_TEXT_MAX];
        /* Not --help: it is the text itself, and the man page has its own
         * entry for it (packaging/heapprofd.h2m). */
        if (!d->set)
            continue;
        int col =
            fprintf(out, "  --%s%s%s", d->name, d->value ? " " : "", d->value ? d->value : "");
        if (col + 2 > USAGE_TEXT_COLUMN) {
            fputc('\n', out);
            col = 0;
        }
        fprintf(out, "%*s", USAGE_TEXT_COLUMN - col, "");
        option_expand(d, d->help, text, sizeof(text));
        print_wrapped(out, text, USAGE_TEXT_COLUMN, USAGE_TEXT_COLUMN);
    }
    fputs("Profiles: GET /debug/pprof/heap?pid=N (see docs/http-api.md)\n", out);
}

void options_restart_only(char *out, size_t len)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < option_count && used < len; i++)
        if (option_table[i].flags & OPT_RESTART)
            used += (size_t)snprintf(out + used, len - used, "%s%s", used ? ", " : "",
                                     option_table[i].name);
}

/* The row of option `name`; NULL if there is none. */
static const struct option_def *find_option(const char *name)
{
    for (size_t i = 0; i < option_count; i++)
        if (strcmp(option_table[i].name, name) == 0)
            return &option_table[i];
    return NULL;
}

/* The error message for value `v` of option `d`, which its setter refused
 * with `e`: -ENOSPC when the list it adds to is full (the value may be
 * fine), else a bad value. `where` is "--" or "config FILE:LINE: ". */
static void bad_value(char *err, size_t errlen, const char *where, const struct option_def *d,
                      const char *v, int e)
{
    if (e == -ENOSPC) {
        snprintf(err, errlen, "%s%s: too many given, '%.64s' does not fit (at most %d)", where,
                 d->name, v, d->most);
        return;
    }
    char wants[OPTION_TEXT_MAX];
    option_expand(d, d->wants ? d->wants : "a valid value", wants, sizeof(wants));
    snprintf(err, errlen, "%s%s wants %s, not '%.64s'", where, d->name, wants, v);
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
    int lineno = 0, e = 0, r;
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
        const struct option_def *d = find_option(name);
        if (!d || (d->flags & OPT_NOT_IN_FILE)) {
            snprintf(err, errlen, "%sunknown setting '%.64s'", where, name);
            e = -EINVAL;
        } else if ((r = d->set(o, d, value)) != 0) {
            bad_value(err, errlen, where, d, value, r);
            e = -EINVAL;
        }
    }
    fclose(f);
    return e;
}

/* The defaults: each row's `def` through its own setter. */
static void set_defaults(struct options *o)
{
    memset(o, 0, sizeof(*o));
    for (size_t i = 0; i < option_count; i++)
        if (option_table[i].def)
            option_table[i].set(o, &option_table[i], option_table[i].def);
}

int options_check(const struct options *o, char *err, size_t errlen)
{
    /* A remote caller has no peer uid to check: the token is all there is. */
    if (o->allow_remote && !o->token_file[0]) {
        snprintf(err, errlen,
                 "allow-remote needs token-file: a remote caller has no uid to "
                 "check, so only a bearer token can say who it is");
        return -EINVAL;
    }
    if (o->open_loopback && o->token_file[0]) {
        snprintf(err, errlen,
                 "open-loopback and token-file contradict each other: with a "
                 "token every TCP caller must present it");
        return -EINVAL;
    }
    return 0;
}

/* The per-uid cap when it is not set: a share of max-targets. */
static void derive_per_uid_cap(struct options *o)
{
    if (!o->max_targets_per_uid) {
        o->max_targets_per_uid = o->max_targets / OPTIONS_DEFAULT_PER_UID_SHARE;
        if (o->max_targets_per_uid == 0)
            o->max_targets_per_uid = 1;
    }
}

/* Applies one flag of pass `pass`: the OPT_FIRST ones (--config) in pass
 * 0, before the file is read; the others in pass 1, after it. */
static int apply_flag(struct options *o, const struct option_def *d, int pass, char *err,
                      size_t errlen)
{
    if (pass != ((d->flags & OPT_FIRST) ? 0 : 1))
        return 0;
    /* A flag without a value (--allow-remote, --open-loopback) means yes. */
    const char *value = optarg ? optarg : "yes";
    int r = d->set(o, d, value);
    if (r) {
        bad_value(err, errlen, "--", d, value, r);
        return -EINVAL;
    }
    return 0;
}

int options_parse(int argc, char **argv, struct options *o, char *err, size_t errlen)
{
    struct option longopts[option_count + 1];
    for (size_t i = 0; i < option_count; i++)
        longopts[i] = (struct option){option_table[i].name, option_table[i].has_arg, NULL, 0};
    longopts[option_count] = (struct option){NULL, 0, NULL, 0};
    set_defaults(o);
    /* The file first, so that flags override it. */
    for (int pass = 0; pass < 2; pass++) {
        optind = 1;
        opterr = 0;
        int c, idx;
        while ((c = getopt_long(argc, argv, "", longopts, &idx)) != -1) {
            if (c != 0) {
                snprintf(err, errlen, "unknown or incomplete option '%s'", argv[optind - 1]);
                return -EINVAL;
            }
            const struct option_def *d = &option_table[idx];
            if (!d->set) {
                o->show_help = 1;
                return 0;
            }
            if (apply_flag(o, d, pass, err, errlen) != 0)
                return -EINVAL;
        }
        if (pass == 0 && o->config_path[0] && read_config(o, o->config_path, err, errlen) != 0)
            return -EINVAL;
    }
    if (optind < argc) {
        snprintf(err, errlen, "unexpected argument '%s'", argv[optind]);
        return -EINVAL;
    }
    derive_per_uid_cap(o);
    return 0;
}

void options_free(struct options *o)
{
    target_rules_free(&o->rules);
}
