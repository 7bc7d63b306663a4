/*
 * query.h - the parameters of a profile request (pid, seconds, min_age,
 * debug, symbolize, format, sample_index, and the selectors comm, exe,
 * cgroup and unit that pick processes by what they are, and base=, the
 * kept snapshot a diff is taken against),
 * checked strictly: a value that does not parse or is out of range is an
 * error with a one-line reason, never a silent default. Unknown parameters
 * are ignored, as Go's net/http/pprof does.
 */
#ifndef HEAPPROF_QUERY_H
#define HEAPPROF_QUERY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "process_match.h"

/* The oldest min_age accepted: 30 days. */
#define QUERY_MAX_AGE_NS (30ULL * 24 * 3600 * 1000000000ULL)

/* The longest delta profile: a scrape waits this long at most. */
#define QUERY_MAX_SECONDS 300

/* What a profile request answers in. */
enum profile_format {
    FORMAT_PROTO = 0, /* gzipped profile.proto (or Go's text with debug=1) */
    FORMAT_TEXT,      /* a top table, as `go tool pprof -top` */
    FORMAT_FOLDED,    /* collapsed stacks, `a;b;c VALUE` */
};

/* The sample types every heap profile carries, in their order (the HTTP API). */
extern const char *const QUERY_SAMPLE_TYPES[4];

/* A profile request's parameters. */
struct profile_query {
    pid_t pid;       /* 0 if not given */
    int seconds;     /* 0: not a delta profile */
    int debug;       /* 0: profile.proto; 1: Go's legacy text */
    int no_symbols;  /* symbolize=0: raw addresses and mappings, no functions */
    uint64_t min_age_ns; /* min_age=: only allocations still alive and at least this old */
    enum profile_format format;
    const char *sample_type; /* sample_index=: one of QUERY_SAMPLE_TYPES; NULL: the route's default */
    /* comm=, exe=, cgroup=, unit=: the processes they match (every one
     * given), or with pid= a guard the process must pass. comm, exe and
     * cgroup are borrowed from the values given to profile_query_set();
     * unit points at `unit_name`. */
    struct process_selector sel;
    char unit_name[PROCESS_UNIT_MAX]; /* unit=, ".service" added if it has no unit type */
    /* base=: the id of a kept snapshot (snapshots.h) to diff against, or
     * "" ; or a base profile uploaded with the request (POST), borrowed
     * from the HTTP layer. At most one of them (profile_query_finish). */
    char base_id[17];
    const uint8_t *base_upload;
    size_t base_upload_len;
};

/* Takes one key=value pair into `q` (the value must outlive `q`: a
 * selector keeps it); -EINVAL with a reason in `err` if the value is bad. */
int profile_query_set(struct profile_query *q, const char *key, const char *value, char *err,
                      size_t errlen);

/* Checks the query as a whole; -EINVAL with a reason if it does not hold together. */
int profile_query_finish(const struct profile_query *q, char *err, size_t errlen);

#endif
