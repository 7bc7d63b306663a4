/*
 * strutil.c - strict decimal and duration parsing, durations written back,
 * control bytes hidden (see strutil.h).
 */
#include "strutil.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

int parse_decimal(const char **p, const char *end, uint64_t *out)
{
    const char *s = *p;
    uint64_t v = 0;
    for (; (end ? s < end : *s != '\0') && *s >= '0' && *s <= '9'; s++) {
        uint64_t d = (uint64_t)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -EINVAL;
        v = v * 10 + d;
    }
    if (s == *p)
        return -EINVAL;
    *p = s;
    *out = v;
    return 0;
}

int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    uint64_t v;
    if (!s || parse_decimal(&s, NULL, &v) != 0 || *s != '\0' || v < min || v > max)
        return -EINVAL;
    *out = v;
    return 0;
}

int parse_duration(const char *s, uint64_t max_ns, uint64_t *out)
{
    static const struct {
        const char *unit;
        uint64_t ns;
    } units[] = {{"ms", 1000000ULL}, {"s", 1000000000ULL}, {"m", 60000000000ULL},
                 {"h", 3600000000000ULL}};
    uint64_t total = 0, n;
    if (!s || !*s)
        return -EINVAL;
    if (parse_u64(s, 0, max_ns / 1000000000ULL, &n) == 0) {
        *out = n * 1000000000ULL; /* a plain number is seconds */
        return 0;
    }
    while (*s) {
        if (parse_decimal(&s, NULL, &n) != 0 || n > max_ns)
            return -EINVAL;
        size_t k = 0;
        for (; k < sizeof(units) / sizeof(units[0]); k++) {
            size_t len = strlen(units[k].unit);
            /* "m" must not swallow the "m" of "ms". */
            if (strncmp(s, units[k].unit, len) == 0 && !(len == 1 && s[0] == 'm' && s[1] == 's'))
                break;
        }
        if (k == sizeof(units) / sizeof(units[0]) || n > max_ns / units[k].ns)
            return -EINVAL;
        total += n * units[k].ns;
        if (total > max_ns)
            return -EINVAL;
        s += strlen(units[k].unit);
    }
    *out = total;
    return 0;
}

void format_duration(uint64_t ns, char *out, size_t len)
{
    static const struct {
        const char *unit;
        uint64_t ns;
    } units[] = {{"h", 3600000000000ULL}, {"m", 60000000000ULL}, {"s", 1000000000ULL},
                 {"ms", 1000000ULL}};
    if (ns == 0) {
        snprintf(out, len, "0");
        return;
    }
    for (size_t k = 0; k < sizeof(units) / sizeof(units[0]); k++) {
        if (ns % units[k].ns == 0) {
            snprintf(out, len, "%llu%s", (unsigned long long)(ns / units[k].ns), units[k].unit);
            return;
        }
    }
    /* A part of a millisecond, which no limit is: parse_duration() does
     * not read it back, but the text still says what it is. */
    snprintf(out, len, "%lluns", (unsigned long long)ns);
}

void hide_control_bytes(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = '?';
}
