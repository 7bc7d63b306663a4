/*
 * pprof_decode.c - reading profile.proto back (see pprof_decode.h).
 *
 * Written from the protobuf wire format
 * (https://protobuf.dev/programming-guides/encoding/) and the field numbers
 * of profile.proto, independently of protobuf.c, so that a round trip checks
 * the writer against a second reading of the spec rather than against
 * itself. Every length is checked against the bytes left before it is used,
 * and arrays grow only as elements are read, so memory stays proportional to
 * the input.
 */
#include "pprof_decode.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "array_grow.h"

/* Wire types (protobuf encoding: "Message Structure"). */
enum {
    WIRE_VARINT = 0,
    WIRE_I64 = 1,
    WIRE_LEN = 2,
    WIRE_SGROUP = 3,
    WIRE_EGROUP = 4,
    WIRE_I32 = 5,
};

/* The largest field number protobuf allows (2^29 - 1). */
#define FIELD_MAX 536870911u

/* The bytes of one message still to read. */
struct reader {
    const uint8_t *p;
    const uint8_t *end;
};

/* One field as read: its number, wire type, and value or payload. */
struct field {
    uint32_t num;
    int wire;
    uint64_t v;         /* WIRE_VARINT, WIRE_I64, WIRE_I32 */
    struct reader body; /* WIRE_LEN: the payload */
};

/*
 * Makes room for element number `n` of `arr`. The capacity is implied by
 * `n` (doubled whenever n reaches a power of two), so the public structs
 * need no capacity fields. Evaluates to 0 or -ENOMEM.
 */
#define RESERVE_ONE(arr, n)                                                                        \
    ({                                                                                             \
        int e_ = 0;                                                                                \
        if (((n) & ((n)-1)) == 0) {                                                                \
            size_t cap_ = (n); /* full: n is 0 or a power of two */                                \
            void *nv_ = array_grow((arr), &cap_, (size_t)(n) + 1, sizeof(*(arr)), 1);              \
            if (nv_)                                                                               \
                (arr) = nv_;                                                                       \
            else                                                                                   \
                e_ = -ENOMEM;                                                                      \
        }                                                                                          \
        e_;                                                                                        \
    })

/* Reads a varint; -EINVAL if it runs past the end or past 64 bits. */
static int read_varint(struct reader *r, uint64_t *out)
{
    uint64_t v = 0;
    for (unsigned shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end)
            return -EINVAL;
        uint8_t b = *r->p++;
        /* The tenth byte holds bit 63 only. */
        if (shift == 63 && b > 1)
            return -EINVAL;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -EINVAL;
}

/* Reads `n` little-endian bytes as a fixed32/fixed64 value. */
static int read_fixed(struct reader *r, size_t n, uint64_t *out)
{
    if ((size_t)(r->end - r->p) < n)
        return -EINVAL;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v |= (uint64_t)r->p[i] << (8 * i);
    r->p += n;
    *out = v;
    return 0;
}

/* Reads the next field's key and value; groups (deprecated, unused by
 * profile.proto) are -EINVAL. */
static int read_field(struct reader *r, struct field *f)
{
    uint64_t key, len;
    int err = read_varint(r, &key);
    if (err)
        return err;
    if ((key >> 3) == 0 || (key >> 3) > FIELD_MAX)
        return -EINVAL;
    f->num = (uint32_t)(key >> 3);
    f->wire = (int)(key & 7);
    switch (f->wire) {
    case WIRE_VARINT:
        return read_varint(r, &f->v);
    case WIRE_I64:
        return read_fixed(r, 8, &f->v);
    case WIRE_I32:
        return read_fixed(r, 4, &f->v);
    case WIRE_LEN:
        if ((err = read_varint(r, &len)))
            return err;
        if (len > (uint64_t)(r->end - r->p))
            return -EINVAL;
        f->body = (struct reader){r->p, r->p + len};
        r->p += len;
        return 0;
    default:
        return -EINVAL;
    }
}

/* The value of a scalar field; -EINVAL if it came with another wire type. */
static int scalar(const struct field *f, uint64_t *out)
{
    if (f->wire != WIRE_VARINT)
        return -EINVAL;
    *out = f->v;
    return 0;
}

/* A signed scalar field (int64: two's complement bits, not zigzag). */
static int scalar_i64(const struct field *f, int64_t *out)
{
    uint64_t v;
    int err = scalar(f, &v);
    if (!err)
        *out = (int64_t)v;
    return err;
}

/* A bool field: any non-zero varint is true. */
static int scalar_bool(const struct field *f, bool *out)
{
    uint64_t v;
    int err = scalar(f, &v);
    if (!err)
        *out = v != 0;
    return err;
}

/*
 * Defines `name`, which appends the values of a repeated varint field of
 * element type `type` to an array: one value if unpacked, a run if packed.
 */
#define DEFINE_REPEATED_VARINT(name, type)                                                         \
    static int name(const struct field *f, type **arr, size_t *n)                                  \
    {                                                                                              \
        if (f->wire == WIRE_VARINT) {                                                              \
            int err = RESERVE_ONE(*arr, *n);                                                       \
            if (!err)                                                                              \
                (*arr)[(*n)++] = (type)f->v;                                                       \
            return err;                                                                            \
        }                                                                                          \
        if (f->wire != WIRE_LEN)                                                                   \
            return -EINVAL;                                                                        \
        struct reader body = f->body;                                                              \
        while (body.p < body.end) {                                                                \
            uint64_t v;                                                                            \
            int err = read_varint(&body, &v);                                                      \
            if (err || (err = RESERVE_ONE(*arr, *n)))                                              \
                return err;                                                                        \
            (*arr)[(*n)++] = (type)v;                                                              \
        }                                                                                          \
        return 0;                                                                                  \
    }

/* Location ids. */
DEFINE_REPEATED_VARINT(repeated_u64, uint64_t)
/* Sample values and comments (int64: two's complement bits). */
DEFINE_REPEATED_VARINT(repeated_i64, int64_t)

/* Decodes a ValueType {type = 1, unit = 2}. */
static int decode_value_type(struct reader r, struct pprof_decoded_value_type *vt)
{
    struct field f;
    int err = 0;
    while (!err && r.p < r.end && !(err = read_field(&r, &f))) {
        if (f.num == 1)
            err = scalar_i64(&f, &vt->type);
        else if (f.num == 2)
            err = scalar_i64(&f, &vt->unit);
    }
    return err;
}

/* Decodes a Label {key = 1, str = 2, num = 3, num_unit = 4}. */
static int decode_label(struct reader r, struct pprof_decoded_label *l)
{
    struct field f;
    int err = 0;
    while (!err && r.p < r.end && !(err = read_field(&r, &f))) {
        if (f.num == 1)
            err = scalar_i64(&f, &l->key);
        else if (f.num == 2)
            err = scalar_i64(&f, &l->str);
        else if (f.num == 3)
            err = scalar_i64(&f, &l->num);
        else if (f.num == 4)
            err = scalar_i64(&f, &l->num_unit);
    }
    return err;
}

/* Decodes a Sample {location_id = 1, value = 2, label = 3}. */
static int decode_sample(struct reader r, struct pprof_decoded_sample *s)
{
    struct field f;
    int err = 0;
    while (!err && r.p < r.end && !(err = read_field(&r, &f))) {
        if (f.num == 1) {
            err = repeated_u64(&f, &s->location_ids, &s->n_locations);
        } else if (f.num == 2) {
            err = repeated_i64(&f, &s->values, &s->n_values);
        } else if (f.num == 3) {
            if (f.wire != WIRE_LEN || (err = RESERVE_ONE(s->labels, s->n_labels)))
                return err ? err : -EINVAL;
            struct pprof_decoded_label *l = &s->labels[s->n_labels++];
            memset(l, 0, sizeof(*l));
            err = decode_label(f.body, l);
        }
    }
    return err;
}

/* Decodes a Mapping (fields 1 to 10). */
static int decode_mapping(struct reader r, struct pprof_decoded_mapping *m)
{
    struct field f;
    int err = 0;
    while (!err && r.p < r.end && !(err = read_field(&r, &f))) {
        switch (f.num) {
        case 1:
            err = scalar(&f, &m->id);
            break;
        case 2:
            err = scalar(&f, &m->start);
            break;
        case 3:
            err = scalar(&f, &m->limit);
            break;
        case 4:
            err = scalar(&f, &m->offset);
            break;
        case 5:
            err = scalar_i64(&f, &m->filename);
            break;
        case 6:
            err = scalar_i64(&f, &m->build_id);
            break;
        case 7:
            err = scalar_bool(&f, &m->has_functions);
            break;
        case 8:
            err = scalar_bool(&f, &m->has_filenames);
            break;
        case 9:
            err = scalar_bool(&f, &m->has_line_numbers);
            break;
        case 10:
            err = scalar_bool(&f, &m->has_inline_frames);
            break;
        default:
            break;
        }
    }
    return err;
}

/* Decodes a Line {function_id = 1, line = 2}. */
static int decode_line(struct reader r, struct pprof_decoded_line *l)
{
    struct field f;
    int err = 0;
    while (!err && r.p < r.end && !(err = read_field(&r, &f))) {
        if (f.num == 1)
            err = scalar(&f, &l->function_id);
        else if (f.num == 2)
            err = scalar_i64(&f, &l->line);
    }
    return err;
}

/* Decodes a Location {id = 1, mapping_id = 2, address = 3, line = 4, is_folded = 5}. */
static int decode_location(struct reader r, struct pprof_decoded_location *l)
{
    struct field f;
    int err = 0;
    while (!err && r.p < r.end && !(err = read_field(&r, &f))) {
        switch (f.num) {
        case 1:
            err = scalar(&f, &l->id);
            break;
        case 2:
            err = scalar(&f, &l->mapping_id);
            break;
        case 3:
            err = scalar(&f, &l->address);
            break;
        case 4:
            if (f.wire != WIRE_LEN || (err = RESERVE_ONE(l->lines, l->n_lines)))
                return err ? err : -EINVAL;
            memset(&l->lines[l->n_lines], 0, sizeof(l->lines[0]));
            err = decode_line(f.body, &l->lines[l->n_lines++]);
            break;
        case 5:
            err = scalar_bool(&f, &l->is_folded);
            break;
        default:
            break;
        }
    }
    return err;
}

/* Decodes a Function {id = 1, name = 2, system_name = 3, filename = 4, start_line = 5}. */
static int decode_function(struct reader r, struct pprof_decoded_function *fn)
{
    struct field f;
    int err = 0;
    while (!err && r.p < r.end && !(err = read_field(&r, &f))) {
        switch (f.num) {
        case 1:
            err = scalar(&f, &fn->id);
            break;
        case 2:
            err = scalar_i64(&f, &fn->name);
            break;
        case 3:
            err = scalar_i64(&f, &fn->system_name);
            break;
        case 4:
            err = scalar_i64(&f, &fn->filename);
            break;
        case 5:
            err = scalar_i64(&f, &fn->start_line);
            break;
        default:
            break;
        }
    }
    return err;
}

/* Appends a string_table entry: a copy of the payload, NUL-terminated. */
static int decode_string(const struct field *f, struct pprof_decoded *d)
{
    if (f->wire != WIRE_LEN)
        return -EINVAL;
    int err = RESERVE_ONE(d->strings, d->n_strings);
    if (err)
        return err;
    size_t len = (size_t)(f->body.end - f->body.p);
    char *s = malloc(len + 1);
    if (!s)
        return -ENOMEM;
    if (len)
        memcpy(s, f->body.p, len);
    s[len] = '\0';
    d->strings[d->n_strings++] = (struct pprof_decoded_string){s, len};
    return 0;
}

/*
 * Starts a new zeroed element of a repeated message field, counted at once
 * so that pprof_decoded_free() frees it even if decoding it fails.
 */
#define NEW_ELEMENT(f, arr, n)                                                                     \
    ({                                                                                             \
        int e_ = (f).wire == WIRE_LEN ? RESERVE_ONE(arr, n) : -EINVAL;                             \
        if (!e_)                                                                                   \
            memset(&(arr)[(n)++], 0, sizeof(*(arr)));                                              \
        e_;                                                                                        \
    })

/* Decodes one field of the Profile message into `d`. */
static int decode_profile_field(const struct field *f, struct pprof_decoded *d)
{
    int err;
    switch (f->num) {
    case 1:
        if ((err = NEW_ELEMENT(*f, d->sample_types, d->n_sample_types)))
            return err;
        return decode_value_type(f->body, &d->sample_types[d->n_sample_types - 1]);
    case 2:
        if ((err = NEW_ELEMENT(*f, d->samples, d->n_samples)))
            return err;
        return decode_sample(f->body, &d->samples[d->n_samples - 1]);
    case 3:
        if ((err = NEW_ELEMENT(*f, d->mappings, d->n_mappings)))
            return err;
        return decode_mapping(f->body, &d->mappings[d->n_mappings - 1]);
    case 4:
        if ((err = NEW_ELEMENT(*f, d->locations, d->n_locations)))
            return err;
        return decode_location(f->body, &d->locations[d->n_locations - 1]);
    case 5:
        if ((err = NEW_ELEMENT(*f, d->functions, d->n_functions)))
            return err;
        return decode_function(f->body, &d->functions[d->n_functions - 1]);
    case 6:
        return decode_string(f, d);
    case 7:
        return scalar_i64(f, &d->drop_frames);
    case 8:
        return scalar_i64(f, &d->keep_frames);
    case 9:
        return scalar_i64(f, &d->time_nanos);
    case 10:
        return scalar_i64(f, &d->duration_nanos);
    case 11:
        if (f->wire != WIRE_LEN)
            return -EINVAL;
        /* A message field seen twice is merged; for scalars that means the last one wins. */
        return decode_value_type(f->body, &d->period_type);
    case 12:
        return scalar_i64(f, &d->period);
    case 13:
        return repeated_i64(f, &d->comments, &d->n_comments);
    case 14:
        return scalar_i64(f, &d->default_sample_type);
    default:
        return 0; /* unknown: skipped, as protobuf readers do */
    }
}

int pprof_decode(const uint8_t *data, size_t len, struct pprof_decoded *out)
{
    struct reader r = {data, data + len};
    struct field f;
    int err = 0;

    memset(out, 0, sizeof(*out));
    if (!data && len)
        return -EINVAL;
    while (!err && r.p < r.end && !(err = read_field(&r, &f)))
        err = decode_profile_field(&f, out);
    if (err)
        pprof_decoded_free(out);
    return err;
}

void pprof_decoded_free(struct pprof_decoded *d)
{
    for (size_t i = 0; i < d->n_samples; i++) {
        free(d->samples[i].location_ids);
        free(d->samples[i].values);
        free(d->samples[i].labels);
    }
    for (size_t i = 0; i < d->n_locations; i++)
        free(d->locations[i].lines);
    for (size_t i = 0; i < d->n_strings; i++)
        free(d->strings[i].s);
    free(d->sample_types);
    free(d->samples);
    free(d->mappings);
    free(d->locations);
    free(d->functions);
    free(d->strings);
    free(d->comments);
    memset(d, 0, sizeof(*d));
}

const char *pprof_decoded_str(const struct pprof_decoded *d, int64_t i)
{
    if (i < 0 || (uint64_t)i >= d->n_strings)
        return NULL;
    return d->strings[i].s;
}
