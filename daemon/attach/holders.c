/*
 * holders.c - the set of reasons a process is profiled (see holders.h).
 */
#include "holders.h"

#include <math.h>
#include <stdio.h>

/* Whether holds of `kind` end when dropped rather than by the clock. */
static bool dropped_not_timed(enum hold_kind kind)
{
    return kind == HOLD_WINDOW;
}

void holders_add(struct holders *h, enum hold_kind kind, uint64_t until_ns)
{
    if (kind >= HOLD_KINDS)
        return;
    if (h->count[kind] == 0 || until_ns > h->until_ns[kind])
        h->until_ns[kind] = until_ns;
    if (h->count[kind] == 0 || dropped_not_timed(kind))
        h->count[kind]++;
}

void holders_drop(struct holders *h, enum hold_kind kind)
{
    if (kind >= HOLD_KINDS || h->count[kind] == 0)
        return;
    h->count[kind] = dropped_not_timed(kind) ? h->count[kind] - 1 : 0;
}

bool holders_holds(const struct holders *h, enum hold_kind kind, uint64_t now_ns)
{
    if (kind >= HOLD_KINDS || h->count[kind] == 0)
        return false;
    return dropped_not_timed(kind) || h->until_ns[kind] > now_ns;
}

bool holders_held(const struct holders *h, uint64_t now_ns)
{
    for (int k = 0; k < HOLD_KINDS; k++)
        if (holders_holds(h, (enum hold_kind)k, now_ns))
            return true;
    return false;
}

uint64_t holders_until(const struct holders *h, uint64_t now_ns)
{
    uint64_t until = 0;
    for (int k = 0; k < HOLD_KINDS; k++)
        if (holders_holds(h, (enum hold_kind)k, now_ns) && h->until_ns[k] > until)
            until = h->until_ns[k];
    return until;
}

double holders_seconds_left(const struct holders *h, uint64_t now_ns)
{
    uint64_t until = holders_until(h, now_ns);
    if (until == HOLD_FOREVER)
        return INFINITY;
    return until > now_ns ? (double)(until - now_ns) / 1e9 : 0.0;
}

struct holders holders_for_child(const struct holders *parent, uint64_t now_ns)
{
    struct holders child = {{0}, {0}};
    uint64_t until = holders_until(parent, now_ns);
    if (until > now_ns)
        holders_add(&child, HOLD_FORK, until);
    return child;
}

const char *hold_kind_name(enum hold_kind kind)
{
    static const char *const names[HOLD_KINDS] = {
        [HOLD_PID] = "pid",         [HOLD_RULE] = "rule",     [HOLD_FORK] = "fork",
        [HOLD_REQUEST] = "request", [HOLD_WINDOW] = "window",
    };
    return kind < HOLD_KINDS ? names[kind] : "?";
}

int holders_describe(const struct holders *h, uint64_t now_ns, char *buf, size_t len)
{
    int used = 0;
    if (len)
        buf[0] = '\0';
    for (int k = 0; k < HOLD_KINDS; k++) {
        if (!holders_holds(h, (enum hold_kind)k, now_ns))
            continue;
        int n = snprintf(buf + (used < (int)len ? used : (int)len),
                         (size_t)used < len ? len - (size_t)used : 0, "%s%s", used ? "," : "",
                         hold_kind_name((enum hold_kind)k));
        used += n > 0 ? n : 0;
    }
    return used;
}

void holders_merge(struct holders *dst, const struct holders *src)
{
    for (int k = 0; k < HOLD_KINDS; k++)
        for (uint32_t i = 0; i < src->count[k]; i++)
            holders_add(dst, (enum hold_kind)k, src->until_ns[k]);
}
