/*
 * fuzz_encoder.c - libFuzzer target for the pprof encoder (encoder/): build
 * a profile from a script, encode it, decode it with our own reader
 * (encoder/pprof_decode.c), and compare what went in with what came out.
 *
 * The input is a script: each byte picks a call (add a sample type, set the
 * period, add a mapping, a function, a location, a sample, ...), and the
 * following bytes give its arguments, so the fuzzer's mutations turn into
 * different profiles. Beside the real profile, the target keeps its own
 * model of what each call must do: the id it must return (deduplicated
 * functions and locations), or the error (a sample with the wrong number of
 * values, an unknown location id, a mapping whose limit is below its
 * start). After the script, the decoded profile must hold exactly the model:
 * sample values and location ids, mapping fields, functions' names through
 * the string table, lines, labels, comments, period, default type. The gzip
 * of the encoding must inflate back to it, the debug=1 text writer must not
 * fail on a heap-shaped profile, and the top table and collapsed stacks
 * must print every sample type, the folded values adding up to the samples'.
 *
 * Before all that the raw input also goes to the decoder on its own, which
 * must refuse or accept it without a crash.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "fuzz_check.h"
#include "pprof.h"
#include "pprof_decode.h"

/*
 * Bounds of one script: past the first growth of every array (16) and hash
 * index (64 slots, grown at half full), yet small enough that one run takes
 * well under a millisecond.
 */
#define MAX_TYPES 6
#define MAX_MAPPINGS 40
#define MAX_FUNCTIONS 80
#define MAX_LOCATIONS 120
#define MAX_LINES 4
#define MAX_SAMPLES 150
#define MAX_STACK 8
#define MAX_LABELS 3
#define MAX_COMMENTS 8
/* Longest string a script makes, with its NUL. */
#define MAX_STR 24

/* A string as the script made it. */
struct mstr {
    char s[MAX_STR];
};

/* A mapping as the model expects it back. */
struct model_mapping {
    uint64_t start, limit, offset;
    struct mstr filename, build_id;
    bool flags[4];
};

/* A function as the model expects it back. */
struct model_function {
    struct mstr name, system_name, filename;
    int64_t start_line;
};

/* A location as the model expects it back. */
struct model_location {
    uint64_t mapping_id, address;
    struct pprof_line lines[MAX_LINES];
    size_t n_lines;
};

/* A sample as the model expects it back. */
struct model_sample {
    uint64_t locations[MAX_STACK];
    size_t n_locations;
    int64_t values[MAX_TYPES];
    struct mstr labels[MAX_LABELS][2]; /* key, str */
    size_t n_labels;
};

/* Everything the script put into the profile, as it should come out. */
struct model {
    struct mstr types[MAX_TYPES][2]; /* type, unit */
    size_t n_types;
    struct mstr period_type[2];
    int64_t period;
    struct mstr default_type; /* "" when unset */
    int64_t time_nanos, duration_nanos;
    struct mstr comments[MAX_COMMENTS];
    size_t n_comments;
    struct model_mapping mappings[MAX_MAPPINGS];
    size_t n_mappings;
    struct model_function functions[MAX_FUNCTIONS];
    size_t n_functions;
    struct model_location locations[MAX_LOCATIONS];
    size_t n_locations;
    struct model_sample samples[MAX_SAMPLES];
    size_t n_samples;
};

/* The input bytes not yet consumed; reads past the end give zeros. */
struct script {
    const uint8_t *p;
    const uint8_t *end;
};

/* Strings a script picks by number, so that equal strings (and interning) are common. */
static const char *const POOL[] = {
    "",
    "alloc_objects",
    "alloc_space",
    "inuse_objects",
    "inuse_space",
    "count",
    "bytes",
    "space",
    "malloc",
    "main",
    "/usr/lib/x86_64-linux-gnu/libc.so.6",
    "\xc3\xa9", /* a two-byte UTF-8 character: the text writer counts characters */
};

/* The next byte of the script. */
static uint8_t take_u8(struct script *s)
{
    return s->p < s->end ? *s->p++ : 0;
}

/* A 64-bit value: small ones (and -1..-32) in one byte, any value in up to nine. */
static uint64_t take_u64(struct script *s)
{
    uint8_t k = take_u8(s);
    if (k < 0xc0)
        return k;
    if (k < 0xe0)
        return (uint64_t) - (int64_t)(k - 0xbf);
    uint64_t v = 0;
    for (unsigned i = 0; i <= (k & 7u); i++)
        v |= (uint64_t)take_u8(s) << (8 * i);
    return v;
}

/* A signed value, from the same bytes as take_u64. */
static int64_t take_i64(struct script *s)
{
    return (int64_t)take_u64(s);
}

/* A string: one of POOL, or up to 23 bytes of the script with NULs made '?'. */
static void take_str(struct script *s, struct mstr *out)
{
    uint8_t k = take_u8(s);
    if (k < 0xc0) {
        snprintf(out->s, sizeof(out->s), "%s", POOL[k % (sizeof(POOL) / sizeof(POOL[0]))]);
        return;
    }
    size_t len = (size_t)(k & 0x1f);
    if (len > MAX_STR - 1)
        len = MAX_STR - 1;
    for (size_t i = 0; i < len; i++) {
        uint8_t c = take_u8(s);
        out->s[i] = c ? (char)c : '?';
    }
    out->s[len] = '\0';
}

/* Step: add a sample type; refused once a sample exists. */
static void op_sample_type(struct script *s, struct pprof_profile *p, struct model *m)
{
    struct mstr t, u;
    take_str(s, &t);
    take_str(s, &u);
    if (m->n_types == MAX_TYPES)
        return;
    int err = pprof_add_sample_type(p, t.s, u.s);
    FUZZ_CHECK(err == (m->n_samples ? -EINVAL : 0), "add_sample_type with %zu samples: %d",
               m->n_samples, err);
    if (!err) {
        m->types[m->n_types][0] = t;
        m->types[m->n_types][1] = u;
        m->n_types++;
    }
}

/* Step: set the period type and period; a negative period is refused. */
static void op_period(struct script *s, struct pprof_profile *p, struct model *m)
{
    struct mstr t, u;
    take_str(s, &t);
    take_str(s, &u);
    int64_t period = take_i64(s);
    int err = pprof_set_period(p, t.s, u.s, period);
    FUZZ_CHECK(err == (period < 0 ? -EINVAL : 0), "set_period(%" PRId64 "): %d", period, err);
    if (!err) {
        m->period_type[0] = t;
        m->period_type[1] = u;
        m->period = period;
    }
}

/* Step: name the default sample type; only an added type's name is taken. */
static void op_default_type(struct script *s, struct pprof_profile *p, struct model *m)
{
    struct mstr t;
    take_str(s, &t);
    bool known = false;
    for (size_t i = 0; i < m->n_types && !known; i++)
        known = strcmp(m->types[i][0].s, t.s) == 0;
    int err = pprof_set_default_sample_type(p, t.s);
    FUZZ_CHECK(err == (known ? 0 : -EINVAL), "set_default_sample_type(\"%s\"): %d", t.s, err);
    if (!err)
        m->default_type = t;
}

/* Step: set the time and duration. */
static void op_time(struct script *s, struct pprof_profile *p, struct model *m)
{
    m->time_nanos = take_i64(s);
    m->duration_nanos = take_i64(s);
    pprof_set_time(p, m->time_nanos, m->duration_nanos);
}

/* Step: add a comment. */
static void op_comment(struct script *s, struct pprof_profile *p, struct model *m)
{
    struct mstr c;
    take_str(s, &c);
    if (m->n_comments == MAX_COMMENTS)
        return;
    int err = pprof_add_comment(p, c.s);
    FUZZ_CHECK(err == 0, "add_comment: %d", err);
    m->comments[m->n_comments++] = c;
}

/* Step: add a mapping; one whose limit is below its start is refused. */
static void op_mapping(struct script *s, struct pprof_profile *p, struct model *m)
{
    struct model_mapping mm = {0};
    mm.start = take_u64(s);
    mm.limit = mm.start + take_u64(s); /* may wrap below start */
    mm.offset = take_u64(s);
    take_str(s, &mm.filename);
    take_str(s, &mm.build_id);
    uint8_t flags = take_u8(s);
    for (int i = 0; i < 4; i++)
        mm.flags[i] = flags >> i & 1;
    if (m->n_mappings == MAX_MAPPINGS)
        return;
    struct pprof_mapping_desc d = {
        .start = mm.start,
        .limit = mm.limit,
        .offset = mm.offset,
        .filename = mm.filename.s,
        .build_id = mm.build_id.s,
        /* Any non-zero int means true. */
        .has_functions = mm.flags[0] ? flags : 0,
        .has_filenames = mm.flags[1],
        .has_line_numbers = mm.flags[2],
        .has_inline_frames = mm.flags[3],
    };
    int64_t id = pprof_add_mapping(p, &d);
    if (mm.limit < mm.start) {
        FUZZ_CHECK(id == -EINVAL, "mapping with limit below start: %" PRId64, id);
        return;
    }
    FUZZ_CHECK(id == (int64_t)m->n_mappings + 1, "mapping id %" PRId64 ", expected %zu", id,
               m->n_mappings + 1);
    m->mappings[m->n_mappings++] = mm;
}

/* Step: change the flags of a mapping; ids 0 and past the last are refused. */
static void op_mapping_flags(struct script *s, struct pprof_profile *p, struct model *m)
{
    uint64_t id = take_u8(s) % (m->n_mappings + 2);
    uint8_t flags = take_u8(s);
    int err = pprof_set_mapping_flags(p, id, flags & 1, flags & 2, flags & 4, flags & 8);
    bool valid = id >= 1 && id <= m->n_mappings;
    FUZZ_CHECK(err == (valid ? 0 : -EINVAL), "set_mapping_flags(%" PRIu64 "): %d", id, err);
    if (valid)
        for (int i = 0; i < 4; i++)
            m->mappings[id - 1].flags[i] = flags >> i & 1;
}

/* Step: the id of a function, the same for the same (system_name, filename). */
static void op_function(struct script *s, struct pprof_profile *p, struct model *m)
{
    struct model_function f;
    take_str(s, &f.name);
    take_str(s, &f.system_name);
    take_str(s, &f.filename);
    f.start_line = take_i64(s);
    size_t want = 0;
    for (size_t i = 0; i < m->n_functions && !want; i++)
        if (strcmp(m->functions[i].system_name.s, f.system_name.s) == 0 &&
            strcmp(m->functions[i].filename.s, f.filename.s) == 0)
            want = i + 1;
    if (!want && m->n_functions == MAX_FUNCTIONS)
        return;
    int64_t id = pprof_function_id(p, f.name.s, f.system_name.s, f.filename.s, f.start_line);
    if (!want) {
        want = ++m->n_functions;
        m->functions[want - 1] = f;
    }
    FUZZ_CHECK(id == (int64_t)want, "function id %" PRId64 ", expected %zu", id, want);
}

/* Step: the id of a location, the same for the same (mapping, address). */
static void op_location(struct script *s, struct pprof_profile *p, struct model *m)
{
    struct model_location l = {0};
    l.mapping_id = take_u8(s) % (m->n_mappings + 2);
    l.address = take_u64(s);
    l.n_lines = take_u8(s) % (MAX_LINES + 1);
    bool lines_valid = true;
    for (size_t i = 0; i < l.n_lines; i++) {
        l.lines[i].function_id = take_u8(s) % (m->n_functions + 2);
        l.lines[i].line = take_i64(s);
        lines_valid &= l.lines[i].function_id >= 1 && l.lines[i].function_id <= m->n_functions;
    }
    size_t existing = 0;
    for (size_t i = 0; i < m->n_locations && !existing; i++)
        if (m->locations[i].mapping_id == l.mapping_id && m->locations[i].address == l.address)
            existing = i + 1;
    /* What pprof.h says: the mapping is checked first, then an existing key wins. */
    int64_t want;
    if (l.mapping_id > m->n_mappings)
        want = -EINVAL;
    else if (existing)
        want = (int64_t)existing;
    else if (!lines_valid)
        want = -EINVAL;
    else if (m->n_locations == MAX_LOCATIONS)
        return;
    else
        want = (int64_t)m->n_locations + 1;
    int64_t id = pprof_location_id(p, l.mapping_id, l.address, l.lines, l.n_lines);
    FUZZ_CHECK(id == want, "location (%" PRIu64 ", 0x%" PRIx64 "): %" PRId64 ", expected %" PRId64,
               l.mapping_id, l.address, id, want);
    if (id == (int64_t)m->n_locations + 1)
        m->locations[m->n_locations++] = l;
}

/* Step: add a sample; a wrong number of values or an unknown location is refused. */
static void op_sample(struct script *s, struct pprof_profile *p, struct model *m)
{
    struct model_sample ms = {0};
    ms.n_locations = take_u8(s) % (MAX_STACK + 1);
    bool valid = true;
    for (size_t i = 0; i < ms.n_locations; i++) {
        ms.locations[i] = take_u8(s) % (m->n_locations + 2);
        valid &= ms.locations[i] >= 1 && ms.locations[i] <= m->n_locations;
    }
    /* Mostly one value per sample type; now and then one too few or too many. */
    uint8_t k = take_u8(s);
    size_t n_values = m->n_types;
    if (k % 16 == 0 && n_values > 0)
        n_values--;
    else if (k % 16 == 1 && n_values < MAX_TYPES)
        n_values++;
    for (size_t i = 0; i < n_values; i++)
        ms.values[i] = take_i64(s);
    ms.n_labels = take_u8(s) % (MAX_LABELS + 1);
    struct pprof_label labels[MAX_LABELS];
    for (size_t i = 0; i < ms.n_labels; i++) {
        take_str(s, &ms.labels[i][0]);
        take_str(s, &ms.labels[i][1]);
        labels[i] = (struct pprof_label){ms.labels[i][0].s, ms.labels[i][1].s};
    }
    valid &= n_values > 0 && n_values == m->n_types;
    if (m->n_samples == MAX_SAMPLES)
        return;
    int err =
        pprof_add_sample(p, ms.locations, ms.n_locations, ms.values, n_values, labels, ms.n_labels);
    FUZZ_CHECK(err == (valid ? 0 : -EINVAL),
               "add_sample with %zu values for %zu types: %d, expected %s", n_values, m->n_types,
               err, valid ? "0" : "-EINVAL");
    if (!err)
        m->samples[m->n_samples++] = ms;
    FUZZ_CHECK(pprof_sample_count(p) == m->n_samples, "sample count %zu, expected %zu",
               pprof_sample_count(p), m->n_samples);
}

/* The steps a script byte picks from. */
static void (*const OPS[])(struct script *, struct pprof_profile *, struct model *) = {
    op_sample_type,   op_period,   op_default_type, op_time,     op_comment, op_mapping,
    op_mapping_flags, op_function, op_location,     op_location, op_sample,  op_sample,
};

/* String `i` of the decoded table, which must exist. */
static const char *str_at(const struct pprof_decoded *d, int64_t i)
{
    const char *s = pprof_decoded_str(d, i);
    FUZZ_CHECK(s != NULL, "string index %" PRId64 " of %zu", i, d->n_strings);
    return s;
}

/* Checks that decoded string index `i` is `want`. */
static void check_str(const struct pprof_decoded *d, int64_t i, const struct mstr *want,
                      const char *what)
{
    const char *got = str_at(d, i);
    FUZZ_CHECK(strcmp(got, want->s) == 0, "%s: \"%s\", expected \"%s\"", what, got, want->s);
}

/* qsort order of string table entries, to find duplicates. */
static int cmp_strings(const void *a, const void *b)
{
    const struct pprof_decoded_string *x = a, *y = b;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return memcmp(x->s, y->s, x->len);
}

/* Checks the string table: "" first, no NUL inside, each string once (they are interned). */
static void check_strings(const struct pprof_decoded *d)
{
    FUZZ_CHECK(d->n_strings >= 1 && d->strings[0].len == 0, "string_table[0] is not \"\"");
    struct pprof_decoded_string *sorted = malloc(d->n_strings * sizeof(*sorted));
    if (!sorted)
        return;
    memcpy(sorted, d->strings, d->n_strings * sizeof(*sorted));
    qsort(sorted, d->n_strings, sizeof(*sorted), cmp_strings);
    for (size_t i = 0; i < d->n_strings; i++) {
        FUZZ_CHECK(strlen(sorted[i].s) == sorted[i].len, "NUL inside string \"%s\"", sorted[i].s);
        if (i > 0)
            FUZZ_CHECK(cmp_strings(&sorted[i - 1], &sorted[i]) != 0, "\"%s\" is in the table twice",
                       sorted[i].s);
    }
    free(sorted);
}

/* Checks the decoded profile against the model, field by field. */
static void compare(const struct pprof_decoded *d, const struct model *m)
{
    check_strings(d);
    FUZZ_CHECK(d->n_sample_types == m->n_types, "%zu sample types, expected %zu", d->n_sample_types,
               m->n_types);
    for (size_t i = 0; i < m->n_types; i++) {
        check_str(d, d->sample_types[i].type, &m->types[i][0], "sample type");
        check_str(d, d->sample_types[i].unit, &m->types[i][1], "sample unit");
    }
    check_str(d, d->period_type.type, &m->period_type[0], "period type");
    check_str(d, d->period_type.unit, &m->period_type[1], "period unit");
    FUZZ_CHECK(d->period == m->period, "period %" PRId64 ", expected %" PRId64, d->period,
               m->period);
    check_str(d, d->default_sample_type, &m->default_type, "default sample type");
    FUZZ_CHECK(d->time_nanos == m->time_nanos && d->duration_nanos == m->duration_nanos,
               "time %" PRId64 "+%" PRId64 ", expected %" PRId64 "+%" PRId64, d->time_nanos,
               d->duration_nanos, m->time_nanos, m->duration_nanos);
    FUZZ_CHECK(d->n_comments == m->n_comments, "%zu comments, expected %zu", d->n_comments,
               m->n_comments);
    for (size_t i = 0; i < m->n_comments; i++)
        check_str(d, d->comments[i], &m->comments[i], "comment");

    FUZZ_CHECK(d->n_mappings == m->n_mappings, "%zu mappings, expected %zu", d->n_mappings,
               m->n_mappings);
    for (size_t i = 0; i < m->n_mappings; i++) {
        const struct pprof_decoded_mapping *dm = &d->mappings[i];
        const struct model_mapping *mm = &m->mappings[i];
        FUZZ_CHECK(dm->id == i + 1 && dm->start == mm->start && dm->limit == mm->limit &&
                       dm->offset == mm->offset,
                   "mapping %zu: id %" PRIu64 " 0x%" PRIx64 "-0x%" PRIx64 "@0x%" PRIx64, i, dm->id,
                   dm->start, dm->limit, dm->offset);
        check_str(d, dm->filename, &mm->filename, "mapping filename");
        check_str(d, dm->build_id, &mm->build_id, "mapping build id");
        FUZZ_CHECK(dm->has_functions == mm->flags[0] && dm->has_filenames == mm->flags[1] &&
                       dm->has_line_numbers == mm->flags[2] &&
                       dm->has_inline_frames == mm->flags[3],
                   "mapping %zu: flags", i);
    }

    FUZZ_CHECK(d->n_functions == m->n_functions, "%zu functions, expected %zu", d->n_functions,
               m->n_functions);
    for (size_t i = 0; i < m->n_functions; i++) {
        const struct pprof_decoded_function *df = &d->functions[i];
        FUZZ_CHECK(df->id == i + 1, "function %zu has id %" PRIu64, i, df->id);
        check_str(d, df->name, &m->functions[i].name, "function name");
        check_str(d, df->system_name, &m->functions[i].system_name, "function system name");
        check_str(d, df->filename, &m->functions[i].filename, "function filename");
        FUZZ_CHECK(df->start_line == m->functions[i].start_line, "function %zu start line", i);
    }

    FUZZ_CHECK(d->n_locations == m->n_locations, "%zu locations, expected %zu", d->n_locations,
               m->n_locations);
    for (size_t i = 0; i < m->n_locations; i++) {
        const struct pprof_decoded_location *dl = &d->locations[i];
        const struct model_location *ml = &m->locations[i];
        FUZZ_CHECK(dl->id == i + 1 && dl->mapping_id == ml->mapping_id &&
                       dl->address == ml->address && dl->n_lines == ml->n_lines && !dl->is_folded,
                   "location %zu: id %" PRIu64 " mapping %" PRIu64 " address 0x%" PRIx64
                   " %zu lines",
                   i, dl->id, dl->mapping_id, dl->address, dl->n_lines);
        for (size_t j = 0; j < ml->n_lines; j++)
            FUZZ_CHECK(dl->lines[j].function_id == ml->lines[j].function_id &&
                           dl->lines[j].line == ml->lines[j].line,
                       "location %zu line %zu: function %" PRIu64 " line %" PRId64, i, j,
                       dl->lines[j].function_id, dl->lines[j].line);
    }

    FUZZ_CHECK(d->n_samples == m->n_samples, "%zu samples, expected %zu", d->n_samples,
               m->n_samples);
    for (size_t i = 0; i < m->n_samples; i++) {
        const struct pprof_decoded_sample *ds = &d->samples[i];
        const struct model_sample *ms = &m->samples[i];
        FUZZ_CHECK(ds->n_locations == ms->n_locations && ds->n_values == m->n_types &&
                       ds->n_labels == ms->n_labels,
                   "sample %zu: %zu locations, %zu values, %zu labels", i, ds->n_locations,
                   ds->n_values, ds->n_labels);
        for (size_t j = 0; j < ms->n_locations; j++)
            FUZZ_CHECK(ds->location_ids[j] == ms->locations[j], "sample %zu location %zu", i, j);
        for (size_t j = 0; j < m->n_types; j++)
            FUZZ_CHECK(ds->values[j] == ms->values[j],
                       "sample %zu value %zu: %" PRId64 ", expected %" PRId64, i, j, ds->values[j],
                       ms->values[j]);
        for (size_t j = 0; j < ms->n_labels; j++) {
            check_str(d, ds->labels[j].key, &ms->labels[j][0], "label key");
            check_str(d, ds->labels[j].str, &ms->labels[j][1], "label value");
            FUZZ_CHECK(ds->labels[j].num == 0 && ds->labels[j].num_unit == 0, "numeric label");
        }
    }
}

/* Checks that the gzip of `b` inflates back to `b`. */
static void check_gzip(const struct pprof_buf *b)
{
    struct pprof_buf gz = {0};
    int err = pprof_gzip(b->data, b->len, &gz);
    FUZZ_CHECK(err == 0, "gzip: %d", err);
    uint8_t *back = malloc(b->len + 1);
    FUZZ_CHECK(back != NULL, "out of memory");
    z_stream zs = {0};
    FUZZ_CHECK(inflateInit2(&zs, 15 + 16) == Z_OK, "inflateInit2");
    zs.next_in = gz.data;
    zs.avail_in = (uInt)gz.len;
    zs.next_out = back;
    zs.avail_out = (uInt)(b->len + 1);
    int zerr = inflate(&zs, Z_FINISH);
    FUZZ_CHECK(zerr == Z_STREAM_END && zs.total_out == b->len &&
                   (b->len == 0 || memcmp(back, b->data, b->len) == 0),
               "gzip did not round trip: zlib %d, %lu bytes of %zu", zerr, zs.total_out, b->len);
    inflateEnd(&zs);
    free(back);
    pprof_buf_free(&gz);
}

/* Runs the debug=1 text writer: heap-shaped profiles must print, others be refused. */
static void check_text(const struct pprof_profile *p, const struct model *m)
{
    static const char *const heap[4] = {"alloc_objects", "alloc_space", "inuse_objects",
                                        "inuse_space"};
    bool shaped = m->n_types == 4 && m->period >= 1 && m->period <= INT64_MAX / 2;
    for (size_t i = 0; i < m->n_types && shaped; i++)
        shaped = strcmp(m->types[i][0].s, heap[i]) == 0;
    struct pprof_buf text = {0};
    int err = pprof_write_heap_text(p, &text);
    if (!shaped)
        FUZZ_CHECK(err == -EINVAL, "text of a profile not shaped like a heap profile: %d", err);
    else
        FUZZ_CHECK(err == 0 || err == -EOVERFLOW, "text: %d", err);
    if (err == 0)
        FUZZ_CHECK(text.len > 14 && memcmp(text.data, "heap profile: ", 14) == 0,
                   "text starts with \"%.*s\"", (int)(text.len < 40 ? text.len : 40), text.data);
    else
        FUZZ_CHECK(text.len == 0, "%zu bytes left behind by a failed text", text.len);
    pprof_buf_free(&text);
}

/*
 * Runs the top table and collapsed stacks for every sample type: each must
 * print or report an overflow, and the folded values must add up to the
 * model's samples that have a stack and a value of that type.
 */
static void check_reports(const struct pprof_profile *p, const struct model *m)
{
    for (size_t t = 0; t <= m->n_types; t++) {
        struct pprof_buf top = {0}, folded = {0};
        int e_top = pprof_write_top(p, t, &top), e_folded = pprof_write_folded(p, t, &folded);
        if (t == m->n_types) {
            FUZZ_CHECK(e_top == -EINVAL && e_folded == -EINVAL, "reports of a missing type: %d %d",
                       e_top, e_folded);
            break;
        }
        FUZZ_CHECK(e_top == 0 || e_top == -EOVERFLOW, "top of type %zu: %d", t, e_top);
        FUZZ_CHECK(e_top != 0 || (top.len > 6 && memcmp(top.data, "Type: ", 6) == 0),
                   "top of type %zu does not start with its type", t);
        FUZZ_CHECK(e_folded == 0 || e_folded == -EOVERFLOW, "folded of type %zu: %d", t, e_folded);
        int64_t want = 0, got = 0;
        bool overflow = false;
        for (size_t i = 0; i < m->n_samples; i++)
            if (m->samples[i].n_locations)
                overflow |= __builtin_add_overflow(want, m->samples[i].values[t], &want);
        /* Each line ends in " VALUE\n"; the stack before it has no newline. */
        for (size_t i = 0, start = 0; e_folded == 0 && i < folded.len; i++) {
            if (folded.data[i] != '\n')
                continue;
            size_t sp = i;
            while (sp > start && folded.data[sp - 1] != ' ')
                sp--;
            FUZZ_CHECK(sp > start + 1, "folded line without a stack and a value");
            overflow |= __builtin_add_overflow(got, strtoll((const char *)folded.data + sp, NULL, 10), &got);
            start = i + 1;
        }
        if (e_folded == 0 && !overflow)
            FUZZ_CHECK(got == want, "folded values of type %zu add up to %" PRId64 ", not %" PRId64,
                       t, got, want);
        pprof_buf_free(&top);
        pprof_buf_free(&folded);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The decoder on its own: any bytes are refused or read, never a crash. */
    struct pprof_decoded raw;
    if (pprof_decode(data, size, &raw) == 0)
        pprof_decoded_free(&raw);

    struct model *m = calloc(1, sizeof(*m));
    struct pprof_profile *p = pprof_new();
    FUZZ_CHECK(m && p, "out of memory");
    struct script s = {data, data + size};
    while (s.p < s.end) {
        uint8_t op = take_u8(&s);
        OPS[op % (sizeof(OPS) / sizeof(OPS[0]))](&s, p, m);
    }

    struct pprof_buf b = {0};
    int err = pprof_encode(p, &b);
    FUZZ_CHECK(err == 0, "encode: %d", err);
    struct pprof_decoded d;
    err = pprof_decode(b.data, b.len, &d);
    FUZZ_CHECK(err == 0, "decoding our own encoding: %d", err);
    compare(&d, m);
    pprof_decoded_free(&d);
    check_gzip(&b);
    check_text(p, m);
    check_reports(p, m);

    pprof_buf_free(&b);
    pprof_free(p);
    free(m);
    return 0;
}
