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

const char *const QUERY_SAMPLE_TYPES[4] = {"alloc_objects", "alloc_space", "inuse_objects",
                                           "inuse_space"};

/* format=: text or folded (or proto, the default); -EINVAL if another. */
static int set_format(struct profile_query *q, const char *value, const char *shown, char *err,
                      size_t errlen)
{
    static const struct {
        const char *name;
        enum profile_format format;
    } formats[] = {{"proto", FORMAT_PROTO}, {"text", FORMAT_TEXT}, {"folded", FORMAT_FOLDED}};
    for (size_t i = 0; value && i < sizeof(formats) / sizeof(formats[0]); i++)
        if (strcmp(value, formats[i].name) == 0) {
            q->format = formats[i].format;
            return 0;
        }
    snprintf(err, errlen, "bad format '%s': want text, folded or proto", shown);
    return -EINVAL;
}

/* sample_index=: a sample type by name or by its index, as `go tool pprof -sample_index`. */
static int set_sample_type(struct profile_query *q, const char *value, const char *shown,
                           char *err, size_t errlen)
{
    uint64_t i;
    if (parse_u64(value, 0, 3, &i) == 0) {
        q->sample_type = QUERY_SAMPLE_TYPES[i];
        return 0;
    }
    for (i = 0; value && i < 4; i++)
        if (strcmp(value, QUERY_SAMPLE_TYPES[i]) == 0) {
            q->sample_type = QUERY_SAMPLE_TYPES[i];
            return 0;
        }
    snprintf(err, errlen, "bad sample_index '%s': want alloc_objects, alloc_space, "
             "inuse_objects, inuse_space or 0..3", shown);
    return -EINVAL;
}

/* The unit types whose units hold processes; a name without one is a service, as systemctl takes it. */
static const char *const UNIT_TYPES[] = {".service", ".scope", ".slice"};

/* unit=: a systemd unit name, no '/' in it, ".service" added if it has no unit type. */
static int set_unit(struct profile_query *q, const char *value, const char *shown, char *err,
                    size_t errlen)
{
    size_t len = value ? strlen(value) : 0, n_types = sizeof(UNIT_TYPES) / sizeof(UNIT_TYPES[0]);
    int typed = 0;
    for (size_t i = 0; i < n_types && !typed; i++) {
        size_t tl = strlen(UNIT_TYPES[i]);
        typed = len > tl && strcmp(value + len - tl, UNIT_TYPES[i]) == 0;
    }
    if (len == 0 || strchr(value, '/') || len + (typed ? 0 : strlen(".service")) >= PROCESS_UNIT_MAX) {
        snprintf(err, errlen, "bad unit '%s': want a systemd unit name such as redis.service "
                 "(no '/', under %d bytes)", shown, PROCESS_UNIT_MAX);
        return -EINVAL;
    }
    snprintf(q->unit_name, sizeof(q->unit_name), "%s%s", value, typed ? "" : ".service");
    q->sel.unit = q->unit_name;
    return 0;
}

/* comm=, exe=, cgroup=, unit=: a selector, each at most once. 1 if `key` is none of them. */
static int set_selector(struct profile_query *q, const char *key, const char *value,
                        const char *shown, char *err, size_t errlen)
{
    const char **field = strcmp(key, "comm") == 0     ? &q->sel.comm
                         : strcmp(key, "exe") == 0    ? &q->sel.exe
                         : strcmp(key, "cgroup") == 0 ? &q->sel.cgroup
                         : strcmp(key, "unit") == 0   ? &q->sel.unit
                                                      : NULL;
    if (!field)
        return 1;
    if (*field) {
        snprintf(err, errlen, "%s given twice: a request takes each selector once, and a "
                 "process must match every one", key);
        return -EINVAL;
    }
    if (field == &q->sel.unit)
        return set_unit(q, value, shown, err, errlen);
    if (!value || !value[0] || (field != &q->sel.comm && value[0] != '/')) {
        snprintf(err, errlen, "bad %s '%s': want %s", key, shown,
                 field == &q->sel.comm ? "a command name, as /proc/PID/comm shows it"
                 : field == &q->sel.exe ? "an absolute path, as /proc/PID/exe shows it"
                                        : "a cgroup v2 path such as /system.slice/redis.service");
        return -EINVAL;
    }
    *field = value;
    return 0;
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
    } else if (strcmp(key, "min_age") == 0) {
        if (!value || parse_duration(value, QUERY_MAX_AGE_NS, &v) != 0 || v == 0) {
            snprintf(err, errlen, "bad min_age '%s': want a duration such as 30s, 5m or 1h30m, "
                     "at most 720h", shown);
            return -EINVAL;
        }
        q->min_age_ns = v;
    } else if (strcmp(key, "symbolize") == 0) {
        if (parse_u64(value, 0, 1, &v) != 0) {
            snprintf(err, errlen, "bad symbolize '%s': want 0 or 1", shown);
            return -EINVAL;
        }
        q->no_symbols = v == 0;
    } else if (strcmp(key, "format") == 0) {
        return set_format(q, value, shown, err, errlen);
    } else if (strcmp(key, "sample_index") == 0) {
        return set_sample_type(q, value, shown, err, errlen);
    } else if (strcmp(key, "base") == 0) {
        if (!value || strlen(value) != sizeof(q->base_id) - 1 ||
            strspn(value, "0123456789abcdef") != sizeof(q->base_id) - 1) {
            snprintf(err, errlen, "bad base '%s': want the 16 hex digits of a snapshot id "
                     "(POST /debug/pprof/snapshot?pid=N)", shown);
            return -EINVAL;
        }
        snprintf(q->base_id, sizeof(q->base_id), "%s", value);
    } else {
        int e = set_selector(q, key, value, shown, err, errlen);
        return e > 0 ? 0 : e;
    }
    return 0;
}

/* A diff (base= or an uploaded base) is of one process's cumulative profile. */
static int profile_query_check_base(const struct profile_query *q, char *err, size_t errlen)
{
    const char *why = NULL;
    if (!q->base_id[0] && !q->base_upload)
        return 0;
    if (q->base_id[0] && q->base_upload)
        why = "base= and an uploaded base do not go together: give one";
    else if (!q->pid || process_selector_any(&q->sel))
        why = "a diff is of one process: give pid= (and no selector)";
    else if (q->seconds || q->min_age_ns)
        why = "a diff is of the cumulative profile: seconds= and min_age= do not go with a base";
    else if (q->debug)
        why = "a diff is served as profile.proto, format=text or format=folded, not debug=1";
    if (why)
        snprintf(err, errlen, "%s", why);
    return why ? -EINVAL : 0;
}

int profile_query_finish(const struct profile_query *q, char *err, size_t errlen)
{
    if (q->seconds && q->min_age_ns) {
        snprintf(err, errlen, "seconds and min_age do not go together: a delta profile counts "
                 "allocations, min_age shows old live ones");
        return -EINVAL;
    }
    if (q->debug && q->format != FORMAT_PROTO) {
        snprintf(err, errlen, "debug=1 and format= do not go together: debug=1 is Go's text "
                 "format, format= asks for another");
        return -EINVAL;
    }
    if (q->sample_type && q->format == FORMAT_PROTO) {
        snprintf(err, errlen, "sample_index applies to format=text and format=folded; the "
                 "protobuf carries every sample type (go tool pprof -sample_index=...)");
        return -EINVAL;
    }
    return profile_query_check_base(q, err, errlen);
}
