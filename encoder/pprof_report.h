/*
 * pprof_report.h - helpers the text forms of a profile share, internal to
 * encoder/: a printf-style writer that keeps its first error, a sample's
 * frames with inlined calls expanded, and the name a frame is shown by.
 * pprof_text.c (Go's debug=1), pprof_top.c (the top table) and
 * pprof_folded.c (collapsed stacks) are written with them.
 */
#ifndef HEAPPROF_PPROF_REPORT_H
#define HEAPPROF_PPROF_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "pprof_profile.h"

/* A text writer appending to a buffer, keeping its first error. */
struct report_writer {
    struct pprof_buf *out;
    int err;
};

/* Appends printf-formatted text; after an error it does nothing. */
__attribute__((format(printf, 2, 3))) void report_put(struct report_writer *w, const char *fmt,
                                                      ...);

/* One frame of a sample: a location and one of its lines. */
struct report_frame {
    const struct pprof_location *loc;
    const struct pprof_function *fn; /* NULL: no line, or a function without a name */
    int64_t line;
    int inlined; /* inlined into the next frame: not its location's last line */
};

/* A reusable array of frames. */
struct report_frames {
    struct report_frame *v;
    size_t n, cap;
};

/* The frames of sample `s` into `f`, leaf and innermost inlined call first; 0 or -ENOMEM. */
int report_sample_frames(const struct pprof_profile *p, const struct pprof_sample *s,
                         struct report_frames *f);
/*
 * Steps `*i` to the next sample with a non-zero value of type `type`, puts
 * that value in `*v` and its frames in `f`. 1 if there is one, 0 past the
 * last sample, -ENOMEM. Start with *i = 0; the reports leave zero values
 * out, as pprof leaves them out of its graph.
 */
int report_next_sample(const struct pprof_profile *p, size_t type, size_t *i, int64_t *v,
                       struct report_frames *f);
/* Frees the frames' memory. */
void report_frames_free(struct report_frames *f);

/* Room for the name of a frame without a function: "[" file name "]". */
#define REPORT_NAME_MAX 272

/*
 * The name a frame is shown by, as `go tool pprof` shows functions: its
 * function's name, else "[file]" (the base name of its mapping's file), else
 * "<unknown>". Points into the profile or into `buf` (REPORT_NAME_MAX bytes).
 */
const char *report_frame_name(const struct pprof_profile *p, const struct report_frame *f,
                              char *buf);

/* Sample `i`'s value of type `type` (which must exist). */
static inline int64_t report_value(const struct pprof_profile *p, size_t i, size_t type)
{
    return p->sample_values.v[p->samples.v[i].first_value + type];
}

#endif
