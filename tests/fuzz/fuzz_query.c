/*
 * fuzz_query.c - libFuzzer target for the profile request parameters
 * (daemon/profile/query.c).
 *
 * The input is a query string. It is split at '&' into pairs and each pair
 * at its first '=' the way libmicrohttpd hands arguments over (a key without
 * '=' comes with a NULL value), then fed to profile_query_set() in order,
 * stopping at the first error as http_server.c does, and finished with
 * profile_query_finish(). Each answer is checked against a second, plainly
 * written reading of the rules (digits only, within range, compared as
 * decimal strings so no arithmetic is shared with strutil.c; the selectors
 * comm, exe, cgroup and unit by their own rules), and every
 * error message must be one line of printable text.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "query.h"
#include "strutil.h"

/* The error buffer http_server.c passes (struct query_parse). */
#define ERR_LEN 160

/* Whether `s` is a decimal number in [min, max], judged on its digits as text. */
static bool decimal_in_range(const char *s, unsigned long long min, unsigned long long max)
{
    char maxs[32];
    if (!s || !*s)
        return false;
    for (const char *c = s; *c; c++)
        if (*c < '0' || *c > '9')
            return false;
    while (s[0] == '0' && s[1])
        s++;
    snprintf(maxs, sizeof(maxs), "%llu", max);
    size_t n = strlen(s), nmax = strlen(maxs);
    if (n > nmax || (n == nmax && strcmp(s, maxs) > 0))
        return false;
    /* At most as long as max: small enough for strtoull to be exact. */
    return strtoull(s, NULL, 10) >= min;
}

/* Whether `s` ends with `tail`. */
static bool ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && strcmp(s + n - t, tail) == 0;
}

/* The selectors: each at most once; comm any non-empty name, exe and cgroup
 * absolute, unit a name without '/' that fits PROCESS_UNIT_MAX once
 * ".service" is added to a name without a unit type. Keeps the value (or,
 * for a unit, the name as it will be matched) in the model. */
static bool expect_selector(struct profile_query *want, const char *key, const char *value)
{
    const char **field = strcmp(key, "comm") == 0     ? &want->sel.comm
                         : strcmp(key, "exe") == 0    ? &want->sel.exe
                         : strcmp(key, "cgroup") == 0 ? &want->sel.cgroup
                                                      : &want->sel.unit;
    if (*field || !value || !*value)
        return false;
    if (field == &want->sel.unit) {
        bool typed = (ends_with(value, ".service") && strlen(value) > 8) ||
                     (ends_with(value, ".scope") && strlen(value) > 6) ||
                     (ends_with(value, ".slice") && strlen(value) > 6);
        if (strchr(value, '/') || strlen(value) + (typed ? 0 : 8) >= PROCESS_UNIT_MAX)
            return false;
        snprintf(want->unit_name, sizeof(want->unit_name), "%s%s", value,
                 typed ? "" : ".service");
        *field = want->unit_name;
        return true;
    }
    if (field != &want->sel.comm && value[0] != '/')
        return false;
    *field = value;
    return true;
}

/* Whether two selector fields say the same (both unset, or equal text). */
static bool same_field(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

/* The expected query after one more accepted pair; returns whether the pair should be accepted. */
static bool expect_set(struct profile_query *want, const char *key, const char *value)
{
    if (strcmp(key, "comm") == 0 || strcmp(key, "exe") == 0 || strcmp(key, "cgroup") == 0 ||
        strcmp(key, "unit") == 0) {
        return expect_selector(want, key, value);
    } else if (strcmp(key, "pid") == 0) {
        if (!decimal_in_range(value, 1, HP_MAX_PID))
            return false;
        want->pid = (pid_t)strtoull(value, NULL, 10);
    } else if (strcmp(key, "seconds") == 0) {
        if (!decimal_in_range(value, 1, QUERY_MAX_SECONDS))
            return false;
        want->seconds = (int)strtoull(value, NULL, 10);
    } else if (strcmp(key, "debug") == 0) {
        if (!decimal_in_range(value, 0, 1))
            return false;
        want->debug = (int)strtoull(value, NULL, 10);
    } else if (strcmp(key, "symbolize") == 0) {
        if (!decimal_in_range(value, 0, 1))
            return false;
        want->no_symbols = strtoull(value, NULL, 10) == 0;
    } else if (strcmp(key, "min_age") == 0) {
        /* The duration grammar is parse_duration's own; the model holds it
         * to its bounds: a value it accepts is 1 ns .. QUERY_MAX_AGE_NS. */
        uint64_t ns;
        if (!value || parse_duration(value, QUERY_MAX_AGE_NS, &ns) != 0 || ns == 0)
            return false;
        FUZZ_CHECK(ns <= QUERY_MAX_AGE_NS, "min_age %s parsed to %llu ns", value,
                   (unsigned long long)ns);
        want->min_age_ns = ns;
    } else if (strcmp(key, "format") == 0) {
        static const char *const names[] = {"proto", "text", "folded"};
        size_t i = 0;
        while (i < 3 && !(value && strcmp(value, names[i]) == 0))
            i++;
        if (i == 3)
            return false;
        want->format = (enum profile_format)i;
    } else if (strcmp(key, "sample_index") == 0) {
        static const char *const names[] = {"alloc_objects", "alloc_space", "inuse_objects",
                                            "inuse_space"};
        size_t i = 0;
        while (i < 4 && !(value && strcmp(value, names[i]) == 0))
            i++;
        if (i == 4 && decimal_in_range(value, 0, 3))
            i = strtoull(value, NULL, 10);
        if (i == 4)
            return false;
        want->sample_type = names[i];
    } else if (strcmp(key, "base") == 0) {
        /* A snapshot id: exactly 16 lowercase hex digits. */
        size_t n = value ? strlen(value) : 0;
        for (size_t i = 0; i < n; i++)
            if (!((value[i] >= '0' && value[i] <= '9') || (value[i] >= 'a' && value[i] <= 'f')))
                return false;
        if (n != 16)
            return false;
        memcpy(want->base_id, value, 17);
    }
    return true;
}

/* Checks that an error message is non-empty, NUL-terminated and one line of printable text. */
static void check_reason(const char *err)
{
    size_t n = strnlen(err, ERR_LEN);
    FUZZ_CHECK(n > 0 && n < ERR_LEN, "reason of length %zu", n);
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(err[i] >= 0x20 && err[i] < 0x7f, "byte 0x%02x at %zu of reason \"%s\"",
                   (unsigned char)err[i], i, err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A NUL in the input ends the query there, as it would a C string. */
    char *buf = malloc(size + 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';

    struct profile_query q = {0}, want = {0};
    char err[ERR_LEN];
    bool failed = false;
    char *rest = buf;
    /* strsep keeps empty pairs ("a&&b"), which a client can send too. */
    for (char *pair = strsep(&rest, "&"); pair && !failed; pair = strsep(&rest, "&")) {
        char *eq = strchr(pair, '=');
        const char *value = NULL;
        if (eq) {
            *eq = '\0';
            value = eq + 1;
        }
        bool ok = expect_set(&want, pair, value);
        memset(err, 'X', sizeof(err));
        int r = profile_query_set(&q, pair, value, err, sizeof(err));
        FUZZ_CHECK(r == 0 || r == -EINVAL, "profile_query_set returned %d", r);
        FUZZ_CHECK((r == 0) == ok, "key \"%s\" value \"%s\": returned %d, expected %s", pair,
                   value ? value : "(null)", r, ok ? "success" : "-EINVAL");
        if (r) {
            check_reason(err);
            failed = true;
        }
        FUZZ_CHECK(q.pid == want.pid && q.seconds == want.seconds && q.debug == want.debug &&
                       q.no_symbols == want.no_symbols && q.min_age_ns == want.min_age_ns &&
                       q.format == want.format &&
                       (q.sample_type == want.sample_type ||
                        (q.sample_type && want.sample_type &&
                         strcmp(q.sample_type, want.sample_type) == 0)) &&
                       same_field(q.sel.comm, want.sel.comm) &&
                       same_field(q.sel.exe, want.sel.exe) &&
                       same_field(q.sel.cgroup, want.sel.cgroup) &&
                       same_field(q.sel.unit, want.sel.unit) &&
                       strcmp(q.base_id, want.base_id) == 0,
                   "query {pid %d, seconds %d, debug %d, no_symbols %d}, expected {%d, %d, %d, %d}",
                   (int)q.pid, q.seconds, q.debug, q.no_symbols, (int)want.pid, want.seconds,
                   want.debug, want.no_symbols);
    }

    if (!failed) {
        memset(err, 'X', sizeof(err));
        int r = profile_query_finish(&q, err, sizeof(err));
        /* pid may be left out (all processes); seconds and min_age exclude each
         * other, debug=1 excludes format=text|folded, sample_index needs one of
         * those, and base= needs pid= alone, without seconds, min_age or debug=1. */
        bool any_sel = q.sel.comm || q.sel.exe || q.sel.cgroup || q.sel.unit;
        bool ok = !(q.seconds && q.min_age_ns) && !(q.debug && q.format != FORMAT_PROTO) &&
                  !(q.sample_type && q.format == FORMAT_PROTO) &&
                  !(q.base_id[0] && (!q.pid || any_sel || q.seconds || q.min_age_ns || q.debug));
        FUZZ_CHECK((r == 0) == ok, "finish returned %d for seconds %d, min_age %llu", r,
                   q.seconds, (unsigned long long)q.min_age_ns);
        if (r) {
            check_reason(err);
        } else {
            /* What the server relies on once a query is accepted. */
            FUZZ_CHECK(q.pid >= 0 && q.pid <= HP_MAX_PID, "pid %d", (int)q.pid);
            FUZZ_CHECK(q.seconds >= 0 && q.seconds <= QUERY_MAX_SECONDS, "seconds %d", q.seconds);
            FUZZ_CHECK(q.debug == 0 || q.debug == 1, "debug %d", q.debug);
            FUZZ_CHECK(q.no_symbols == 0 || q.no_symbols == 1, "no_symbols %d", q.no_symbols);
        }
    }
    free(buf);
    return 0;
}
