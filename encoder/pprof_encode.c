/*
 * pprof_encode.c - the profile as profile.proto bytes.
 *
 * Field numbers are those of
 * https://github.com/google/pprof/blob/main/proto/profile.proto. Zero
 * scalars are left out (proto3 defaults), except that every string of the
 * table is written, "" first, since indexes count them. All strings were
 * interned when added, so encoding needs no lookups and cannot miss one.
 */
#include <errno.h>
#include <string.h>

#include "pprof_profile.h"
#include "protobuf.h"

/* Field numbers of message Profile. */
enum {
    PROFILE_SAMPLE_TYPE = 1,
    PROFILE_SAMPLE = 2,
    PROFILE_MAPPING = 3,
    PROFILE_LOCATION = 4,
    PROFILE_FUNCTION = 5,
    PROFILE_STRING_TABLE = 6,
    PROFILE_TIME_NANOS = 9,
    PROFILE_DURATION_NANOS = 10,
    PROFILE_PERIOD_TYPE = 11,
    PROFILE_PERIOD = 12,
    PROFILE_COMMENT = 13,
    PROFILE_DEFAULT_SAMPLE_TYPE = 14,
};

/* Writes a ValueType {type = 1, unit = 2} as field `field`. */
static void encode_value_type(struct pb_writer *w, uint32_t field,
                              const struct pprof_value_type *vt)
{
    size_t at = pb_begin(w, field);
    pb_int(w, 1, vt->type);
    pb_int(w, 2, vt->unit);
    pb_end(w, at);
}

/* Writes sample `s`: location_id = 1 and value = 2 packed, label = 3 {key = 1, str = 2}. */
static void encode_sample(struct pb_writer *w, const struct pprof_profile *p,
                          const struct pprof_sample *s)
{
    size_t at = pb_begin(w, PROFILE_SAMPLE);
    if (s->n_locations) {
        size_t packed = pb_begin(w, 1);
        for (size_t i = 0; i < s->n_locations; i++)
            pb_varint(w, p->sample_locations.v[s->first_location + i]);
        pb_end(w, packed);
    }
    size_t packed = pb_begin(w, 2);
    for (size_t i = 0; i < p->sample_types.n; i++)
        pb_varint(w, (uint64_t)p->sample_values.v[s->first_value + i]);
    pb_end(w, packed);
    for (size_t i = 0; i < s->n_labels; i++) {
        const struct pprof_label_ix *l = &p->sample_labels.v[s->first_label + i];
        size_t label = pb_begin(w, 3);
        pb_int(w, 1, l->key);
        pb_int(w, 2, l->str);
        pb_end(w, label);
    }
    pb_end(w, at);
}

/* Writes mapping number `id`. */
static void encode_mapping(struct pb_writer *w, uint64_t id, const struct pprof_mapping *m)
{
    size_t at = pb_begin(w, PROFILE_MAPPING);
    pb_uint(w, 1, id);
    pb_uint(w, 2, m->start);
    pb_uint(w, 3, m->limit);
    pb_uint(w, 4, m->offset);
    pb_int(w, 5, m->filename);
    pb_int(w, 6, m->build_id);
    pb_uint(w, 7, m->has_functions);
    pb_uint(w, 8, m->has_filenames);
    pb_uint(w, 9, m->has_line_numbers);
    pb_uint(w, 10, m->has_inline_frames);
    pb_end(w, at);
}

/* Writes location number `id` with its lines {function_id = 1, line = 2}, innermost first. */
static void encode_location(struct pb_writer *w, const struct pprof_profile *p, uint64_t id,
                            const struct pprof_location *l)
{
    size_t at = pb_begin(w, PROFILE_LOCATION);
    pb_uint(w, 1, id);
    pb_uint(w, 2, l->mapping_id);
    pb_uint(w, 3, l->address);
    for (size_t i = 0; i < l->n_lines; i++) {
        const struct pprof_line *line = &p->lines.v[l->first_line + i];
        size_t sub = pb_begin(w, 4);
        pb_uint(w, 1, line->function_id);
        pb_int(w, 2, line->line);
        pb_end(w, sub);
    }
    pb_end(w, at);
}

/* Writes function number `id`. */
static void encode_function(struct pb_writer *w, uint64_t id, const struct pprof_function *f)
{
    size_t at = pb_begin(w, PROFILE_FUNCTION);
    pb_uint(w, 1, id);
    pb_int(w, 2, f->name);
    pb_int(w, 3, f->system_name);
    pb_int(w, 4, f->filename);
    pb_int(w, 5, f->start_line);
    pb_end(w, at);
}

int pprof_encode(const struct pprof_profile *p, struct pprof_buf *out)
{
    if (!p || !out)
        return -EINVAL;
    size_t start_len = out->len;
    struct pb_writer w = {.out = out};

    for (size_t i = 0; i < p->sample_types.n; i++)
        encode_value_type(&w, PROFILE_SAMPLE_TYPE, &p->sample_types.v[i]);
    for (size_t i = 0; i < p->samples.n; i++)
        encode_sample(&w, p, &p->samples.v[i]);
    for (size_t i = 0; i < p->mappings.n; i++)
        encode_mapping(&w, i + 1, &p->mappings.v[i]);
    for (size_t i = 0; i < p->locations.n; i++)
        encode_location(&w, p, i + 1, &p->locations.v[i]);
    for (size_t i = 0; i < p->functions.n; i++)
        encode_function(&w, i + 1, &p->functions.v[i]);
    for (size_t i = 0; i < p->strings.n; i++) {
        const char *s = pprof_str(p, (int64_t)i);
        pb_bytes(&w, PROFILE_STRING_TABLE, s, strlen(s));
    }
    pb_int(&w, PROFILE_TIME_NANOS, p->time_nanos);
    pb_int(&w, PROFILE_DURATION_NANOS, p->duration_nanos);
    if (p->period_type.type || p->period_type.unit)
        encode_value_type(&w, PROFILE_PERIOD_TYPE, &p->period_type);
    pb_int(&w, PROFILE_PERIOD, p->period);
    /*
     * Comments unpacked, one key each: proto2 readers (pprof's is one) take
     * either form, and this one is also what older readers expect.
     */
    for (size_t i = 0; i < p->comments.n; i++) {
        pb_tag(&w, PROFILE_COMMENT, PB_WIRE_VARINT);
        pb_varint(&w, (uint64_t)p->comments.v[i]);
    }
    pb_int(&w, PROFILE_DEFAULT_SAMPLE_TYPE, p->default_sample_type);

    if (w.err)
        out->len = start_len; /* leave no half-written profile behind */
    return w.err;
}
