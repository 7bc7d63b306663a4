/*
 * strutil.c - strict decimal parsing, control bytes hidden (see strutil.h).
 */
#include "strutil.h"

#include <errno.h>
#include <stddef.h>

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

void hide_control_bytes(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = '?';
}
