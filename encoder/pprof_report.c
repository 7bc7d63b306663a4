/*
 * pprof_report.c - the helpers of the text forms (see pprof_report.h).
 */
#include "pprof_report.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void report_put(struct report_writer *w, const char *fmt, ...)
{
    if (w->err)
        return;
    va_list ap;
    va_start(ap, fmt);
    w->err = pprof_buf_vprintf(w->out, fmt, ap);
    va_end(ap);
}

int report_sample_frames(const struct pprof_profile *p, const struct pprof_sample *s,
                         struct report_frames *f)
{
    f->n = 0;
    for (size_t i = 0; i < s->n_locations; i++) {
        const struct pprof_location *l =
            &p->locations.v[p->sample_locations.v[s->first_location + i] - 1];
        size_t need = f->n + (l->n_lines ? l->n_lines : 1);
        if (need > f->cap) {
            size_t c = need * 2;
            struct report_frame *v = realloc(f->v, c * sizeof(*v));
            if (!v)
                return -ENOMEM;
            f->v = v;
            f->cap = c;
        }
        if (!l->n_lines)
            f->v[f->n++] = (struct report_frame){l, NULL, 0, 0};
        for (size_t j = 0; j < l->n_lines; j++) {
            const struct pprof_line *line = &p->lines.v[l->first_line + j];
            const struct pprof_function *fn = &p->functions.v[line->function_id - 1];
            if (!*pprof_str(p, fn->name))
                fn = NULL;
            f->v[f->n++] = (struct report_frame){l, fn, line->line, j + 1 < l->n_lines};
        }
    }
    return 0;
}

int report_next_sample(const struct pprof_profile *p, size_t type, size_t *i, int64_t *v,
                       struct report_frames *f)
{
    for (; *i < p->samples.n; (*i)++) {
        *v = report_value(p, *i, type);
        if (*v == 0)
            continue;
        int e = report_sample_frames(p, &p->samples.v[(*i)++], f);
        return e ? e : 1;
    }
    return 0;
}

void report_frames_free(struct report_frames *f)
{
    free(f->v);
    *f = (struct report_frames){0};
}

const char *report_frame_name(const struct pprof_profile *p, const struct report_frame *f,
                              char *buf)
{
    if (f->fn)
        return pprof_str(p, f->fn->name);
    const char *file = f->loc->mapping_id
                           ? pprof_str(p, p->mappings.v[f->loc->mapping_id - 1].filename)
                           : "";
    if (!*file)
        return "<unknown>";
    const char *base = strrchr(file, '/');
    snprintf(buf, REPORT_NAME_MAX, "[%s]", base && base[1] ? base + 1 : file);
    return buf;
}
