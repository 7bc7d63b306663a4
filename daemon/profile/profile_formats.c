/*
 * profile_formats.c - writes a built profile in the form a request asks for
 * (see profile_formats.h).
 */
#include "profile_formats.h"

#include <errno.h>

#define TEXT_TYPE "text/plain; charset=utf-8"

int profile_form_write(const struct pprof_profile *p, struct profile_form *f,
                       struct pprof_buf *out)
{
    const struct profile_query *q = f->q;
    if (q->format == FORMAT_TEXT || q->format == FORMAT_FOLDED) {
        const char *type = q->sample_type ? q->sample_type
                           : f->default_alloc ? "alloc_space"
                                              : "inuse_space";
        int i = pprof_sample_type_index(p, type);
        f->content_type = TEXT_TYPE;
        if (i < 0)
            return i;
        return q->format == FORMAT_TEXT ? pprof_write_top(p, (size_t)i, out)
                                        : pprof_write_folded(p, (size_t)i, out);
    }
    if (q->debug) {
        f->content_type = TEXT_TYPE;
        return pprof_write_heap_text(p, out);
    }
    struct pprof_buf raw = {0};
    f->content_type = "application/octet-stream";
    int e = pprof_encode(p, &raw);
    if (e == 0)
        e = pprof_gzip(raw.data, raw.len, out);
    pprof_buf_free(&raw);
    return e;
}

int profile_form_write_cb(const struct pprof_profile *p, void *arg, struct pprof_buf *out)
{
    return profile_form_write(p, arg, out);
}
