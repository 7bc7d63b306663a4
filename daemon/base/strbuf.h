/*
 * strbuf.h - the daemon's string builder: text appended and printf'd into
 * a heap buffer that grows as needed, for the pages it writes itself (the
 * HTML index, its JSON, /metrics) and for notes gathered line by line.
 *
 * Why not the encoder's struct pprof_buf, which it used before: that is
 * the buffer the encoder writes encoded profiles into, and the daemon's own
 * text is not a profile; base/ is below every layer and cannot include the
 * encoder. Both grow through the one array_grow() (encoder/array_grow/).
 *
 * Ownership: a struct strbuf owns `data`; free it with strbuf_free(), or
 * take it (set the struct to zero after) to hand it on.
 */
#ifndef HEAPPROF_STRBUF_H
#define HEAPPROF_STRBUF_H

#include <stdarg.h>
#include <stddef.h>

/* Text being built; `data` is NUL-terminated once anything was added. */
struct strbuf {
    char *data;
    size_t len; /* bytes of text, the NUL not counted */
    size_t cap; /* bytes allocated */
};

/* Appends `n` bytes of `s`; 0 or -ENOMEM (then `b` is as it was). */
int strbuf_append(struct strbuf *b, const char *s, size_t n);

/* Appends printf-formatted text; 0, -ENOMEM or -EINVAL (a format
 * vsnprintf refuses). */
__attribute__((format(printf, 2, 3))) int strbuf_printf(struct strbuf *b, const char *fmt, ...);
__attribute__((format(printf, 2, 0))) int strbuf_vprintf(struct strbuf *b, const char *fmt,
                                                         va_list ap);

/* Releases the text's memory and empties `b`. */
void strbuf_free(struct strbuf *b);

#endif
