/*
 * protobuf.h - the few protobuf wire-format writers profile.proto needs.
 *
 * Internal to encoder/. Hand-written so the encoder has no protobuf
 * dependency. Errors are sticky: a writer that failed once ignores further
 * writes and keeps the first negative errno in `err`, so an encoder can
 * write a whole message and check once at the end.
 */
#ifndef HEAPPROF_PROTOBUF_H
#define HEAPPROF_PROTOBUF_H

#include <stddef.h>
#include <stdint.h>

#include "pprof.h"

/* The longest varint: 64 bits at 7 bits a byte. */
#define PB_VARINT_MAX 10

/* Wire types used by profile.proto. */
enum pb_wire {
    PB_WIRE_VARINT = 0,
    PB_WIRE_LEN = 2,
};

/* A writer appending to a caller's buffer, with its first error. */
struct pb_writer {
    struct pprof_buf *out;
    int err;
};

/* Encodes `v` as a varint into `dst`; returns the number of bytes (1 to 10). */
size_t pb_varint_encode(uint8_t dst[PB_VARINT_MAX], uint64_t v);

/* Writes a bare varint. */
void pb_varint(struct pb_writer *w, uint64_t v);
/* Writes a field's key: its number and wire type. */
void pb_tag(struct pb_writer *w, uint32_t field, enum pb_wire wire);
/* Writes an unsigned varint field, left out when 0 as proto3 does. */
void pb_uint(struct pb_writer *w, uint32_t field, uint64_t v);
/* Writes an int64 field (negative values take 10 bytes), left out when 0. */
void pb_int(struct pb_writer *w, uint32_t field, int64_t v);
/* Writes a length-delimited field, even when empty (string_table[0] is ""). */
void pb_bytes(struct pb_writer *w, uint32_t field, const void *data, size_t len);

/*
 * Starts a length-delimited field (a nested message or packed values) whose
 * length is not known yet; returns where its content starts, for pb_end().
 */
size_t pb_begin(struct pb_writer *w, uint32_t field);
/* Ends the field pb_begin() started at `start`, putting its length in front. */
void pb_end(struct pb_writer *w, size_t start);

#endif
