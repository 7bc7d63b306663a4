/*
 * targets_json.c - the profiled processes as JSON (see targets_json.h).
 * Strings (a process's comm, an allocator's path) may hold any bytes: they
 * are written as valid UTF-8, control characters escaped and bytes that are
 * not UTF-8 replaced by U+FFFD, so that any JSON parser reads the list.
 */
#include "targets_json.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "entry_families.h"
#include "history.h"
#include "hp_limits.h"
#include "probe_cost.h"
#include "visible_targets.h"

/* The length of the valid UTF-8 sequence at `s` (1..4), or 0 if it is not one. */
static size_t utf8_sequence(const unsigned char *s)
{
    size_t n = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3
             : (s[0] & 0xf8) == 0xf0 ? 4 : 0;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 0;
    /* Overlong forms, surrogates and code points past U+10FFFF are not UTF-8. */
    if ((n == 2 && s[0] < 0xc2) || (n == 3 && s[0] == 0xe0 && s[1] < 0xa0) ||
        (n == 3 && s[0] == 0xed && s[1] >= 0xa0) || (n == 4 && s[0] == 0xf0 && s[1] < 0x90) ||
        (n == 4 && (s[0] > 0xf4 || (s[0] == 0xf4 && s[1] >= 0x90))))
        return 0;
    return n;
}

/* Appends `s` as a JSON string, quotes included. */
static int put_string(struct strbuf *b, const char *s)
{
    int e = strbuf_append(b, "\"", 1);
    const unsigned char *p = (const unsigned char *)s;
    while (*p && e == 0) {
        char esc[8];
        size_t n = utf8_sequence(p);
        if (n == 0) {
            e = strbuf_append(b, "\\ufffd", 6);
            p++;
        } else if (*p == '"' || *p == '\\') {
            esc[0] = '\\';
            esc[1] = (char)*p;
            e = strbuf_append(b, esc, 2);
            p++;
        } else if (*p < 0x20 || *p == 0x7f) {
            snprintf(esc, sizeof(esc), "\\u%04x", *p);
            e = strbuf_append(b, esc, 6);
            p++;
        } else {
            e = strbuf_append(b, (const char *)p, n);
            p += n;
        }
    }
    return e ? e : strbuf_append(b, "\"", 1);
}

/* Why a target is profiled and until when: "held_by": ["rule", ...],
 * "detach_in_seconds": seconds, or null while a holder has no end. */
static int put_holders(struct strbuf *b, const struct holders *h, uint64_t now)
{
    int e = strbuf_printf(b, ", \"held_by\": [");
    int first = 1;
    for (int k = 0; k < HOLD_KINDS && e == 0; k++) {
        if (!holders_holds(h, (enum hold_kind)k, now))
            continue;
        e = strbuf_printf(b, "%s\"%s\"", first ? "" : ", ", hold_kind_name((enum hold_kind)k));
        first = 0;
    }
    double left = holders_seconds_left(h, now);
    if (e == 0 && isinf(left))
        e = strbuf_printf(b, "], \"detach_in_seconds\": null");
    else if (e == 0)
        e = strbuf_printf(b, "], \"detach_in_seconds\": %.3f", left);
    return e;
}

/* What heapprofd costs the target, and how soon after its exec or fork it
 * was attached. */
static int put_cost(struct strbuf *b, const struct target_info *t)
{
    struct cost_estimate c;
    probe_cost_estimate(t->probe_hits, t->ns_per_hit, t->cpu_ns, &c);
    int e = strbuf_printf(b, ", \"probe_hits\": %" PRIu64 ", \"cost_cpu_seconds\": %.6f",
                          t->probe_hits, c.added_cpu_seconds);
    if (e == 0 && c.percent_known)
        e = strbuf_printf(b, ", \"cost_percent\": %.3f", c.percent);
    else if (e == 0)
        e = strbuf_printf(b, ", \"cost_percent\": null");
    if (e == 0 && t->attach_delay_ns)
        e = strbuf_printf(b, ", \"attach_delay_seconds\": %.6f", t->attach_delay_ns / 1e9);
    else if (e == 0)
        e = strbuf_printf(b, ", \"attach_delay_seconds\": null");
    if (e == 0)
        e = strbuf_printf(b, ", \"forks_unprofiled\": %" PRIu64, t->forks_unprofiled);
    return e;
}

/* The entry families its calls reach the sampler by: "interposed": ["c", ...]. */
static int put_families(struct strbuf *b, uint32_t mask)
{
    int e = strbuf_printf(b, ", \"interposed\": [");
    int first = 1;
    for (int f = 0; f < ENTRY_FAMILY_COUNT && e == 0; f++) {
        if (!(mask & (1u << f)))
            continue;
        e = strbuf_printf(b, "%s\"%s\"", first ? "" : ", ",
                          entry_family_name((enum entry_family)f));
        first = 0;
    }
    return e ? e : strbuf_printf(b, "]");
}

/* One target's object. */
static int put_target(struct strbuf *b, const struct target_info *t, const struct hp_counts *totals,
                      struct history *history, uint64_t now, int first)
{
    int64_t inuse = totals->inuse_bytes > 0 ? totals->inuse_bytes >> HP_BYTES_SHIFT : 0;
    uint64_t allocated = totals->alloc_bytes >> HP_BYTES_SHIFT;
    double profiled = now > t->attached_ns ? (double)(now - t->attached_ns) / 1e9 : 0;
    int e = strbuf_printf(b, "%s\n  {\"pid\": %d, \"comm\": ", first ? "" : ",", (int)t->pid);
    if (e == 0)
        e = put_string(b, t->comm);
    if (e == 0)
        e = strbuf_printf(b, ", \"allocator\": ");
    if (e == 0)
        e = put_string(b, t->allocator);
    if (e == 0)
        e = strbuf_printf(b, ", \"sampler\": \"%s\", \"sampler_note\": ", t->sampler);
    if (e == 0)
        e = put_string(b, t->sampler_note);
    if (e == 0)
        e = put_families(b, t->families);
    if (e == 0)
        e = strbuf_printf(b,
                          ", \"profiled_seconds\": %.3f, \"inuse_bytes\": %" PRId64
                          ", \"allocated_bytes\": %" PRIu64,
                          profiled, inuse, allocated);
    if (e == 0)
        e = put_holders(b, &t->holders, now);
    if (e == 0)
        e = put_cost(b, t);
    /* The index's sparkline: in-use bytes over the last minutes. */
    if (e == 0 && history)
        e = strbuf_printf(b, ", \"history_period_seconds\": %g, \"history_inuse_bytes\": ",
                          history->period_ns / 1e9);
    if (e == 0 && history)
        e = history_write_spark(history, t->pid, b);
    return e ? e : strbuf_printf(b, "}");
}

int targets_json_write(struct daemon_ctx *ctx, const struct caller *who, struct strbuf *out)
{
    struct visible_targets v;
    int e = visible_targets_get(ctx, who, true, &v);
    uint64_t now = monotonic_ns();
    if (e == 0)
        e = strbuf_printf(out, "{\"targets\": [");
    for (size_t i = 0; i < v.n && e == 0; i++)
        e = put_target(out, &v.info[i], &v.totals[i], ctx->history, now, i == 0);
    if (e == 0)
        e = strbuf_printf(out, "%s]}\n", v.n ? "\n" : "");
    visible_targets_free(&v);
    return e;
}
