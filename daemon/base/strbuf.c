/*
 * strbuf.c - the daemon's string builder (see strbuf.h). Room for the NUL
 * is kept after the text at every step, so that `data` is always a string.
 */
#include "strbuf.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array_grow.h"

/* The first allocation: a line of text, or a small page, without regrowing. */
#define STRBUF_MIN_CAP 256

/* Makes room for `n` more bytes and the NUL; 0 or -ENOMEM. */
static int reserve(struct strbuf *b, size_t n)
{
    if (n > SIZE_MAX - 1 - b->len)
        return -ENOMEM;
    char *data = array_grow(b->data, &b->cap, b->len + n + 1, 1, STRBUF_MIN_CAP);
    if (!data)
        return -ENOMEM;
    b->data = data;
    return 0;
}

int strbuf_append(struct strbuf *b, const char *s, size_t n)
{
    int e = reserve(b, n);
    if (e)
        return e;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int strbuf_vprintf(struct strbuf *b, const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    int e = n < 0 ? -EINVAL : reserve(b, (size_t)n);
    if (e == 0) {
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, again);
        b->len += (size_t)n;
    }
    va_end(again);
    return e;
}

int strbuf_printf(struct strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int e = strbuf_vprintf(b, fmt, ap);
    va_end(ap);
    return e;
}

void strbuf_free(struct strbuf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}
