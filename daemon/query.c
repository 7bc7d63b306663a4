/*
 * query.c - strict parsing of profile request parameters (see query.h).
 */
#include "query.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "strutil.h"

/* Prints a value for an error message, cut short and with control bytes hidden. */
static void quote(char *dst, size_t len, const char *v)
{
    size_t i = 0;
    for (; v && v[i] && i + 1 < len && i < 32; i++)
        dst[i] = (v[i] < 0x20 || v[i] == 0x7f) ? '?' : v[i];
    dst[i] = '\0';
}

int profile_query_set(struct profile_query *q, const char *key, const char *value, char *err,
                      size_t errlen)
{
    uint64_t v;
    char shown[40];
    quote(shown, sizeof(shown), value);
    if (strcmp(key, "pid") == 0) {
        if (parse_u64(value, 1, HP_MAX_PID, &v) != 0) {
            snprintf(err, errlen, "bad pid '%s': want a process id in 1..%d", shown, HP_MAX_PID);
            return -EINVAL;
        }
        q->pid = (pid_t)v;
    } else if (strcmp(key, "seconds") == 0) {
        if (parse_u64(value, 1, QUERY_MAX_SECONDS, &v) != 0) {
            snprintf(err, errlen, "bad seconds '%s': want 1..%d", shown, QUERY_MAX_SECONDS);
            return -EINVAL;
        }
        q->seconds = (int)v;
    } else if (strcmp(key, "debug") == 0) {
        if (parse_u64(value, 0, 1, &v) != 0) {
            snprintf(err, errlen, "bad debug '%s': want 0 or 1", shown);
            return -EINVAL;
        }
        q->debug = (int)v;
    } else if (strcmp(key, "symbolize") == 0) {
        if (parse_u64(value, 0, 1, &v) != 0) {
            snprintf(err, errlen, "bad symbolize '%s': want 0 or 1", shown);
            return -EINVAL;
        }
        q->no_symbols = v == 0;
    }
    return 0;
}

int profile_query_finish(const struct profile_query *q, char *err, size_t errlen)
{
    if (q->pid == 0) {
        snprintf(err, errlen, "missing pid: ask for /debug/pprof/heap?pid=N");
        return -EINVAL;
    }
    return 0;
}
