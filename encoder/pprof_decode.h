/*
 * pprof_decode.h - a minimal reader of profile.proto, for tests and fuzzing.
 *
 * It reads back the fields pprof_encode.c writes, so a test can check that
 * what was put into a profile is what comes out, without a protobuf library
 * and without trusting the writer: it is written from the wire format and
 * profile.proto, not from the encoder. Indexes and ids are returned as they
 * are on the wire; nothing is resolved or checked against the string table
 * (pprof_decoded_str() does that lookup). Unknown fields are skipped, as
 * protobuf readers do; repeated scalars are taken packed or unpacked.
 * Any input is safe: a malformed message is -EINVAL, never a crash.
 *
 * Ownership: a `struct pprof_decoded` owns every array and string in it;
 * free with pprof_decoded_free().
 */
#ifndef HEAPPROF_PPROF_DECODE_H
#define HEAPPROF_PPROF_DECODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A ValueType as decoded: string indexes. */
struct pprof_decoded_value_type {
    int64_t type, unit;
};

/* A Label as decoded; `num` and `num_unit` are read though we never write them. */
struct pprof_decoded_label {
    int64_t key, str, num, num_unit;
};

/* A Sample as decoded. */
struct pprof_decoded_sample {
    uint64_t *location_ids;
    size_t n_locations;
    int64_t *values;
    size_t n_values;
    struct pprof_decoded_label *labels;
    size_t n_labels;
};

/* A Mapping as decoded. */
struct pprof_decoded_mapping {
    uint64_t id, start, limit, offset;
    int64_t filename, build_id;
    bool has_functions, has_filenames, has_line_numbers, has_inline_frames;
};

/* A Line of a Location as decoded. */
struct pprof_decoded_line {
    uint64_t function_id;
    int64_t line;
};

/* A Location as decoded. */
struct pprof_decoded_location {
    uint64_t id, mapping_id, address;
    struct pprof_decoded_line *lines;
    size_t n_lines;
    bool is_folded;
};

/* A Function as decoded. */
struct pprof_decoded_function {
    uint64_t id;
    int64_t name, system_name, filename, start_line;
};

/* A string of the string table: `len` bytes, NUL-terminated for convenience. */
struct pprof_decoded_string {
    char *s;
    size_t len;
};

/* A whole Profile message as decoded, repeated fields in wire order. */
struct pprof_decoded {
    struct pprof_decoded_value_type *sample_types;
    size_t n_sample_types;
    struct pprof_decoded_sample *samples;
    size_t n_samples;
    struct pprof_decoded_mapping *mappings;
    size_t n_mappings;
    struct pprof_decoded_location *locations;
    size_t n_locations;
    struct pprof_decoded_function *functions;
    size_t n_functions;
    struct pprof_decoded_string *strings;
    size_t n_strings;
    int64_t drop_frames, keep_frames; /* string indexes; we never write them */
    int64_t time_nanos, duration_nanos;
    struct pprof_decoded_value_type period_type;
    int64_t period;
    int64_t *comments; /* string indexes */
    size_t n_comments;
    int64_t default_sample_type; /* string index */
};

/*
 * Decodes `len` bytes of an uncompressed profile.proto into `out` (which
 * the caller need not clear). Returns 0, -EINVAL for malformed input (on
 * which `out` is left empty), or -ENOMEM.
 */
int pprof_decode(const uint8_t *data, size_t len, struct pprof_decoded *out);

/* Frees what pprof_decode() allocated and empties `d`; an empty one is fine. */
void pprof_decoded_free(struct pprof_decoded *d);

/* String `i` of the table, or NULL if `i` is out of range. */
const char *pprof_decoded_str(const struct pprof_decoded *d, int64_t i);

#endif
