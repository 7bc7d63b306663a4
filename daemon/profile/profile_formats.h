/*
 * profile_formats.h - a built profile written in the form a request asks
 * for: gzipped profile.proto, Go's debug=1 text, the top table
 * (format=text) or collapsed stacks (format=folded) of one sample type.
 */
#ifndef HEAPPROF_PROFILE_FORMATS_H
#define HEAPPROF_PROFILE_FORMATS_H

#include "pprof.h"
#include "query.h"

/* What a profile is written as, and the answer's content type. */
struct profile_form {
    const struct profile_query *q;
    int default_alloc;        /* the route's default sample type: alloc_space, not inuse_space */
    const char *content_type; /* set by profile_form_write */
    /* A base (profile.proto, gzipped or not; borrowed): the profile is
     * written as its difference from it (profile_diff.h). NULL: none. */
    const uint8_t *base;
    size_t base_len;
    char why[200]; /* why writing failed, when profile_form_write says */
};

/* Appends `p` in the form `f` asks for to `out`; 0 or -errno. */
int profile_form_write(const struct pprof_profile *p, struct profile_form *f,
                       struct pprof_buf *out);

/* profile_form_write() with the form as `arg`, for exited_profiles_write(). */
int profile_form_write_cb(const struct pprof_profile *p, void *arg, struct pprof_buf *out);

#endif
