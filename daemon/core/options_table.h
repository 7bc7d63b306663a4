/*
 * options_table.h - the one description of each heapprofd option: its name
 * (the long flag and, the same, the config key), the value it takes, its
 * default, its --help text, how it is parsed and its limits. options.c makes
 * everything else from these rows: the getopt entries, the usage text
 * (hence the man page, which help2man builds from --help), the config-file
 * reader and the error texts. An option is added by adding one row.
 *
 * Texts in a row may name its own limits with {min}, {max}, {most},
 * {default} and {choices}; option_expand() fills them in from the row, so
 * that a limit is written once, as the constant the parser checks.
 */
#ifndef HEAPPROF_OPTIONS_TABLE_H
#define HEAPPROF_OPTIONS_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "options.h"

/* What sets a row apart from the plain case (a config key, applied at
 * SIGHUP, limits that are plain numbers). */
enum option_flags {
    OPT_NOT_IN_FILE = 1 << 0, /* a flag only, no config key (config, help) */
    OPT_FIRST = 1 << 1,       /* applied before the other flags: the file it
                                 names is read before them, so they win */
    OPT_RESTART = 1 << 2,     /* a SIGHUP does not apply a change: the maps,
                                 listeners or tables were made with it
                                 (main.c's reload() says so when one changed) */
    OPT_DURATION = 1 << 3,    /* min and max are nanoseconds, shown as "10m" */
};

struct option_def;

/* Sets the row's setting in `o` from value `v`: 0, -EINVAL for a bad
 * value, -ENOSPC when a repeatable option's list is full. */
typedef int (*option_setter)(struct options *o, const struct option_def *d, const char *v);

/* One option. */
struct option_def {
    const char *name;   /* --NAME on the command line, NAME = in the file */
    int has_arg;        /* getopt's: optional_argument for yes/no flags (alone: yes) */
    const char *value;  /* the value's placeholder in --help ("ADDR:PORT"); NULL: yes/no */
    option_setter set;  /* NULL for --help, which asks for the usage text */
    const char *def;    /* the default, set through `set` before anything
                           else, and shown as {default}; NULL: none */
    const char *help;   /* the --help text */
    const char *wants;  /* what a value must be, for the error text */
    uint64_t min, max;  /* the limits of a number (nanoseconds for a duration) */
    int most;           /* a repeatable option: how many values fit */
    size_t field, size; /* the member of struct options the generic setters write */
    const char *(*choice)(int i); /* a choice: the name of value i, NULL past the last */
    unsigned flags;               /* enum option_flags */
};

/* The options, in the order --help lists them. */
extern const struct option_def option_table[];
/* The number of rows of option_table. */
extern const size_t option_count;

/* Writes `text` with the row's {min}, {max}, {most}, {default} and
 * {choices} filled in. */
void option_expand(const struct option_def *d, const char *text, char *out, size_t len);

#endif
