/*
 * test_pprof_decode.c - unit tests of encoder/pprof_decode.c, our own
 * profile.proto reader: a handcrafted profile comes back field for field
 * after pprof_encode(), and malformed bytes are refused, never misread.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "pprof.h"
#include "pprof_decode.h"

/* The sampling period of the profile here: heapprofd's default. */
#define TEST_PERIOD 524288

/* Decodes `n` literal bytes, expecting `want` as the result. */
static void decode_bytes(const uint8_t *bytes, size_t n, int want, struct pprof_decoded *d)
{
    int err = pprof_decode(bytes, n, d);
    CHECK_INT_EQ(err, want);
}

static void a_handcrafted_profile_round_trips(void)
{
    struct pprof_profile *p = pprof_new();
    CHECK(p != NULL);
    if (!p)
        return;
    CHECK_INT_EQ(pprof_add_sample_type(p, "alloc_objects", "count"), 0);
    CHECK_INT_EQ(pprof_add_sample_type(p, "inuse_space", "bytes"), 0);
    CHECK_INT_EQ(pprof_set_period(p, "space", "bytes", TEST_PERIOD), 0);
    CHECK_INT_EQ(pprof_set_default_sample_type(p, "inuse_space"), 0);
    pprof_set_time(p, 1700000000123456789LL, 30000000000LL);
    CHECK_INT_EQ(pprof_add_comment(p, "dropped 3 samples"), 0);

    struct pprof_mapping_desc md = {
        .start = 0x7f0000001000,
        .limit = 0x7f0000200000,
        .offset = 0x1000,
        .filename = "/usr/lib/x86_64-linux-gnu/libc.so.6",
        .build_id = "0123456789abcdef0123456789abcdef01234567",
        .has_functions = 1,
    };
    int64_t map1 = pprof_add_mapping(p, &md);
    CHECK_INT_EQ(map1, 1);
    int64_t fmain = pprof_function_id(p, "main", "main", "/src/a.c", 10);
    int64_t fleaf = pprof_function_id(p, "leaf", "_Z4leafv", "/src/b.c", 0);
    CHECK_INT_EQ(fmain, 1);
    CHECK_INT_EQ(fleaf, 2);
    /* Location 1 holds an inlined frame: leaf inlined into main. */
    struct pprof_line lines[2] = {{(uint64_t)fleaf, 7}, {(uint64_t)fmain, 12}};
    int64_t loc1 = pprof_location_id(p, (uint64_t)map1, 0x7f0000001234, lines, 2);
    int64_t loc2 = pprof_location_id(p, 0, 0x401000, NULL, 0);
    CHECK_INT_EQ(loc1, 1);
    CHECK_INT_EQ(loc2, 2);

    uint64_t stack[2] = {(uint64_t)loc1, (uint64_t)loc2};
    int64_t v1[2] = {3, -1}; /* a negative value takes ten bytes on the wire */
    int64_t v2[2] = {INT64_MAX, 0};
    struct pprof_label labels[1] = {{"thread", "worker-1"}};
    CHECK_INT_EQ(pprof_add_sample(p, stack, 2, v1, 2, labels, 1), 0);
    CHECK_INT_EQ(pprof_add_sample(p, NULL, 0, v2, 2, NULL, 0), 0);

    struct pprof_buf buf = {0};
    CHECK_INT_EQ(pprof_encode(p, &buf), 0);
    struct pprof_decoded d;
    CHECK_INT_EQ(pprof_decode(buf.data, buf.len, &d), 0);

    CHECK(d.n_strings > 0);
    CHECK_STR_EQ(pprof_decoded_str(&d, 0), "");
    CHECK(pprof_decoded_str(&d, -1) == NULL);
    CHECK(pprof_decoded_str(&d, (int64_t)d.n_strings) == NULL);

    CHECK_INT_EQ(d.n_sample_types, 2);
    if (d.n_sample_types == 2) {
        CHECK_STR_EQ(pprof_decoded_str(&d, d.sample_types[0].type), "alloc_objects");
        CHECK_STR_EQ(pprof_decoded_str(&d, d.sample_types[0].unit), "count");
        CHECK_STR_EQ(pprof_decoded_str(&d, d.sample_types[1].type), "inuse_space");
        CHECK_STR_EQ(pprof_decoded_str(&d, d.sample_types[1].unit), "bytes");
    }
    CHECK_STR_EQ(pprof_decoded_str(&d, d.period_type.type), "space");
    CHECK_STR_EQ(pprof_decoded_str(&d, d.period_type.unit), "bytes");
    CHECK_INT_EQ(d.period, TEST_PERIOD);
    CHECK_STR_EQ(pprof_decoded_str(&d, d.default_sample_type), "inuse_space");
    CHECK_INT_EQ(d.time_nanos, 1700000000123456789LL);
    CHECK_INT_EQ(d.duration_nanos, 30000000000LL);
    CHECK_INT_EQ(d.n_comments, 1);
    if (d.n_comments == 1)
        CHECK_STR_EQ(pprof_decoded_str(&d, d.comments[0]), "dropped 3 samples");

    CHECK_INT_EQ(d.n_mappings, 1);
    if (d.n_mappings == 1) {
        const struct pprof_decoded_mapping *m = &d.mappings[0];
        CHECK_U64_EQ(m->id, 1);
        CHECK_U64_EQ(m->start, md.start);
        CHECK_U64_EQ(m->limit, md.limit);
        CHECK_U64_EQ(m->offset, md.offset);
        CHECK_STR_EQ(pprof_decoded_str(&d, m->filename), md.filename);
        CHECK_STR_EQ(pprof_decoded_str(&d, m->build_id), md.build_id);
        CHECK(m->has_functions && !m->has_filenames && !m->has_line_numbers &&
              !m->has_inline_frames);
    }

    CHECK_INT_EQ(d.n_functions, 2);
    if (d.n_functions == 2) {
        CHECK_U64_EQ(d.functions[0].id, 1);
        CHECK_STR_EQ(pprof_decoded_str(&d, d.functions[0].name), "main");
        CHECK_STR_EQ(pprof_decoded_str(&d, d.functions[0].system_name), "main");
        CHECK_STR_EQ(pprof_decoded_str(&d, d.functions[0].filename), "/src/a.c");
        CHECK_INT_EQ(d.functions[0].start_line, 10);
        CHECK_U64_EQ(d.functions[1].id, 2);
        CHECK_STR_EQ(pprof_decoded_str(&d, d.functions[1].name), "leaf");
        CHECK_STR_EQ(pprof_decoded_str(&d, d.functions[1].system_name), "_Z4leafv");
        CHECK_INT_EQ(d.functions[1].start_line, 0);
    }

    CHECK_INT_EQ(d.n_locations, 2);
    if (d.n_locations == 2) {
        const struct pprof_decoded_location *l = &d.locations[0];
        CHECK_U64_EQ(l->id, 1);
        CHECK_U64_EQ(l->mapping_id, 1);
        CHECK_U64_EQ(l->address, 0x7f0000001234);
        CHECK_INT_EQ(l->n_lines, 2);
        if (l->n_lines == 2) {
            CHECK_U64_EQ(l->lines[0].function_id, fleaf);
            CHECK_INT_EQ(l->lines[0].line, 7);
            CHECK_U64_EQ(l->lines[1].function_id, fmain);
            CHECK_INT_EQ(l->lines[1].line, 12);
        }
        CHECK_U64_EQ(d.locations[1].id, 2);
        CHECK_U64_EQ(d.locations[1].mapping_id, 0);
        CHECK_U64_EQ(d.locations[1].address, 0x401000);
        CHECK_INT_EQ(d.locations[1].n_lines, 0);
    }

    CHECK_INT_EQ(d.n_samples, 2);
    if (d.n_samples == 2) {
        const struct pprof_decoded_sample *s = &d.samples[0];
        CHECK_INT_EQ(s->n_locations, 2);
        if (s->n_locations == 2) {
            CHECK_U64_EQ(s->location_ids[0], loc1);
            CHECK_U64_EQ(s->location_ids[1], loc2);
        }
        CHECK_INT_EQ(s->n_values, 2);
        if (s->n_values == 2) {
            CHECK_INT_EQ(s->values[0], 3);
            CHECK_INT_EQ(s->values[1], -1);
        }
        CHECK_INT_EQ(s->n_labels, 1);
        if (s->n_labels == 1) {
            CHECK_STR_EQ(pprof_decoded_str(&d, s->labels[0].key), "thread");
            CHECK_STR_EQ(pprof_decoded_str(&d, s->labels[0].str), "worker-1");
        }
        s = &d.samples[1];
        CHECK_INT_EQ(s->n_locations, 0);
        CHECK_INT_EQ(s->n_values, 2);
        if (s->n_values == 2) {
            CHECK_INT_EQ(s->values[0], INT64_MAX);
            CHECK_INT_EQ(s->values[1], 0);
        }
    }
    pprof_decoded_free(&d);
    pprof_buf_free(&buf);
    pprof_free(p);
}

static void empty_input_is_an_empty_profile(void)
{
    struct pprof_decoded d;
    decode_bytes((const uint8_t *)"", 0, 0, &d);
    CHECK_INT_EQ(d.n_strings, 0);
    CHECK_INT_EQ(d.n_samples, 0);
    CHECK(pprof_decoded_str(&d, 0) == NULL);
    pprof_decoded_free(&d);
}

static void repeated_scalars_are_read_packed_and_unpacked(void)
{
    /* Sample {location_id: 1 unpacked, then [2, 300] packed; value: 5 unpacked}. */
    static const uint8_t bytes[] = {
        0x12, 0x09,             /* Profile.sample (2), 9 bytes */
        0x08, 0x01,             /*   location_id (1) varint 1 */
        0x0a, 0x03, 0x02, 0xac, /*   location_id (1) packed: 2, 300 */
        0x02, 0x10, 0x05,       /*   value (2) varint 5 */
        0x68, 0x04,             /* Profile.comment (13) varint 4 */
    };
    struct pprof_decoded d;
    decode_bytes(bytes, sizeof(bytes), 0, &d);
    CHECK_INT_EQ(d.n_samples, 1);
    if (d.n_samples == 1) {
        CHECK_INT_EQ(d.samples[0].n_locations, 3);
        if (d.samples[0].n_locations == 3) {
            CHECK_U64_EQ(d.samples[0].location_ids[0], 1);
            CHECK_U64_EQ(d.samples[0].location_ids[1], 2);
            CHECK_U64_EQ(d.samples[0].location_ids[2], 300);
        }
        CHECK_INT_EQ(d.samples[0].n_values, 1);
    }
    CHECK_INT_EQ(d.n_comments, 1);
    pprof_decoded_free(&d);
}

static void unknown_fields_of_every_wire_type_are_skipped(void)
{
    static const uint8_t bytes[] = {
        0xf8, 0x01, 0x07,                            /* field 31 varint */
        0xf9, 0x01, 1,    2,    3,    4, 5, 6, 7, 8, /* field 31 fixed64 */
        0xfa, 0x01, 0x02, 0xff, 0xff,                /* field 31 bytes */
        0xfd, 0x01, 1,    2,    3,    4,             /* field 31 fixed32 */
        0x60, 0x2a,                                  /* period (12) = 42 */
    };
    struct pprof_decoded d;
    decode_bytes(bytes, sizeof(bytes), 0, &d);
    CHECK_INT_EQ(d.period, 42);
    pprof_decoded_free(&d);
}

static void malformed_input_is_refused(void)
{
    static const struct {
        const char *what;
        uint8_t bytes[16];
        size_t len;
    } cases[] = {
        {"truncated varint", {0x60, 0x80}, 2},
        {"varint over 64 bits",
         {0x60, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02},
         11},
        {"length past the end", {0x32, 0x05, 'a', 'b'}, 4},
        {"field number 0", {0x00, 0x01}, 2},
        {"start group", {0x0b}, 1},
        {"end group", {0x0c}, 1},
        {"wire type 6", {0x0e}, 1},
        {"truncated fixed64", {0x09, 1, 2, 3}, 4},
        {"string as varint", {0x30, 0x01}, 2},
        {"sample as varint", {0x10, 0x01}, 2},
        {"period as bytes", {0x62, 0x00}, 2},
        {"bad varint in a packed run", {0x12, 0x03, 0x0a, 0x01, 0x80}, 5},
        {"nested length past its message", {0x12, 0x02, 0x0a, 0x05}, 4},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct pprof_decoded d;
        int err = pprof_decode(cases[i].bytes, cases[i].len, &d);
        if (err != -EINVAL) {
            fprintf(stderr, "%s: expected -EINVAL, got %d\n", cases[i].what, err);
            CHECK(0);
        }
        /* A refused input leaves nothing behind to free. */
        CHECK(d.n_samples == 0 && d.samples == NULL && d.n_strings == 0);
        pprof_decoded_free(&d);
    }
}

int main(void)
{
    RUN_TEST(a_handcrafted_profile_round_trips);
    RUN_TEST(empty_input_is_an_empty_profile);
    RUN_TEST(repeated_scalars_are_read_packed_and_unpacked);
    RUN_TEST(unknown_fields_of_every_wire_type_are_skipped);
    RUN_TEST(malformed_input_is_refused);
    return check_exit_code();
}
