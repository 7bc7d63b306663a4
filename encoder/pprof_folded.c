/*
 * pprof_folded.c - collapsed stacks ("folded"), the input of flamegraph.pl,
 * inferno and speedscope: one line per distinct stack, frames from the root
 * to the leaf joined by ';', a space, and the stack's value of one sample
 * type, e.g. `main;parse;xmalloc_array 1048576`.
 *
 * Frames are named as in the top table (pprof_report.h): inlined calls are
 * frames of their own, frames without a function show as "[file]". A ';' in
 * a name becomes ':' (as stackcollapse-perf.pl does) and control bytes '?',
 * so that every line splits back into the same frames. A sample's string
 * labels (the all-process profile's pid and comm) make one root frame,
 * "pid=1234 comm=redis", so that each process is a tower of its own.
 * Samples with the same frames are summed; zero values and empty stacks are
 * left out; lines are sorted by stack, so equal profiles print equal text.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pprof_report.h"

/* One stack: where its text is in the arena, and its value. */
struct folded_line {
    size_t start, len;
    int64_t value;
};

/* The lines and the text of their stacks. */
struct folded_set {
    struct folded_line *v;
    size_t n;
    struct pprof_buf text;
};

/* Appends `s` with ';' made ':' and control bytes '?'. */
static int append_frame(struct pprof_buf *b, const char *s)
{
    char chunk[256];
    size_t n = 0;
    int e = 0;
    for (; *s && e == 0; s++) {
        unsigned char c = (unsigned char)*s;
        chunk[n++] = c == ';' ? ':' : (c < 0x20 || c == 0x7f) ? '?' : (char)c;
        if (n == sizeof(chunk)) {
            e = pprof_buf_append(b, chunk, n);
            n = 0;
        }
    }
    return e ? e : pprof_buf_append(b, chunk, n);
}

/* Appends the root frame made of sample `s`'s labels ("key=value ..."), if it has any. */
static int append_labels(struct pprof_buf *b, const struct pprof_profile *p,
                         const struct pprof_sample *s)
{
    int e = 0;
    for (size_t i = 0; i < s->n_labels && e == 0; i++) {
        const struct pprof_label_ix *l = &p->sample_labels.v[s->first_label + i];
        if (i)
            e = pprof_buf_append(b, " ", 1);
        if (e == 0)
            e = append_frame(b, pprof_str(p, l->key));
        if (e == 0)
            e = pprof_buf_append(b, "=", 1);
        if (e == 0)
            e = append_frame(b, pprof_str(p, l->str));
    }
    return e;
}

/* Appends the stack of sample `s` (frames `f`, leaf first) root first. */
static int append_stack(struct pprof_buf *b, const struct pprof_profile *p,
                        const struct pprof_sample *s, const struct report_frames *f)
{
    int e = append_labels(b, p, s);
    int first = s->n_labels == 0;
    char buf[REPORT_NAME_MAX];
    for (size_t i = f->n; i-- > 0 && e == 0;) {
        if (!first)
            e = pprof_buf_append(b, ";", 1);
        first = 0;
        if (e == 0)
            e = append_frame(b, report_frame_name(p, &f->v[i], buf));
    }
    return e;
}

/* Collects one line per sample with a value and a stack. */
static int collect(const struct pprof_profile *p, size_t type, struct folded_set *set)
{
    set->v = calloc(p->samples.n ? p->samples.n : 1, sizeof(*set->v));
    if (!set->v)
        return -ENOMEM;
    struct report_frames frames = {0};
    size_t next = 0;
    int64_t v;
    int e;
    while ((e = report_next_sample(p, type, &next, &v, &frames)) > 0) {
        if (frames.n == 0)
            continue;
        size_t start = set->text.len;
        e = append_stack(&set->text, p, &p->samples.v[next - 1], &frames);
        if (e)
            break;
        set->v[set->n++] = (struct folded_line){start, set->text.len - start, v};
    }
    report_frames_free(&frames);
    return e;
}

/* The arena qsort compares in; qsort_r keeps it out of global state. */
static int by_stack(const void *a, const void *b, void *arena)
{
    const struct folded_line *x = a, *y = b;
    const char *text = arena;
    int c = memcmp(text + x->start, text + y->start, x->len < y->len ? x->len : y->len);
    if (c)
        return c;
    return x->len < y->len ? -1 : x->len > y->len;
}

int pprof_write_folded(const struct pprof_profile *p, size_t type, struct pprof_buf *out)
{
    if (!p || !out || type >= p->sample_types.n)
        return -EINVAL;
    struct folded_set set = {0};
    int e = collect(p, type, &set);
    size_t start_len = out->len;
    if (e == 0 && set.n)
        qsort_r(set.v, set.n, sizeof(*set.v), by_stack, set.text.data);
    struct report_writer w = {.out = out, .err = e};
    for (size_t i = 0; i < set.n && !w.err;) {
        const struct folded_line *l = &set.v[i];
        int64_t sum = 0;
        for (; i < set.n && by_stack(l, &set.v[i], set.text.data) == 0; i++)
            if (__builtin_add_overflow(sum, set.v[i].value, &sum))
                w.err = -EOVERFLOW;
        report_put(&w, "%.*s %" PRId64 "\n", (int)l->len, (const char *)set.text.data + l->start,
                   sum);
    }
    free(set.v);
    pprof_buf_free(&set.text);
    if (w.err)
        out->len = start_len;
    return w.err;
}
