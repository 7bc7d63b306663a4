/*
 * profile_diff.c - a profile minus a base (see profile_diff.h).
 *
 * Both sides go through the same path: each is decoded from profile.proto
 * (the current one encoded first) and its mappings, functions, locations
 * and samples added to a new profile through the encoder's public model,
 * the base's values negated. Decoding the current profile costs one
 * encode and decode more than walking it, but it lets the one reader of
 * untrusted bytes (pprof_decode.c, fuzzed) serve both, and the encoder's
 * model stays closed to the daemon. go tool pprof's -diff_base does the
 * same: it scales the base by -1, labels it, and merges.
 */
#include "profile_diff.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "pprof_decode.h"

/* An old id and what it became in the new profile. */
struct id_pair {
    uint64_t old, new;
};

/* Orders id pairs by old id. */
static int by_old(const void *a, const void *b)
{
    uint64_t x = ((const struct id_pair *)a)->old, y = ((const struct id_pair *)b)->old;
    return x < y ? -1 : x > y;
}

/* The new id of `old` in the sorted `v`, or 0 if it has none. */
static uint64_t new_id(const struct id_pair *v, size_t n, uint64_t old)
{
    struct id_pair key = {.old = old};
    const struct id_pair *hit = n ? bsearch(&key, v, n, sizeof(*v), by_old) : NULL;
    return hit ? hit->new : 0;
}

/* A string of `d`, "" if the index is out of range (an untrusted base). */
static const char *str(const struct pprof_decoded *d, int64_t i)
{
    const char *s = pprof_decoded_str(d, i);
    return s ? s : "";
}

/* The id maps of one decoded profile being added. */
struct id_maps {
    struct id_pair *mappings, *functions, *locations;
};

static void id_maps_free(struct id_maps *m)
{
    free(m->mappings);
    free(m->functions);
    free(m->locations);
}

/* Adds the mappings and functions of `d` to `p`, filling `m`. */
static int add_mappings_functions(struct pprof_profile *p, const struct pprof_decoded *d,
                                  struct id_maps *m)
{
    m->mappings = calloc(d->n_mappings + 1, sizeof(*m->mappings));
    m->functions = calloc(d->n_functions + 1, sizeof(*m->functions));
    if (!m->mappings || !m->functions)
        return -ENOMEM;
    for (size_t i = 0; i < d->n_mappings; i++) {
        const struct pprof_decoded_mapping *x = &d->mappings[i];
        struct pprof_mapping_desc desc = {.start = x->start,
                                          .limit = x->limit,
                                          .offset = x->offset,
                                          .filename = str(d, x->filename),
                                          .build_id = str(d, x->build_id),
                                          .has_functions = x->has_functions,
                                          .has_filenames = x->has_filenames,
                                          .has_line_numbers = x->has_line_numbers,
                                          .has_inline_frames = x->has_inline_frames};
        int64_t id = pprof_add_mapping(p, &desc);
        if (id < 0)
            return (int)id;
        m->mappings[i] = (struct id_pair){x->id, (uint64_t)id};
    }
    qsort(m->mappings, d->n_mappings, sizeof(*m->mappings), by_old);
    for (size_t i = 0; i < d->n_functions; i++) {
        const struct pprof_decoded_function *f = &d->functions[i];
        int64_t id = pprof_function_id(p, str(d, f->name), str(d, f->system_name),
                                       str(d, f->filename), f->start_line);
        if (id < 0)
            return (int)id;
        m->functions[i] = (struct id_pair){f->id, (uint64_t)id};
    }
    qsort(m->functions, d->n_functions, sizeof(*m->functions), by_old);
    return 0;
}

/* Adds the locations of `d` to `p`, filling m->locations; lines naming a
 * function the profile lacks are left out. */
static int add_locations(struct pprof_profile *p, const struct pprof_decoded *d, struct id_maps *m)
{
    size_t most = 0;
    for (size_t i = 0; i < d->n_locations; i++)
        most = d->locations[i].n_lines > most ? d->locations[i].n_lines : most;
    m->locations = calloc(d->n_locations + 1, sizeof(*m->locations));
    struct pprof_line *lines = calloc(most + 1, sizeof(*lines));
    int e = m->locations && lines ? 0 : -ENOMEM;
    for (size_t i = 0; i < d->n_locations && e == 0; i++) {
        const struct pprof_decoded_location *l = &d->locations[i];
        size_t n = 0;
        for (size_t j = 0; j < l->n_lines; j++) {
            uint64_t f = new_id(m->functions, d->n_functions, l->lines[j].function_id);
            if (f)
                lines[n++] = (struct pprof_line){f, l->lines[j].line};
        }
        int64_t id = pprof_location_id(p, new_id(m->mappings, d->n_mappings, l->mapping_id),
                                       l->address, lines, n);
        if (id < 0)
            e = (int)id;
        else
            m->locations[i] = (struct id_pair){l->id, (uint64_t)id};
    }
    if (e == 0)
        qsort(m->locations, d->n_locations, sizeof(*m->locations), by_old);
    free(lines);
    return e;
}

/* Adds the samples of `d` to `p`: value k of the new profile is value
 * col[k] of the sample (-1: 0), negated if `negate`, labelled with `label`
 * (or none). A sample's own labels are kept. */
static int add_samples(struct pprof_profile *p, const struct pprof_decoded *d,
                       const struct id_maps *m, const int *col, size_t ntypes, bool negate,
                       const struct pprof_label *label)
{
    size_t most_locs = 0, most_labels = 0;
    for (size_t i = 0; i < d->n_samples; i++) {
        if (d->samples[i].n_locations > most_locs)
            most_locs = d->samples[i].n_locations;
        if (d->samples[i].n_labels > most_labels)
            most_labels = d->samples[i].n_labels;
    }
    uint64_t *locs = calloc(most_locs + 1, sizeof(*locs));
    int64_t *values = calloc(ntypes + 1, sizeof(*values));
    struct pprof_label *labels = calloc(most_labels + 2, sizeof(*labels));
    int e = locs && values && labels ? 0 : -ENOMEM;
    for (size_t i = 0; i < d->n_samples && e == 0; i++) {
        const struct pprof_decoded_sample *s = &d->samples[i];
        size_t nl = 0, nlab = 0;
        bool any = false;
        for (size_t j = 0; j < s->n_locations; j++) {
            uint64_t id = new_id(m->locations, d->n_locations, s->location_ids[j]);
            if (id)
                locs[nl++] = id;
        }
        for (size_t k = 0; k < ntypes; k++) {
            int64_t v = col[k] >= 0 && (size_t)col[k] < s->n_values ? s->values[col[k]] : 0;
            v = v == INT64_MIN ? INT64_MAX : v; /* negatable, whatever the upload says */
            values[k] = negate ? -v : v;
            any = any || v;
        }
        for (size_t j = 0; j < s->n_labels; j++) {
            const char *key = str(d, s->labels[j].key), *val = str(d, s->labels[j].str);
            if (*key && *val && !(label && strcmp(key, label->key) == 0))
                labels[nlab++] = (struct pprof_label){key, val};
        }
        if (label)
            labels[nlab++] = *label;
        if (any)
            e = pprof_add_sample(p, locs, nl, values, ntypes, labels, nlab);
    }
    free(locs);
    free(values);
    free(labels);
    return e;
}

/* Adds all of `d` to `p` (see add_samples). */
static int add_decoded(struct pprof_profile *p, const struct pprof_decoded *d, const int *col,
                       size_t ntypes, bool negate, const struct pprof_label *label)
{
    struct id_maps m = {0};
    int e = add_mappings_functions(p, d, &m);
    if (e == 0)
        e = add_locations(p, d, &m);
    if (e == 0)
        e = add_samples(p, d, &m, col, ntypes, negate, label);
    id_maps_free(&m);
    return e;
}

/* Sets the new profile's sample types, period and comments from `cur`,
 * and col_cur/col_base: where each type's value is in either. How many
 * types the base has of them in *matched. */
static int set_shape(struct pprof_profile *p, const struct pprof_decoded *cur,
                     const struct pprof_decoded *base, int *col_cur, int *col_base, size_t *matched)
{
    int e = 0;
    *matched = 0;
    for (size_t k = 0; k < cur->n_sample_types && e == 0; k++) {
        const char *type = str(cur, cur->sample_types[k].type);
        const char *unit = str(cur, cur->sample_types[k].unit);
        col_cur[k] = (int)k;
        col_base[k] = -1;
        for (size_t j = 0; j < base->n_sample_types && col_base[k] < 0; j++)
            if (strcmp(type, str(base, base->sample_types[j].type)) == 0 &&
                strcmp(unit, str(base, base->sample_types[j].unit)) == 0)
                col_base[k] = (int)j;
        *matched += col_base[k] >= 0;
        e = pprof_add_sample_type(p, type, unit);
    }
    if (e == 0)
        e = pprof_set_period(p, str(cur, cur->period_type.type), str(cur, cur->period_type.unit),
                             cur->period);
    if (e == 0 && cur->default_sample_type)
        e = pprof_set_default_sample_type(p, str(cur, cur->default_sample_type));
    for (size_t i = 0; i < cur->n_comments && e == 0; i++)
        e = pprof_add_comment(p, str(cur, cur->comments[i]));
    if (e == 0)
        e = pprof_add_comment(p, "heapprofd: the difference from a base profile: the base's "
                                 "samples are negated and labelled " PROFILE_DIFF_BASE_LABEL
                                 "=true, as go tool pprof -diff_base makes them");
    pprof_set_time(p, cur->time_nanos, cur->duration_nanos);
    return e;
}

int profile_diff_gunzip(const uint8_t *in, size_t len, struct pprof_buf *out)
{
    if (len < 2 || in[0] != 0x1f || in[1] != 0x8b)
        return len > PROFILE_DIFF_MAX_BASE_BYTES ? -EFBIG : pprof_buf_append(out, in, len);
    z_stream zs = {0};
    if (inflateInit2(&zs, 15 + 32) != Z_OK) /* 32: gzip header detected */
        return -ENOMEM;
    uint8_t chunk[16384];
    int e = 0, z = Z_OK;
    zs.next_in = (uint8_t *)in;
    zs.avail_in = (uInt)len;
    while (e == 0 && z != Z_STREAM_END) {
        zs.next_out = chunk;
        zs.avail_out = sizeof(chunk);
        z = inflate(&zs, Z_NO_FLUSH);
        if (z != Z_OK && z != Z_STREAM_END)
            e = z == Z_MEM_ERROR ? -ENOMEM : -EBADMSG; /* Z_BUF_ERROR: cut short */
        else if (out->len + (sizeof(chunk) - zs.avail_out) > PROFILE_DIFF_MAX_BASE_BYTES)
            e = -EFBIG;
        else
            e = pprof_buf_append(out, chunk, sizeof(chunk) - zs.avail_out);
    }
    inflateEnd(&zs);
    return e;
}

/* Decodes `len` bytes (gzipped or not) into `d`, saying why not in `err`. */
static int decode_base(const uint8_t *base, size_t len, struct pprof_decoded *d, char *err,
                       size_t errlen)
{
    struct pprof_buf raw = {0};
    int e = len > PROFILE_DIFF_MAX_BASE_BYTES ? -EFBIG : profile_diff_gunzip(base, len, &raw);
    if (e == 0)
        e = pprof_decode(raw.data ? raw.data : (const uint8_t *)"", raw.len, d);
    pprof_buf_free(&raw);
    if (e == -EINVAL || e == -EBADMSG)
        snprintf(err, errlen, "the base is not a profile.proto (gzipped or not)");
    else if (e == -EFBIG)
        snprintf(err, errlen, "the base is over %u MiB", PROFILE_DIFF_MAX_BASE_BYTES >> 20);
    else if (e)
        snprintf(err, errlen, "read the base: %s", strerror(-e));
    return e == -EINVAL ? -EBADMSG : e;
}

int profile_diff_check_base(const uint8_t *base, size_t len, char *err, size_t errlen)
{
    struct pprof_decoded d = {0};
    int e = decode_base(base, len, &d, err, errlen);
    if (e == 0 && d.n_sample_types == 0) {
        snprintf(err, errlen, "the base has no sample types: not a profile.proto of samples");
        e = -EBADMSG;
    }
    pprof_decoded_free(&d);
    return e;
}

int profile_diff(const struct pprof_profile *cur, const uint8_t *base, size_t len, bool label_base,
                 struct pprof_profile **out, char *err, size_t errlen)
{
    struct pprof_decoded dc = {0}, db = {0};
    struct pprof_buf raw = {0};
    struct pprof_profile *p = pprof_new();
    int *col_cur = NULL, *col_base = NULL;
    size_t matched = 0;
    int e = decode_base(base, len, &db, err, errlen);
    if (e)
        goto out;
    e = p ? pprof_encode(cur, &raw) : -ENOMEM;
    if (e == 0)
        e = pprof_decode(raw.data, raw.len, &dc);
    if (e == 0) {
        col_cur = calloc(dc.n_sample_types + 1, sizeof(*col_cur));
        col_base = calloc(dc.n_sample_types + 1, sizeof(*col_base));
        e = col_cur && col_base ? 0 : -ENOMEM;
    }
    if (e == 0)
        e = set_shape(p, &dc, &db, col_cur, col_base, &matched);
    if (e == 0 && matched == 0) {
        snprintf(err, errlen,
                 "the base has none of this profile's sample types "
                 "(alloc_objects, alloc_space, inuse_objects, inuse_space)");
        e = -EBADMSG;
        goto out;
    }
    const struct pprof_label mark = {PROFILE_DIFF_BASE_LABEL, "true"};
    if (e == 0)
        e = add_decoded(p, &dc, col_cur, dc.n_sample_types, false, NULL);
    if (e == 0)
        e = add_decoded(p, &db, col_base, dc.n_sample_types, true, label_base ? &mark : NULL);
    if (e)
        snprintf(err, errlen, "make the difference from the base: %s", strerror(-e));
out:
    if (e == 0) {
        *out = p;
        p = NULL;
    }
    pprof_free(p);
    pprof_buf_free(&raw);
    pprof_decoded_free(&dc);
    pprof_decoded_free(&db);
    free(col_cur);
    free(col_base);
    return e;
}
