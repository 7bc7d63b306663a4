/*
 * pprof_text.c - Go's legacy heap profile text, what net/http/pprof serves
 * for `debug=1` (runtime/pprof's writeHeapInternal and printStackRecord).
 *
 * Go writes it through text/tabwriter (minwidth 1, tabwidth 8, padding 1,
 * pad with tabs), which lines up the `#` frame lines of each stack; the
 * padding is reproduced here so the output matches Go's byte for byte.
 * Go prints raw sample counts and `go tool pprof` scales them when it reads
 * the text; the values here are the profile's, already estimates.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pprof_report.h"

/* The heap sample types, in the one order this format takes. */
enum { ALLOC_OBJECTS, ALLOC_SPACE, INUSE_OBJECTS, INUSE_SPACE, HEAP_TYPES };

/* text/tabwriter's tab width, as Go's writeHeapInternal sets it. */
#define TAB_WIDTH 8

/* Width of a cell as text/tabwriter counts it: in UTF-8 characters, not bytes. */
static size_t cell_width(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += ((uint8_t)*s & 0xc0) != 0x80;
    return n;
}

/* The tabs after a cell `textw` wide in a column whose widest cell is `maxw`. */
static void pad(struct report_writer *w, size_t textw, size_t maxw)
{
    /* The column is its widest cell plus padding 1, rounded up to whole tabs. */
    size_t cellw = (maxw + 1 + TAB_WIDTH - 1) / TAB_WIDTH * TAB_WIDTH;
    for (size_t tabs = (cellw - textw + TAB_WIDTH - 1) / TAB_WIDTH; tabs; tabs--)
        report_put(w, "\t");
}

/* Prints the `#` lines of a stack, lining up runs of named frames as tabwriter would. */
static void print_frames(struct report_writer *w, const struct pprof_profile *p,
                         const struct report_frame *f, size_t n)
{
    /* No function entry addresses in the model: Go's pc-entry offset is 0. */
    const uint64_t offset = 0;
    char addr[32], off[32];
    snprintf(off, sizeof(off), "+0x%" PRIx64, offset);
    size_t i = 0;
    while (i < n) {
        if (!f[i].fn) {
            report_put(w, "#\t0x%" PRIx64 "\n", f[i].loc->address);
            i++;
            continue;
        }
        /* A tabwriter column block: the run of named frames from here. */
        size_t end = i, addr_w = 0, name_w = 0;
        for (; end < n && f[end].fn; end++) {
            size_t aw = (size_t)snprintf(addr, sizeof(addr), "0x%" PRIx64, f[end].loc->address);
            size_t nw = cell_width(pprof_str(p, f[end].fn->name)) + strlen(off);
            addr_w = aw > addr_w ? aw : addr_w;
            name_w = nw > name_w ? nw : name_w;
        }
        for (; i < end; i++) {
            const char *name = pprof_str(p, f[i].fn->name);
            size_t aw = (size_t)snprintf(addr, sizeof(addr), "0x%" PRIx64, f[i].loc->address);
            report_put(w, "#\t%s", addr);
            pad(w, aw, addr_w);
            report_put(w, "%s%s", name, off);
            pad(w, cell_width(name) + strlen(off), name_w);
            report_put(w, "%s:%" PRId64 "\n", pprof_str(p, f[i].fn->filename), f[i].line);
        }
    }
    report_put(w, "\n");
}

/* A sample's place in Go's order: by in-use bytes, largest first. */
struct sample_order {
    int64_t inuse_bytes;
    size_t index;
};

/* qsort order: in-use bytes descending, then as added, so equal samples keep their order. */
static int by_inuse_bytes(const void *a, const void *b)
{
    const struct sample_order *x = a, *y = b;
    if (x->inuse_bytes != y->inuse_bytes)
        return x->inuse_bytes > y->inuse_bytes ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Whether the profile has the heap sample types in order and a period Go's header can carry. */
static int is_heap_profile(const struct pprof_profile *p)
{
    static const char *const names[HEAP_TYPES] = {"alloc_objects", "alloc_space", "inuse_objects",
                                                  "inuse_space"};
    if (p->sample_types.n != HEAP_TYPES || p->period < 1 || p->period > INT64_MAX / 2)
        return 0;
    for (int i = 0; i < HEAP_TYPES; i++)
        if (strcmp(pprof_str(p, p->sample_types.v[i].type), names[i]) != 0)
            return 0;
    return 1;
}

/* Adds the four values of `v` to `sum`; -EOVERFLOW if a total does not fit. */
static int add_values(int64_t sum[HEAP_TYPES], const int64_t *v)
{
    for (int i = 0; i < HEAP_TYPES; i++)
        if (__builtin_add_overflow(sum[i], v[i], &sum[i]))
            return -EOVERFLOW;
    return 0;
}

int pprof_write_heap_text(const struct pprof_profile *p, struct pprof_buf *out)
{
    if (!p || !out || !is_heap_profile(p))
        return -EINVAL;
    size_t n = p->samples.n;
    struct sample_order *order = malloc((n ? n : 1) * sizeof(*order));
    if (!order)
        return -ENOMEM;
    int64_t total[HEAP_TYPES] = {0};
    struct report_writer w = {.out = out};
    size_t start_len = out->len;
    for (size_t i = 0; i < n && !w.err; i++) {
        const int64_t *v = &p->sample_values.v[p->samples.v[i].first_value];
        order[i] = (struct sample_order){v[INUSE_SPACE], i};
        w.err = add_values(total, v);
    }
    qsort(order, n, sizeof(*order), by_inuse_bytes);

    /* Go prints 2*MemProfileRate: early C++ heap profilers did, and pprof halves it. */
    report_put(&w,
        "heap profile: %" PRId64 ": %" PRId64 " [%" PRId64 ": %" PRId64 "] @ heap/%" PRId64 "\n",
        total[INUSE_OBJECTS], total[INUSE_SPACE], total[ALLOC_OBJECTS], total[ALLOC_SPACE],
        2 * p->period);
    struct report_frames frames = {0};
    for (size_t i = 0; i < n && !w.err; i++) {
        const struct pprof_sample *s = &p->samples.v[order[i].index];
        const int64_t *v = &p->sample_values.v[s->first_value];
        report_put(&w, "%" PRId64 ": %" PRId64 " [%" PRId64 ": %" PRId64 "] @", v[INUSE_OBJECTS],
            v[INUSE_SPACE], v[ALLOC_OBJECTS], v[ALLOC_SPACE]);
        for (size_t j = 0; j < s->n_locations; j++) {
            uint64_t id = p->sample_locations.v[s->first_location + j];
            report_put(&w, " 0x%" PRIx64, p->locations.v[id - 1].address);
        }
        report_put(&w, "\n");
        if (!w.err)
            w.err = report_sample_frames(p, s, &frames);
        print_frames(&w, p, frames.v, frames.n);
    }
    report_frames_free(&frames);
    free(order);
    if (w.err)
        out->len = start_len;
    return w.err;
}
