/*
 * options.c - parses heapprofd's command line into `struct options`,
 * rejecting anything malformed with a reason rather than guessing.
 */
#include "options.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampling_math.h"
#include "strutil.h"

void options_usage(FILE *out)
{
    fprintf(out,
            "usage: heapprofd [--listen ADDR:PORT] [--sample-interval BYTES] [--pid N]...\n"
            "  --listen ADDR:PORT       where to serve HTTP (default 127.0.0.1:6060)\n"
            "  --sample-interval BYTES  mean bytes between samples (default 524288;\n"
            "                           1 records every allocation)\n"
            "  --pid N                  profile process N from the start (repeatable)\n"
            "  --probe-layout L         auto (default), session, multi or classic: how\n"
            "                           probes are attached (for benchmarks)\n"
            "Profiles: GET /debug/pprof/heap?pid=N (see docs/http-api.md)\n");
}

/* Splits "HOST:PORT" (HOST may be empty, meaning 127.0.0.1). */
static int parse_listen(char *arg, struct options *o, char *err, size_t errlen)
{
    char *colon = strrchr(arg, ':');
    uint64_t port;
    if (!colon || parse_u64(colon + 1, 1, 65535, &port) != 0) {
        snprintf(err, errlen, "--listen wants ADDR:PORT with a port 1-65535, not '%s'", arg);
        return -EINVAL;
    }
    *colon = '\0';
    o->listen_host = arg[0] ? arg : "127.0.0.1";
    o->listen_port = (uint16_t)port;
    return 0;
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

int options_parse(int argc, char **argv, struct options *o, char *err, size_t errlen)
{
    static const struct option longopts[] = {
        {"listen", required_argument, NULL, 'l'},
        {"sample-interval", required_argument, NULL, 'i'},
        {"pid", required_argument, NULL, 'p'},
        {"probe-layout", required_argument, NULL, 'L'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof(*o));
    o->listen_host = "127.0.0.1";
    o->listen_port = 6060;
    o->sample_interval = 524288;
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        uint64_t v;
        switch (c) {
        case 'l':
            if (parse_listen(optarg, o, err, errlen) != 0)
                return -EINVAL;
            break;
        case 'i':
            if (parse_u64(optarg, 1, HP_MAX_INTERVAL, &v) != 0) {
                snprintf(err, errlen, "--sample-interval wants bytes in 1..%llu, not '%s'",
                         (unsigned long long)HP_MAX_INTERVAL, optarg);
                return -EINVAL;
            }
            o->sample_interval = v;
            break;
        case 'p':
            if (parse_u64(optarg, 1, HP_MAX_PID, &v) != 0) {
                snprintf(err, errlen, "--pid wants a process id, not '%s'", optarg);
                return -EINVAL;
            }
            if (o->npids == HP_MAX_TARGETS) {
                snprintf(err, errlen, "at most %d --pid options", HP_MAX_TARGETS);
                return -EINVAL;
            }
            o->pids[o->npids++] = (pid_t)v;
            break;
        case 'L':
            if (parse_layout(optarg, &o->layout) != 0) {
                snprintf(err, errlen,
                         "--probe-layout wants auto, session, multi or classic, not '%s'", optarg);
                return -EINVAL;
            }
            break;
        case 'h':
            o->show_help = 1;
            return 0;
        default:
            snprintf(err, errlen, "unknown or incomplete option '%s'", argv[optind - 1]);
            return -EINVAL;
        }
    }
    if (optind < argc) {
        snprintf(err, errlen, "unexpected argument '%s'", argv[optind]);
        return -EINVAL;
    }
    return 0;
}
