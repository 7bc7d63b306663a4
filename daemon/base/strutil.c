/*
 * strutil.c - strict decimal parsing (see strutil.h).
 */
#include "strutil.h"

#include <errno.h>

int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
    if (!s || !*s)
        return -EINVAL;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -EINVAL;
        uint64_t d = (uint64_t)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -EINVAL;
        v = v * 10 + d;
    }
    if (v < min || v > max)
        return -EINVAL;
    *out = v;
    return 0;
}
