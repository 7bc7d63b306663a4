/*
 * index_html.c - the index of profiled processes as an HTML table (see
 * index_html.h). A process chooses its comm, and a file path may hold any
 * byte: every such string is escaped, so that it stays text in the page.
 */
#include "index_html.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "entry_families.h"
#include "holders.h"
#include "probe_cost.h"
#include "visible_targets.h"

/* The page up to the first row. */
static const char page_head[] =
    "<html><head><title>heapprofd</title></head><body>\n"
    "<p>Heap profiles of processes (add ?pid=N to profile another)</p>\n"
    "<table><tr><th>pid</th><th>command</th><th>allocator</th>"
    "<th>sampler</th><th>held by</th><th>detached in</th><th>cost</th>"
    "<th>profiles</th></tr>\n";
/* The page after the last row. */
static const char page_tail[] = "</table></body></html>\n";

/* Appends `s` with HTML's special characters escaped. */
static int put_escaped(struct strbuf *b, const char *s)
{
    int e = 0;
    while (*s && e == 0) {
        size_t plain = strcspn(s, "<>&\"");
        e = strbuf_append(b, s, plain);
        s += plain;
        if (!*s || e)
            break;
        const char *rep = *s == '<' ? "&lt;" : *s == '>' ? "&gt;" : *s == '&' ? "&amp;" : "&quot;";
        e = strbuf_append(b, rep, strlen(rep));
        s++;
    }
    return e;
}

/* One process's row: who it is, its allocator and sampler, what holds it
 * and until when, its cost, and links to its profiles. */
static int put_row(struct strbuf *b, const struct target_info *t, uint64_t now)
{
    char held[64], until[32], cost[256], families[64];
    holders_describe(&t->holders, now, held, sizeof(held));
    double left = holders_seconds_left(&t->holders, now);
    if (isinf(left))
        snprintf(until, sizeof(until), "when it exits");
    else
        snprintf(until, sizeof(until), "%.0f s", left);
    probe_cost_describe(t->probe_hits, t->ns_per_hit, t->cpu_ns, cost, sizeof(cost));
    int e = strbuf_printf(b, "<tr><td>%d</td><td>", (int)t->pid);
    if (e == 0)
        e = put_escaped(b, t->comm);
    if (e == 0)
        e = strbuf_printf(b, "</td><td>");
    if (e == 0)
        e = put_escaped(b, t->allocator);
    if (e == 0)
        e = strbuf_printf(b, " (%zu functions, %zu on emulated instructions)</td><td>%s", t->nfuncs,
                          t->emulated, t->sampler);
    if (e == 0 && t->sampler_note[0]) {
        e = strbuf_printf(b, ": not inprocess, ");
        if (e == 0)
            e = put_escaped(b, t->sampler_note);
    }
    entry_families_describe(t->families, ", ", families, sizeof(families));
    if (e == 0)
        e = strbuf_printf(b, "; interposed: %s", families[0] ? families : "none");
    if (e == 0)
        e = strbuf_printf(b,
                          "</td><td>%s</td><td>%s</td><td>%s</td><td>"
                          "<a href=\"heap?pid=%d\">heap</a> <a href=\"allocs?pid=%d\">allocs</a> "
                          "<a href=\"heap?pid=%d&amp;debug=1\">text</a></td></tr>\n",
                          held, until, cost, (int)t->pid, (int)t->pid, (int)t->pid);
    return e;
}

int index_html_write(struct daemon_ctx *ctx, const struct caller *who, struct strbuf *out)
{
    struct visible_targets v = {0};
    int e = visible_targets_get(ctx, who, false, &v);
    uint64_t now = monotonic_ns();
    if (e == 0)
        e = strbuf_append(out, page_head, sizeof(page_head) - 1);
    for (size_t i = 0; i < v.n && e == 0; i++)
        e = put_row(out, &v.info[i], now);
    if (e == 0)
        e = strbuf_append(out, page_tail, sizeof(page_tail) - 1);
    visible_targets_free(&v);
    return e;
}
