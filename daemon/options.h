/*
 * options.h - heapprofd's command line.
 *
 * Ownership: the struct owns nothing beyond its fixed arrays; strings point
 * into argv.
 */
#ifndef HEAPPROF_OPTIONS_H
#define HEAPPROF_OPTIONS_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <sys/types.h>

#include "bpf_state.h"
#include "hp_limits.h"

/* What the user asked for. */
struct options {
    const char *listen_host;   /* "127.0.0.1" */
    uint16_t listen_port;      /* 6060 */
    uint64_t sample_interval;  /* mean bytes between samples; 1 records all */
    pid_t pids[HP_MAX_TARGETS];
    size_t npids;
    enum probe_layout layout;  /* LAYOUT_AUTO unless --probe-layout says */
    int show_help;
};

/*
 * Parses argv into `o` (defaults first). On a bad argument returns -EINVAL
 * and writes a one-line reason into `err`.
 */
int options_parse(int argc, char **argv, struct options *o, char *err, size_t errlen);

/* Prints the usage text. */
void options_usage(FILE *out);

#endif
