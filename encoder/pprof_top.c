/*
 * pprof_top.c - the top table of a profile for one sample type, as
 * `go tool pprof -top -nodefraction=0` prints it: one row per function with
 * its flat value (samples whose leaf it is) and cum value (samples whose
 * stack holds it, counted once per sample however often it recurses).
 *
 * It follows pprof's report package where a reader would notice: functions
 * are told apart by name alone (pprof's default "functions" granularity),
 * inlined calls are functions of their own (marked "(inline)", or
 * "(partial-inline)" where only some callers inline them), frames without
 * a function are grouped per object file as "[libc.so.6]", rows are sorted
 * by flat (largest first), then name, then cum; one unit is chosen for the
 * whole table from its smallest non-zero and its total value (pprof's
 * `-unit=minimum`), values print with two decimals and ".00" trimmed, and
 * percentages as pprof's measurement.Percentage does. Samples whose value
 * is zero are left out, as pprof leaves them out of its graph. Units other
 * than bytes (counts) print as plain numbers: those are all a heap profile
 * has. Nothing is dropped: there are no node limits.
 *
 * Why not run pprof: the daemon serves people without Go, and a table of a
 * few thousand rows is a sort and a few sums over the model.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pprof_report.h"

/* One row of the table. */
struct top_node {
    const char *name; /* into the profile, or `owned` */
    char *owned;      /* a "[file]" name made for frames without a function */
    int64_t flat, cum;
    size_t last_sample; /* the sample that last added to cum, plus one */
    int called_inline;  /* some caller has it inlined */
    int called_outline; /* some caller calls it */
};

/* The rows and the index that finds a frame's row. */
struct top_table {
    struct top_node *v;
    size_t n;
    /* Row plus one by key: named[i] for function name string i, unnamed[i]
     * for frames without a function in a mapping whose file is string i. */
    size_t *named, *unnamed;
};

/* A memory unit: its name and size in bytes (pprof's measurement package). */
struct unit {
    const char *name;
    double factor;
};

static const struct unit MEMORY_UNITS[] = {
    {"B", 1.0},
    {"kB", 1024.0},
    {"MB", 1024.0 * 1024},
    {"GB", 1024.0 * 1024 * 1024},
    {"TB", 1024.0 * 1024 * 1024 * 1024},
    {"PB", 1024.0 * 1024 * 1024 * 1024 * 1024},
};
#define N_MEMORY_UNITS (sizeof(MEMORY_UNITS) / sizeof(MEMORY_UNITS[0]))

/* Whether a sample type's unit names bytes, as pprof recognises it ("bytes", "B", ...). */
static int is_memory_unit(const char *unit)
{
    char u[16];
    size_t n = strlen(unit);
    if (n >= sizeof(u))
        return 0;
    for (size_t i = 0; i <= n; i++)
        u[i] = (char)(unit[i] >= 'A' && unit[i] <= 'Z' ? unit[i] + 32 : unit[i]);
    if (n > 2 && u[n - 1] == 's')
        u[n - 1] = '\0';
    return strcmp(u, "b") == 0 || strcmp(u, "byte") == 0;
}

/* The largest unit in which `v` bytes is at least 1 (bytes for 0), as pprof's autoScale. */
static const struct unit *best_unit(int64_t v)
{
    const struct unit *u = &MEMORY_UNITS[0];
    for (size_t i = 0; i < N_MEMORY_UNITS; i++)
        if ((double)v / MEMORY_UNITS[i].factor >= 1.0)
            u = &MEMORY_UNITS[i];
    return u;
}

static int64_t abs64(int64_t v)
{
    return v < 0 ? -v : v;
}

/* The row of frame `f`, added on first sight; NULL when out of memory. */
static struct top_node *node_of(const struct pprof_profile *p, struct top_table *t,
                                const struct report_frame *f)
{
    int64_t file = f->loc->mapping_id ? p->mappings.v[f->loc->mapping_id - 1].filename : 0;
    size_t *slot = f->fn ? &t->named[f->fn->name] : &t->unnamed[file];
    if (*slot)
        return &t->v[*slot - 1];
    struct top_node *n = &t->v[t->n];
    *n = (struct top_node){0};
    char buf[REPORT_NAME_MAX];
    const char *name = report_frame_name(p, f, buf);
    if (name == buf) {
        n->owned = strdup(buf);
        if (!n->owned)
            return NULL;
    }
    n->name = n->owned ? n->owned : name;
    *slot = ++t->n;
    return n;
}

/* Adds every sample's value of type `type` to the rows; 0, -ENOMEM or -EOVERFLOW. */
static int gather(const struct pprof_profile *p, size_t type, struct top_table *t,
                  int64_t *total)
{
    struct report_frames frames = {0};
    size_t next = 0;
    int64_t v;
    int e;
    while ((e = report_next_sample(p, type, &next, &v, &frames)) > 0) {
        size_t i = next - 1; /* the sample's index */
        /* Rows' sums stay within the total of absolute values: check only it. */
        if (v == INT64_MIN || __builtin_add_overflow(*total, abs64(v), total)) {
            e = -EOVERFLOW;
            break;
        }
        for (size_t j = 0; j < frames.n && e > 0; j++) {
            struct top_node *n = node_of(p, t, &frames.v[j]);
            if (!n) {
                e = -ENOMEM;
                break;
            }
            if (j == 0)
                n->flat += v;
            if (frames.v[j].inlined)
                n->called_inline = 1;
            else if (j + 1 < frames.n)
                n->called_outline = 1;
            if (n->last_sample != i + 1) {
                n->cum += v;
                n->last_sample = i + 1;
            }
        }
        if (e < 0)
            break;
    }
    report_frames_free(&frames);
    return e;
}

/* pprof's order for -top: flat (largest first), then name, then cum. */
static int by_flat_name_cum(const void *a, const void *b)
{
    const struct top_node *x = a, *y = b;
    if (abs64(x->flat) != abs64(y->flat))
        return abs64(x->flat) > abs64(y->flat) ? -1 : 1;
    int c = strcmp(x->name, y->name);
    if (c)
        return c;
    if (abs64(x->cum) != abs64(y->cum))
        return abs64(x->cum) > abs64(y->cum) ? -1 : 1;
    return 0;
}

/* The unit of the whole table (pprof's selectOutputUnit for -unit=minimum); NULL: unitless. */
static const struct unit *table_unit(const struct top_table *t, int64_t total, int memory)
{
    if (!memory)
        return NULL;
    int64_t min = 0;
    for (size_t i = 0; i < t->n; i++) {
        int64_t v = t->v[i].flat ? abs64(t->v[i].flat) : abs64(t->v[i].cum);
        if (v > 0 && (min == 0 || v < min))
            min = v;
    }
    if (min == 0)
        min = total;
    const struct unit *u = best_unit(min);
    /* Small and large values in different units: pprof scales the smallest by
     * 100 so that it still shows as at least 0.01 of the larger unit. */
    if (u != best_unit(total) && min <= INT64_MAX / 100 && min * 100 < total)
        u = best_unit(min * 100);
    return u;
}

/* A value as pprof's ScaledLabel prints it in unit `u` (NULL: unitless). */
static void format_value(char *buf, size_t len, int64_t v, const struct unit *u)
{
    double x = u ? (double)v / u->factor : (double)v;
    snprintf(buf, len, "%.2f", x);
    size_t n = strlen(buf);
    if (n > 3 && strcmp(buf + n - 3, ".00") == 0)
        buf[n - 3] = '\0';
    if (strcmp(buf, "0") == 0 || strcmp(buf, "-0") == 0)
        snprintf(buf, len, "0");
    else if (u)
        snprintf(buf + strlen(buf), len - strlen(buf), "%s", u->name);
}

/* `v` as a percentage of `total`, as pprof's measurement.Percentage prints it. */
static void format_percent(char *buf, size_t len, int64_t v, int64_t total)
{
    double ratio = total ? fabs((double)v / (double)total) * 100 : 0;
    if (ratio >= 99.95 && ratio <= 100.05)
        snprintf(buf, len, "  100%%");
    else if (ratio >= 1.0)
        snprintf(buf, len, "%5.2f%%", ratio);
    else
        snprintf(buf, len, "%5.2g%%", ratio);
}

/* Prints the header and the rows. */
static void print_table(struct report_writer *w, const struct pprof_profile *p, size_t type,
                        const struct top_table *t, int64_t total)
{
    int memory = is_memory_unit(pprof_str(p, p->sample_types.v[type].unit));
    const struct unit *u = table_unit(t, total, memory);
    char a[48], b[48], c[48];
    int64_t flat_sum = 0;
    for (size_t i = 0; i < t->n; i++)
        flat_sum += t->v[i].flat;
    format_value(a, sizeof(a), flat_sum, u);
    format_percent(b, sizeof(b), flat_sum, total);
    format_value(c, sizeof(c), total, u);
    report_put(w, "Type: %s\nShowing nodes accounting for %s, %s of %s total\n",
               pprof_str(p, p->sample_types.v[type].type), a, b + strspn(b, " "), c);
    report_put(w, "%10s %5s%% %5s%% %10s %5s%%\n", "flat", "flat", "sum", "cum", "cum");
    int64_t sum = 0;
    for (size_t i = 0; i < t->n; i++) {
        const struct top_node *n = &t->v[i];
        sum += n->flat;
        format_value(a, sizeof(a), n->flat, u);
        format_percent(b, sizeof(b), n->flat, total);
        format_percent(c, sizeof(c), sum, total);
        report_put(w, "%10s %s %s ", a, b, c);
        format_value(a, sizeof(a), n->cum, u);
        format_percent(b, sizeof(b), n->cum, total);
        const char *inl = !n->called_inline   ? ""
                          : n->called_outline ? " (partial-inline)"
                                              : " (inline)";
        report_put(w, "%10s %s  %s%s\n", a, b, n->name, inl);
    }
}

int pprof_write_top(const struct pprof_profile *p, size_t type, struct pprof_buf *out)
{
    if (!p || !out || type >= p->sample_types.n)
        return -EINVAL;
    /* Every frame's row is found by a string index: arrays as long as the table. */
    struct top_table t = {
        .v = calloc(p->functions.n + p->mappings.n + 1, sizeof(*t.v)),
        .named = calloc(p->strings.n, sizeof(size_t)),
        .unnamed = calloc(p->strings.n, sizeof(size_t)),
    };
    int64_t total = 0;
    int e = t.v && t.named && t.unnamed ? gather(p, type, &t, &total) : -ENOMEM;
    size_t start_len = out->len;
    if (e == 0) {
        qsort(t.v, t.n, sizeof(*t.v), by_flat_name_cum);
        struct report_writer w = {.out = out};
        print_table(&w, p, type, &t, total);
        e = w.err;
    }
    for (size_t i = 0; t.v && i < t.n; i++)
        free(t.v[i].owned);
    free(t.v);
    free(t.named);
    free(t.unnamed);
    if (e)
        out->len = start_len;
    return e;
}
