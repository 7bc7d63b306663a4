/*
 * protobuf.c - varints, keys and length-delimited fields of the protobuf
 * wire format (https://protobuf.dev/programming-guides/encoding/).
 *
 * Nested messages are written in place and their length inserted in front
 * afterwards: one memmove per message instead of a scratch buffer per level
 * of nesting, and no second pass to compute sizes.
 */
#include <string.h>

#include "protobuf.h"

size_t pb_varint_encode(uint8_t dst[PB_VARINT_MAX], uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        dst[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    dst[n++] = (uint8_t)v;
    return n;
}

/* Appends raw bytes unless the writer already failed. */
static void pb_raw(struct pb_writer *w, const void *data, size_t len)
{
    if (w->err)
        return;
    w->err = pprof_buf_append(w->out, data, len);
}

void pb_varint(struct pb_writer *w, uint64_t v)
{
    uint8_t tmp[PB_VARINT_MAX];
    pb_raw(w, tmp, pb_varint_encode(tmp, v));
}

void pb_tag(struct pb_writer *w, uint32_t field, enum pb_wire wire)
{
    pb_varint(w, (uint64_t)field << 3 | (uint64_t)wire);
}

void pb_uint(struct pb_writer *w, uint32_t field, uint64_t v)
{
    if (v == 0)
        return;
    pb_tag(w, field, PB_WIRE_VARINT);
    pb_varint(w, v);
}

void pb_int(struct pb_writer *w, uint32_t field, int64_t v)
{
    /* int64 is a plain varint of the two's complement bits (not zigzag). */
    pb_uint(w, field, (uint64_t)v);
}

void pb_bytes(struct pb_writer *w, uint32_t field, const void *data, size_t len)
{
    pb_tag(w, field, PB_WIRE_LEN);
    pb_varint(w, len);
    pb_raw(w, data, len);
}

size_t pb_begin(struct pb_writer *w, uint32_t field)
{
    pb_tag(w, field, PB_WIRE_LEN);
    return w->out->len;
}

void pb_end(struct pb_writer *w, size_t start)
{
    if (w->err)
        return;
    size_t len = w->out->len - start;
    uint8_t tmp[PB_VARINT_MAX];
    size_t n = pb_varint_encode(tmp, len);
    /* Grow by the prefix's size, then shift the content up behind it. */
    pb_raw(w, tmp, n);
    if (w->err)
        return;
    uint8_t *at = w->out->data + start;
    memmove(at + n, at, len);
    memcpy(at, tmp, n);
}
