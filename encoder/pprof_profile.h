/*
 * pprof_profile.h - the layout of `struct pprof_profile`, internal to
 * encoder/.
 *
 * pprof_profile.c builds it; pprof_encode.c and pprof_text.c read it. Every
 * string is held once, in the string table, and referred to by its index,
 * as profile.proto does: encoding is then a walk over these arrays. Ids are
 * array positions plus one, since profile.proto reserves id 0.
 */
#ifndef HEAPPROF_PPROF_PROFILE_H
#define HEAPPROF_PPROF_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "pprof.h"

/* An open-addressing hash index from a key to an array position. */
struct pprof_index {
    struct pprof_slot *slots; /* `cap` slots, a power of two, or NULL */
    size_t cap;
    size_t used;
};

/* A ValueType: a type and a unit, as string indexes. */
struct pprof_value_type {
    int64_t type;
    int64_t unit;
};

/* A mapping, strings as indexes. */
struct pprof_mapping {
    uint64_t start, limit, offset;
    int64_t filename, build_id;
    uint8_t has_functions, has_filenames, has_line_numbers, has_inline_frames;
};

/* A function, strings as indexes. */
struct pprof_function {
    int64_t name, system_name, filename;
    int64_t start_line;
};

/* A location; its lines are `n_lines` entries of the profile's `lines` from `first_line`. */
struct pprof_location {
    uint64_t mapping_id;
    uint64_t address;
    size_t first_line;
    size_t n_lines;
};

/* A string label as a key and a value string index. */
struct pprof_label_ix {
    int64_t key, str;
};

/*
 * A sample; its location ids, values and labels are slices of the
 * profile's flat arrays, so adding a sample costs no allocation of its own.
 * It has one value per sample type, from `first_value`.
 */
struct pprof_sample {
    size_t first_location, n_locations;
    size_t first_value;
    size_t first_label, n_labels;
};

/* A growable array: `n` elements used of `cap` allocated. */
#define PPROF_ARRAY(type)                                                                          \
    struct {                                                                                       \
        type *v;                                                                                   \
        size_t n, cap;                                                                             \
    }

/* The whole profile. */
struct pprof_profile {
    PPROF_ARRAY(char *) strings; /* strings.v[0] is "" */
    struct pprof_index string_index;

    PPROF_ARRAY(struct pprof_value_type) sample_types;
    struct pprof_value_type period_type;
    int64_t period;
    int64_t default_sample_type; /* string index, 0 when unset */
    int64_t time_nanos, duration_nanos;
    PPROF_ARRAY(int64_t) comments;

    PPROF_ARRAY(struct pprof_mapping) mappings;
    PPROF_ARRAY(struct pprof_function) functions;
    struct pprof_index function_index;
    PPROF_ARRAY(struct pprof_location) locations;
    struct pprof_index location_index;
    PPROF_ARRAY(struct pprof_line) lines;

    PPROF_ARRAY(struct pprof_sample) samples;
    PPROF_ARRAY(uint64_t) sample_locations;
    PPROF_ARRAY(int64_t) sample_values;
    PPROF_ARRAY(struct pprof_label_ix) sample_labels;
};

/* The string at index `i` of the profile's table (which must hold it). */
static inline const char *pprof_str(const struct pprof_profile *p, int64_t i)
{
    return p->strings.v[i];
}

#endif
