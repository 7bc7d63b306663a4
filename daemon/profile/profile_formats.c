/*
 * profile_formats.c - writes a built profile in the form a request asks for
 * (see profile_formats.h).
 */
#include "profile_formats.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "profile_diff.h"

#define TEXT_TYPE "text/plain; charset=utf-8"

/* Writes `p` as `f` asks, whatever its base. */
static int write_form(const struct pprof_profile *p, struct profile_form *f,
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

int profile_form_write(const struct pprof_profile *p, struct profile_form *f,
                       struct pprof_buf *out)
{
    f->why[0] = '\0';
    if (!f->base) {
        int e = write_form(p, f, out);
        if (e)
            snprintf(f->why, sizeof(f->why), "encode the profile: %s", strerror(-e));
        return e;
    }
    /* The protobuf marks the base's samples for pprof's percentages; the
     * text forms sum equal stacks of both into their difference. */
    struct pprof_profile *d = NULL;
    int e = profile_diff(p, f->base, f->base_len, f->q->format == FORMAT_PROTO, &d, f->why,
                         sizeof(f->why));
    if (e == 0) {
        e = write_form(d, f, out);
        if (e)
            snprintf(f->why, sizeof(f->why), "encode the difference: %s", strerror(-e));
    }
    pprof_free(d);
    return e;
}

int profile_form_write_cb(const struct pprof_profile *p, void *arg, struct pprof_buf *out)
{
    return profile_form_write(p, arg, out);
}
