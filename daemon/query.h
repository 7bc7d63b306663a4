/*
 * query.h - the parameters of a profile request (pid, seconds, debug,
 * symbolize),
 * checked strictly: a value that does not parse or is out of range is an
 * error with a one-line reason, never a silent default. Unknown parameters
 * are ignored, as Go's net/http/pprof does.
 */
#ifndef HEAPPROF_QUERY_H
#define HEAPPROF_QUERY_H

#include <stddef.h>
#include <sys/types.h>

/* The longest delta profile: a scrape waits this long at most. */
#define QUERY_MAX_SECONDS 300

/* A profile request's parameters. */
struct profile_query {
    pid_t pid;       /* 0 if not given */
    int seconds;     /* 0: not a delta profile */
    int debug;       /* 0: profile.proto; 1: Go's legacy text */
    int no_symbols;  /* symbolize=0: raw addresses and mappings, no functions */
};

/* Takes one key=value pair into `q`; -EINVAL with a reason in `err` if the value is bad. */
int profile_query_set(struct profile_query *q, const char *key, const char *value, char *err,
                      size_t errlen);

/* Checks the query as a whole (pid present); -EINVAL with a reason if not. */
int profile_query_finish(const struct profile_query *q, char *err, size_t errlen);

#endif
