/*
 * test_encoder.c - unit tests of encoder/: the protobuf writers, the
 * profile model's deduplication, gzip, the debug=1 text, and a full heap
 * profile decoded by `go tool pprof`, the reader our users have.
 *
 * `go` (Debian's golang-go) must be on PATH: without it the decoding tests
 * fail, since an encoder no real reader has checked proves little.
 */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "check.h"
#include "pprof.h"
#include "pprof_profile.h"
#include "protobuf.h"

/* The sampling period of the heap profiles here: Go's and heapprofd's default. */
#define TEST_PERIOD 524288

/* Whether the first `n` bytes of `b` are `want`. */
static int bytes_are(const struct pprof_buf *b, const uint8_t *want, size_t n)
{
    return b->len == n && memcmp(b->data, want, n) == 0;
}

static void varints_encode_edge_values(void)
{
    static const struct {
        uint64_t v;
        size_t len;
        uint8_t bytes[PB_VARINT_MAX];
    } cases[] = {
        {0, 1, {0x00}},
        {1, 1, {0x01}},
        {127, 1, {0x7f}},
        {128, 2, {0x80, 0x01}},
        {300, 2, {0xac, 0x02}},
        {16383, 2, {0xff, 0x7f}},
        {16384, 3, {0x80, 0x80, 0x01}},
        {UINT32_MAX, 5, {0xff, 0xff, 0xff, 0xff, 0x0f}},
        {1ULL << 63, 10, {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}},
        {UINT64_MAX, 10, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        uint8_t got[PB_VARINT_MAX];
        size_t n = pb_varint_encode(got, cases[i].v);
        CHECK_INT_EQ(n, cases[i].len);
        if (n == cases[i].len && memcmp(got, cases[i].bytes, n) != 0) {
            fprintf(stderr, "varint of 0x%" PRIx64 " has the wrong bytes\n", cases[i].v);
            CHECK(0);
        }
    }
}

static void zero_scalars_are_left_out_and_negative_ints_take_ten_bytes(void)
{
    struct pprof_buf b = {0};
    struct pb_writer w = {.out = &b};
    pb_uint(&w, 1, 0);
    pb_int(&w, 2, 0);
    CHECK_INT_EQ(b.len, 0);
    pb_int(&w, 2, -1);
    static const uint8_t minus_one[] = {0x10, 0xff, 0xff, 0xff, 0xff, 0xff,
                                        0xff, 0xff, 0xff, 0xff, 0x01};
    CHECK(bytes_are(&b, minus_one, sizeof(minus_one)));
    CHECK_INT_EQ(w.err, 0);
    pprof_buf_free(&b);
}

static void nested_messages_get_their_length_in_front(void)
{
    struct pprof_buf b = {0};
    struct pb_writer w = {.out = &b};
    size_t outer = pb_begin(&w, 4);
    size_t inner = pb_begin(&w, 1);
    pb_end(&w, inner);
    for (int i = 0; i < 200; i++)
        pb_varint(&w, 0x55);
    pb_end(&w, outer);
    CHECK_INT_EQ(w.err, 0);
    /* key 4/LEN, length 202 as two bytes, then the empty field 1 and the payload. */
    CHECK_INT_EQ(b.len, 1 + 2 + 2 + 200);
    static const uint8_t head[] = {0x22, 0xca, 0x01, 0x0a, 0x00, 0x55};
    CHECK(b.len > sizeof(head) && memcmp(b.data, head, sizeof(head)) == 0);
    CHECK_INT_EQ(b.data[b.len - 1], 0x55);
    pprof_buf_free(&b);
}

static void an_empty_profile_encodes_only_the_empty_string(void)
{
    struct pprof_profile *p = pprof_new();
    struct pprof_buf b = {0};
    CHECK_INT_EQ(pprof_encode(p, &b), 0);
    /* string_table = 6, LEN: the "" every profile.proto starts its table with. */
    static const uint8_t want[] = {0x32, 0x00};
    CHECK(bytes_are(&b, want, sizeof(want)));
    pprof_buf_free(&b);
    pprof_free(p);
}

static void strings_are_interned_once_with_the_empty_string_first(void)
{
    struct pprof_profile *p = pprof_new();
    CHECK_INT_EQ(p->strings.n, 1);
    CHECK_STR_EQ(p->strings.v[0], "");
    CHECK_INT_EQ(pprof_add_comment(p, "hello"), 0);
    CHECK_INT_EQ(pprof_add_comment(p, "hello"), 0);
    CHECK_INT_EQ(pprof_add_comment(p, ""), 0);
    CHECK_INT_EQ(p->strings.n, 2);
    CHECK_INT_EQ(p->comments.v[0], 1);
    CHECK_INT_EQ(p->comments.v[1], 1);
    CHECK_INT_EQ(p->comments.v[2], 0);
    /* Enough strings to make the index grow several times. */
    char name[32];
    for (int i = 0; i < 5000; i++) {
        snprintf(name, sizeof(name), "fn_%d", i % 2500);
        CHECK(pprof_function_id(p, name, name, "", 0) == i % 2500 + 1);
    }
    CHECK_INT_EQ(p->strings.n, 2 + 2500);
    CHECK_INT_EQ(pprof_add_comment(p, NULL), -EINVAL);
    pprof_free(p);
}

static void functions_are_keyed_by_system_name_and_file(void)
{
    struct pprof_profile *p = pprof_new();
    int64_t a = pprof_function_id(p, "helper", "helper", "/src/a.c", 3);
    int64_t b = pprof_function_id(p, "helper", "helper", "/src/b.c", 9);
    int64_t c = pprof_function_id(p, "f(int)", "_Z1fi", "/src/a.c", 0);
    int64_t d = pprof_function_id(p, "f(long)", "_Z1fl", "/src/a.c", 0);
    CHECK_INT_EQ(a, 1);
    CHECK_INT_EQ(b, 2);
    CHECK_INT_EQ(c, 3);
    CHECK_INT_EQ(d, 4);
    /* The same function again, even under another display name, is the first. */
    CHECK_INT_EQ(pprof_function_id(p, "helper", "helper", "/src/b.c", 9), b);
    CHECK_INT_EQ(pprof_function_id(p, "f", "_Z1fi", "/src/a.c", 0), c);
    CHECK_STR_EQ(pprof_str(p, p->functions.v[c - 1].name), "f(int)");
    CHECK_INT_EQ(p->functions.n, 4);
    pprof_free(p);
}

static void locations_are_keyed_by_mapping_and_address(void)
{
    struct pprof_profile *p = pprof_new();
    struct pprof_mapping_desc m = {
        .start = 0x1000, .limit = 0x2000, .filename = "/a", .build_id = ""};
    int64_t m1 = pprof_add_mapping(p, &m);
    int64_t m2 = pprof_add_mapping(p, &m);
    CHECK_INT_EQ(m1, 1);
    CHECK_INT_EQ(m2, 2);
    struct pprof_line line = {pprof_function_id(p, "f", "f", "", 0), 7};
    int64_t l1 = pprof_location_id(p, 1, 0x1234, &line, 1);
    int64_t l2 = pprof_location_id(p, 2, 0x1234, &line, 1);
    int64_t l3 = pprof_location_id(p, 1, 0x1238, NULL, 0);
    CHECK_INT_EQ(l1, 1);
    CHECK_INT_EQ(l2, 2);
    CHECK_INT_EQ(l3, 3);
    /* A known location keeps its first lines. */
    CHECK_INT_EQ(pprof_location_id(p, 1, 0x1234, NULL, 0), l1);
    CHECK_INT_EQ(pprof_location_id(p, 1, 0x1238, &line, 1), l3);
    CHECK_INT_EQ(p->locations.v[l3 - 1].n_lines, 0);
    CHECK_INT_EQ(p->locations.n, 3);
    /* Unknown mappings and functions are refused. */
    CHECK_INT_EQ(pprof_location_id(p, 3, 0x1234, NULL, 0), -EINVAL);
    struct pprof_line bad = {99, 1};
    CHECK_INT_EQ(pprof_location_id(p, 0, 0x9999, &bad, 1), -EINVAL);
    CHECK_INT_EQ(pprof_set_mapping_flags(p, 3, 1, 1, 1, 1), -EINVAL);
    pprof_free(p);
}

static void samples_need_one_value_per_sample_type(void)
{
    struct pprof_profile *p = pprof_new();
    CHECK_INT_EQ(pprof_add_sample_type(p, "objects", "count"), 0);
    CHECK_INT_EQ(pprof_add_sample_type(p, "space", "bytes"), 0);
    int64_t values[3] = {1, 2, 3};
    uint64_t loc = (uint64_t)pprof_location_id(p, 0, 0x10, NULL, 0);
    CHECK_INT_EQ(pprof_add_sample(p, &loc, 1, values, 1, NULL, 0), -EINVAL);
    CHECK_INT_EQ(pprof_add_sample(p, &loc, 1, values, 3, NULL, 0), -EINVAL);
    uint64_t missing = 2;
    CHECK_INT_EQ(pprof_add_sample(p, &missing, 1, values, 2, NULL, 0), -EINVAL);
    CHECK_INT_EQ(pprof_sample_count(p), 0);
    CHECK_INT_EQ(pprof_add_sample(p, &loc, 1, values, 2, NULL, 0), 0);
    CHECK_INT_EQ(pprof_sample_count(p), 1);
    /* Sample types are fixed once samples carry values. */
    CHECK_INT_EQ(pprof_add_sample_type(p, "late", "count"), -EINVAL);
    CHECK_INT_EQ(pprof_set_default_sample_type(p, "nosuch"), -EINVAL);
    CHECK_INT_EQ(pprof_set_default_sample_type(p, "space"), 0);
    pprof_free(p);
}

/* Build IDs of the two mappings of the heap profile. */
#define EXE_BUILD_ID "0123456789abcdef0123456789abcdef01234567"
#define LIB_BUILD_ID "fedcba9876543210fedcba9876543210fedcba98"

/*
 * A heap profile as the daemon makes one: a program and a library, an
 * inlined call, two functions named `helper`, and two samples, the second
 * with labels. Values of sample 1 are distinct so each is recognisable.
 */
static struct pprof_profile *heap_profile(int64_t period)
{
    struct pprof_profile *p = pprof_new();
    int err = pprof_add_sample_type(p, "alloc_objects", "count");
    err = err ?: pprof_add_sample_type(p, "alloc_space", "bytes");
    err = err ?: pprof_add_sample_type(p, "inuse_objects", "count");
    err = err ?: pprof_add_sample_type(p, "inuse_space", "bytes");
    err = err ?: pprof_set_period(p, "space", "bytes", period);
    err = err ?: pprof_set_default_sample_type(p, "inuse_space");
    err = err ?: pprof_add_comment(p, "made by test_encoder");
    CHECK_INT_EQ(err, 0);
    pprof_set_time(p, 1700000000000000000LL, 5000000000LL);

    struct pprof_mapping_desc exe = {
        .start = 0x400000,
        .limit = 0x500000,
        .filename = "/usr/bin/demo",
        .build_id = EXE_BUILD_ID,
        .has_functions = 1,
        .has_filenames = 1,
        .has_line_numbers = 1,
        .has_inline_frames = 1,
    };
    /* No inline frames: the flags are kept apart, as pprof shows them. */
    struct pprof_mapping_desc lib = {
        .start = 0x7f0000000000,
        .limit = 0x7f0000100000,
        .offset = 0x1000,
        .filename = "/usr/lib/libdemo.so.1",
        .build_id = LIB_BUILD_ID,
        .has_functions = 1,
        .has_filenames = 1,
        .has_line_numbers = 1,
    };
    int64_t m_exe = pprof_add_mapping(p, &exe);
    int64_t m_lib = pprof_add_mapping(p, &lib);

    uint64_t f_main = pprof_function_id(p, "main", "main", "/src/demo.c", 50);
    uint64_t f_make = pprof_function_id(p, "make_node", "make_node", "/src/demo.c", 30);
    uint64_t f_help = pprof_function_id(p, "helper", "helper", "/src/demo.c", 10);
    uint64_t f_lib_help = pprof_function_id(p, "helper", "helper", "/src/lib.c", 3);
    uint64_t f_alloc =
        pprof_function_id(p, "demo_alloc(unsigned long)", "_Z10demo_allocm", "/src/lib.c", 5);

    struct pprof_line inlined[] = {{f_help, 12}, {f_make, 42}};
    struct pprof_line in_main = {f_main, 61};
    struct pprof_line in_alloc[] = {{f_lib_help, 4}, {f_alloc, 7}};
    uint64_t l_make = (uint64_t)pprof_location_id(p, m_exe, 0x401234, inlined, 2);
    uint64_t l_main = (uint64_t)pprof_location_id(p, m_exe, 0x401500, &in_main, 1);
    uint64_t l_alloc = (uint64_t)pprof_location_id(p, m_lib, 0x7f0000001234, in_alloc, 2);

    uint64_t stack1[] = {l_make, l_main};
    int64_t values1[] = {5, 40960, 4, 32768};
    uint64_t stack2[] = {l_alloc, l_make, l_main};
    int64_t values2[] = {3, 3072, 1, 1024};
    struct pprof_label labels[] = {{"pid", "4242"}, {"comm", "demo"}};
    CHECK_INT_EQ(pprof_add_sample(p, stack1, 2, values1, 4, NULL, 0), 0);
    CHECK_INT_EQ(pprof_add_sample(p, stack2, 3, values2, 4, labels, 2), 0);
    return p;
}

/* Inflates gzip `in` into `out`; returns 0 or a zlib error. */
static int gunzip(const struct pprof_buf *in, struct pprof_buf *out)
{
    z_stream zs = {0};
    if (inflateInit2(&zs, 15 + 16) != Z_OK)
        return Z_MEM_ERROR;
    zs.next_in = in->data;
    zs.avail_in = (uInt)in->len;
    int zerr;
    do {
        uint8_t chunk[4096];
        zs.next_out = chunk;
        zs.avail_out = sizeof(chunk);
        zerr = inflate(&zs, Z_NO_FLUSH);
        if (zerr != Z_OK && zerr != Z_STREAM_END)
            break;
        if (pprof_buf_append(out, chunk, sizeof(chunk) - zs.avail_out)) {
            zerr = Z_MEM_ERROR;
            break;
        }
    } while (zerr != Z_STREAM_END);
    inflateEnd(&zs);
    return zerr == Z_STREAM_END ? 0 : zerr;
}

static void gzip_round_trips_through_inflate(void)
{
    struct pprof_profile *p = heap_profile(TEST_PERIOD);
    struct pprof_buf raw = {0}, gz = {0}, back = {0};
    CHECK_INT_EQ(pprof_encode(p, &raw), 0);
    /* Something long and repetitive too, so deflate needs several output chunks. */
    for (int i = 0; i < 20000; i++)
        CHECK_INT_EQ(pprof_buf_append(&raw, &i, sizeof(i)), 0);
    CHECK_INT_EQ(pprof_gzip(raw.data, raw.len, &gz), 0);
    CHECK(gz.len > 18 && gz.data[0] == 0x1f && gz.data[1] == 0x8b);
    CHECK_INT_EQ(gunzip(&gz, &back), 0);
    CHECK(back.len == raw.len && memcmp(back.data, raw.data, raw.len) == 0);
    /* Empty input still makes a valid, empty gzip stream. */
    struct pprof_buf empty_gz = {0}, empty_back = {0};
    CHECK_INT_EQ(pprof_gzip(NULL, 0, &empty_gz), 0);
    CHECK_INT_EQ(gunzip(&empty_gz, &empty_back), 0);
    CHECK_INT_EQ(empty_back.len, 0);
    pprof_buf_free(&raw);
    pprof_buf_free(&gz);
    pprof_buf_free(&back);
    pprof_buf_free(&empty_gz);
    pprof_buf_free(&empty_back);
    pprof_free(p);
}

/* Removes one file or directory for nftw(). */
static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* A scratch directory for `go` (HOME, PPROF_TMPDIR) and the files it reads. */
struct scratch {
    char dir[64];
};

/* Makes the scratch directory; returns 0 or -1. */
static int scratch_make(struct scratch *s)
{
    snprintf(s->dir, sizeof(s->dir), "/tmp/test_encoder.XXXXXX");
    return mkdtemp(s->dir) ? 0 : -1;
}

/* Removes the scratch directory and all in it. */
static void scratch_remove(struct scratch *s)
{
    nftw(s->dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

/* Writes `b` to `name` in the scratch directory; the path goes to `path`. */
static int scratch_write(const struct scratch *s, const char *name, const struct pprof_buf *b,
                         char *path, size_t path_size)
{
    snprintf(path, path_size, "%s/%s", s->dir, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        return -errno;
    int ok = fwrite(b->data, 1, b->len, f) == b->len;
    return fclose(f) == 0 && ok ? 0 : -EIO;
}

/* Whether `go` is on PATH; says how to get it when not. */
static int have_go(void)
{
    if (system("command -v go >/dev/null 2>&1") == 0)
        return 1;
    fprintf(stderr, "go not found on PATH: install golang-go; the encoder's output is checked "
                    "by `go tool pprof`, so this test cannot pass without it\n");
    check_failures++;
    return 0;
}

/* Runs `go tool pprof ARGS` in scratch `s`; its output (NUL-terminated) goes to `out`. */
static int run_pprof(const struct scratch *s, const char *args, struct pprof_buf *out)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "HOME=%s PPROF_TMPDIR=%s GOCACHE=%s/cache go tool pprof %s 2>&1",
             s->dir, s->dir, s->dir, args);
    FILE *f = popen(cmd, "r");
    if (!f)
        return -errno;
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        pprof_buf_append(out, chunk, n);
    pprof_buf_append(out, "", 1);
    int status = pclose(f);
    if (status != 0)
        fprintf(stderr, "`go tool pprof %s` exited with status %d:\n%s\n", args, status,
                (char *)out->data);
    return status;
}

/* Squeezes runs of blanks to one space and drops them at line starts, in place; returns `s`. */
static char *squeeze_blanks(char *s)
{
    char *out = s;
    int at_line_start = 1, in_blank = 0;
    for (const char *in = s; *in; in++) {
        if (*in == ' ' || *in == '\t') {
            in_blank = 1;
            continue;
        }
        if (in_blank && !at_line_start && *in != '\n')
            *out++ = ' ';
        in_blank = 0;
        *out++ = *in;
        at_line_start = *in == '\n';
    }
    *out = 0;
    return s;
}

/* Checks that `text` contains `want`, printing the text when not. */
#define CHECK_CONTAINS(text, want)                                                                 \
    do {                                                                                           \
        const char *t_ = (text), *w_ = (want);                                                     \
        if (!t_ || !strstr(t_, w_)) {                                                              \
            fprintf(stderr, "%s:%d: output lacks \"%s\":\n%s\n", __FILE__, __LINE__, w_,           \
                    t_ ? t_ : "(null)");                                                           \
            check_failures++;                                                                      \
        }                                                                                          \
    } while (0)

static void go_tool_pprof_reads_the_gzipped_heap_profile(void)
{
    if (!have_go())
        return;
    struct scratch s;
    CHECK_INT_EQ(scratch_make(&s), 0);
    struct pprof_profile *p = heap_profile(TEST_PERIOD);
    struct pprof_buf raw = {0}, gz = {0}, out = {0}, top = {0};
    char path[128], args[256];
    CHECK_INT_EQ(pprof_encode(p, &raw), 0);
    CHECK_INT_EQ(pprof_gzip(raw.data, raw.len, &gz), 0);
    CHECK_INT_EQ(scratch_write(&s, "heap.pb.gz", &gz, path, sizeof(path)), 0);

    snprintf(args, sizeof(args), "-raw %s", path);
    CHECK_INT_EQ(run_pprof(&s, args, &out), 0);
    char *text = squeeze_blanks((char *)out.data);
    CHECK_CONTAINS(text, "\nPeriodType: space bytes\n");
    CHECK_CONTAINS(text, "\nPeriod: 524288\n");
    CHECK_CONTAINS(text, "Comment: made by test_encoder\n");
    CHECK_CONTAINS(text, "\nDuration: 5s\n");
    CHECK_CONTAINS(text, "\nalloc_objects/count alloc_space/bytes inuse_objects/count "
                         "inuse_space/bytes[dflt]\n");
    /* Values, then location ids leaf first; labels on the line after. */
    CHECK_CONTAINS(text, "\n5 40960 4 32768: 1 2\n");
    CHECK_CONTAINS(text, "\n3 3072 1 1024: 3 1 2\ncomm:[demo] pid:[4242]\n");
    /* Inlined frames innermost first; the two helpers each with their file. */
    CHECK_CONTAINS(text, "\n1: 0x401234 M=1 helper /src/demo.c:12 s=10\n"
                         "make_node /src/demo.c:42 s=30\n");
    CHECK_CONTAINS(text, "\n2: 0x401500 M=1 main /src/demo.c:61 s=50\n");
    CHECK_CONTAINS(text, "\n3: 0x7f0000001234 M=2 helper /src/lib.c:4 s=3\n"
                         "demo_alloc(unsigned long) /src/lib.c:7 s=5(_Z10demo_allocm)\n");
    CHECK_CONTAINS(text,
                   "\n1: 0x400000/0x500000/0x0 /usr/bin/demo " EXE_BUILD_ID " [FN][FL][LN][IN]\n");
    CHECK_CONTAINS(text,
                   "\n2: 0x7f0000000000/0x7f0000100000/0x1000 /usr/lib/libdemo.so.1 " LIB_BUILD_ID
                   " [FN][FL][LN]\n");

    /* -filefunctions keeps the two `helper`s apart, as the profile does. */
    snprintf(args, sizeof(args), "-top -sample_index=alloc_space -unit=B -filefunctions %s", path);
    CHECK_INT_EQ(run_pprof(&s, args, &top), 0);
    text = squeeze_blanks((char *)top.data);
    CHECK_CONTAINS(text, "\nType: alloc_space\n");
    CHECK_CONTAINS(text, "\n40960B 93.02% 93.02% 44032B 100% helper /src/demo.c (inline)\n");
    CHECK_CONTAINS(text, "\n3072B 6.98% 100% 3072B 6.98% helper /src/lib.c (inline)\n");
    CHECK_CONTAINS(text, "\n0 0% 100% 44032B 100% main /src/demo.c\n");

    pprof_buf_free(&raw);
    pprof_buf_free(&gz);
    pprof_buf_free(&out);
    pprof_buf_free(&top);
    pprof_free(p);
    scratch_remove(&s);
}

/*
 * Adds a third sample to heap_profile()'s: through a frame with no symbol
 * and an inlined function with a long name, which shift Go's tab alignment.
 */
static void add_unaligned_sample(struct pprof_profile *p)
{
    uint64_t f_help = pprof_function_id(p, "helper", "helper", "/src/demo.c", 10);
    uint64_t f_long = pprof_function_id(p, "make_node_with_a_very_long_name_indeed",
                                        "make_node_with_a_very_long_name_indeed", "/src/demo.c", 0);
    struct pprof_line inlined[] = {{f_help, 12}, {f_long, 42}};
    uint64_t stack[] = {
        (uint64_t)pprof_location_id(p, 2, 0x7f0000001234, NULL, 0),
        (uint64_t)pprof_location_id(p, 2, 0x7f0000009999, NULL, 0),
        (uint64_t)pprof_location_id(p, 1, 0x401240, inlined, 2),
        (uint64_t)pprof_location_id(p, 1, 0x401500, NULL, 0),
    };
    int64_t values[] = {2, 2048, 1, 512};
    CHECK_INT_EQ(pprof_add_sample(p, stack, 4, values, 4, NULL, 0), 0);
}

static void heap_text_matches_go_byte_for_byte(void)
{
    /*
     * What Go's writeHeapInternal prints for these records, through its
     * text/tabwriter (checked with Go 1.19), without the MemStats section.
     */
    static const char want[] =
        "heap profile: 6: 34304 [10: 46080] @ heap/1048576\n"
        "4: 32768 [5: 40960] @ 0x401234 0x401500\n"
        "#\t0x401234\thelper+0x0\t/src/demo.c:12\n"
        "#\t0x401234\tmake_node+0x0\t/src/demo.c:42\n"
        "#\t0x401500\tmain+0x0\t/src/demo.c:61\n"
        "\n"
        "1: 1024 [3: 3072] @ 0x7f0000001234 0x401234 0x401500\n"
        "#\t0x7f0000001234\thelper+0x0\t\t\t/src/lib.c:4\n"
        "#\t0x7f0000001234\tdemo_alloc(unsigned long)+0x0\t/src/lib.c:7\n"
        "#\t0x401234\thelper+0x0\t\t\t/src/demo.c:12\n"
        "#\t0x401234\tmake_node+0x0\t\t\t/src/demo.c:42\n"
        "#\t0x401500\tmain+0x0\t\t\t/src/demo.c:61\n"
        "\n"
        "1: 512 [2: 2048] @ 0x7f0000001234 0x7f0000009999 0x401240 0x401500\n"
        "#\t0x7f0000001234\thelper+0x0\t\t\t/src/lib.c:4\n"
        "#\t0x7f0000001234\tdemo_alloc(unsigned long)+0x0\t/src/lib.c:7\n"
        "#\t0x7f0000009999\n"
        "#\t0x401240\thelper+0x0\t\t\t\t\t/src/demo.c:12\n"
        "#\t0x401240\tmake_node_with_a_very_long_name_indeed+0x0\t/src/demo.c:42\n"
        "#\t0x401500\tmain+0x0\t\t\t\t\t/src/demo.c:61\n"
        "\n";
    struct pprof_profile *p = heap_profile(TEST_PERIOD);
    add_unaligned_sample(p);
    struct pprof_buf b = {0};
    CHECK_INT_EQ(pprof_write_heap_text(p, &b), 0);
    CHECK_INT_EQ(pprof_buf_append(&b, "", 1), 0);
    CHECK_STR_EQ((const char *)b.data, want);
    pprof_buf_free(&b);
    pprof_free(p);
}

static void heap_text_refuses_other_profile_shapes(void)
{
    struct pprof_buf b = {0};
    struct pprof_profile *p = pprof_new();
    pprof_add_sample_type(p, "objects", "count");
    pprof_add_sample_type(p, "space", "bytes");
    pprof_set_period(p, "space", "bytes", TEST_PERIOD);
    CHECK_INT_EQ(pprof_write_heap_text(p, &b), -EINVAL);
    pprof_free(p);
    /* The heap types in another order. */
    p = pprof_new();
    pprof_add_sample_type(p, "inuse_objects", "count");
    pprof_add_sample_type(p, "inuse_space", "bytes");
    pprof_add_sample_type(p, "alloc_objects", "count");
    pprof_add_sample_type(p, "alloc_space", "bytes");
    pprof_set_period(p, "space", "bytes", TEST_PERIOD);
    CHECK_INT_EQ(pprof_write_heap_text(p, &b), -EINVAL);
    pprof_free(p);
    /* No period. */
    p = heap_profile(0);
    CHECK_INT_EQ(pprof_write_heap_text(p, &b), -EINVAL);
    CHECK_INT_EQ(b.len, 0);
    pprof_buf_free(&b);
    pprof_free(p);
}

static void go_tool_pprof_reads_the_heap_text(void)
{
    if (!have_go())
        return;
    struct scratch s;
    CHECK_INT_EQ(scratch_make(&s), 0);
    /* Period 1: pprof scales legacy text values by the period, and 1 leaves them be. */
    struct pprof_profile *p = heap_profile(1);
    add_unaligned_sample(p);
    struct pprof_buf b = {0}, out = {0};
    char path[128], args[256];
    CHECK_INT_EQ(pprof_write_heap_text(p, &b), 0);
    CHECK_INT_EQ(scratch_write(&s, "heap.txt", &b, path, sizeof(path)), 0);
    snprintf(args, sizeof(args), "-raw %s", path);
    CHECK_INT_EQ(run_pprof(&s, args, &out), 0);
    char *text = squeeze_blanks((char *)out.data);
    CHECK_CONTAINS(text, "\nPeriod: 1\n");
    CHECK_CONTAINS(text, "\nalloc_objects/count alloc_space/bytes inuse_objects/count "
                         "inuse_space/bytes\n");
    CHECK_CONTAINS(text, "\n5 40960 4 32768: 1 2\n");
    CHECK_CONTAINS(text, "\n3 3072 1 1024: 3 1 2\n");
    CHECK_CONTAINS(text, "\n2 2048 1 512: 3 4 5 2\n");
    pprof_buf_free(&b);
    pprof_buf_free(&out);
    pprof_free(p);
    scratch_remove(&s);
}

int main(void)
{
    RUN_TEST(varints_encode_edge_values);
    RUN_TEST(zero_scalars_are_left_out_and_negative_ints_take_ten_bytes);
    RUN_TEST(nested_messages_get_their_length_in_front);
    RUN_TEST(an_empty_profile_encodes_only_the_empty_string);
    RUN_TEST(strings_are_interned_once_with_the_empty_string_first);
    RUN_TEST(functions_are_keyed_by_system_name_and_file);
    RUN_TEST(locations_are_keyed_by_mapping_and_address);
    RUN_TEST(samples_need_one_value_per_sample_type);
    RUN_TEST(gzip_round_trips_through_inflate);
    RUN_TEST(go_tool_pprof_reads_the_gzipped_heap_profile);
    RUN_TEST(heap_text_matches_go_byte_for_byte);
    RUN_TEST(heap_text_refuses_other_profile_shapes);
    RUN_TEST(go_tool_pprof_reads_the_heap_text);
    return check_exit_code();
}
