/*
 * pprof_buf.c - the growable byte buffer every encoder writes into.
 *
 * Capacity doubles so that appending n bytes one at a time costs O(n); sizes
 * are checked for overflow because a profile's length comes from the target.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "array_grow.h"
#include "pprof.h"

/* The first allocation: big enough for a small message without regrowing. */
#define PPROF_BUF_MIN_CAP 256

/* Makes room for `n` more bytes; returns 0 or -ENOMEM. */
static int buf_reserve(struct pprof_buf *b, size_t n)
{
    if (n > SIZE_MAX - b->len)
        return -ENOMEM;
    uint8_t *data = array_grow(b->data, &b->cap, b->len + n, 1, PPROF_BUF_MIN_CAP);
    if (!data)
        return -ENOMEM;
    b->data = data;
    return 0;
}

int pprof_buf_append(struct pprof_buf *b, const void *data, size_t n)
{
    if (n == 0)
        return 0;
    int err = buf_reserve(b, n);
    if (err)
        return err;
    memcpy(b->data + b->len, data, n);
    b->len += n;
    return 0;
}

int pprof_buf_vprintf(struct pprof_buf *b, const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    int err = n < 0 ? -EINVAL : buf_reserve(b, (size_t)n + 1); /* + 1: vsnprintf's NUL */
    if (err == 0) {
        vsnprintf((char *)b->data + b->len, (size_t)n + 1, fmt, again);
        b->len += (size_t)n;
    }
    va_end(again);
    return err;
}

int pprof_buf_printf(struct pprof_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int err = pprof_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return err;
}

void pprof_buf_free(struct pprof_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}
