/*
 * pprof_buf.c - the growable byte buffer every encoder writes into.
 *
 * Capacity doubles so that appending n bytes one at a time costs O(n); sizes
 * are checked for overflow because a profile's length comes from the target.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pprof.h"

/* The first allocation: big enough for a small message without regrowing. */
#define PPROF_BUF_MIN_CAP 256

/* Makes room for `n` more bytes; returns 0 or -ENOMEM. */
static int buf_reserve(struct pprof_buf *b, size_t n)
{
    if (n <= b->cap - b->len)
        return 0;
    if (n > SIZE_MAX - b->len)
        return -ENOMEM;
    size_t need = b->len + n;
    size_t cap = b->cap ? b->cap : PPROF_BUF_MIN_CAP;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) {
            cap = need;
            break;
        }
        cap *= 2;
    }
    uint8_t *data = realloc(b->data, cap);
    if (!data)
        return -ENOMEM;
    b->data = data;
    b->cap = cap;
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

void pprof_buf_free(struct pprof_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}
