/*
 * test_reports.c - unit tests of the text reports of encoder/: the top
 * table (pprof_top.c) and collapsed stacks (pprof_folded.c).
 *
 * The expected tables are what `go tool pprof -top -nodefraction=0
 * -edgefraction=0 -sample_index=T` (Go 1.19) prints for the same profile
 * (less its "File:" line), written out with HEAPPROF_REPORTS_DUMP=DIR and
 * read with pprof when these were written: the units pprof picks for the
 * table (kB for a 2 MB total whose smallest row is 200 B), its order (flat,
 * then name), recursion counted once in cum, "(inline)".
 * tests/integration/test_formats.py compares the two live on real profiles.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "pprof.h"

/* Builds a heap-shaped profile: sample types, period, one mapping per file. */
static struct pprof_profile *new_heap(uint64_t *m_exe, uint64_t *m_lib)
{
    struct pprof_profile *p = pprof_new();
    int err = pprof_add_sample_type(p, "alloc_objects", "count");
    err = err ?: pprof_add_sample_type(p, "alloc_space", "bytes");
    err = err ?: pprof_add_sample_type(p, "inuse_objects", "count");
    err = err ?: pprof_add_sample_type(p, "inuse_space", "bytes");
    err = err ?: pprof_set_period(p, "space", "bytes", 524288);
    err = err ?: pprof_set_default_sample_type(p, "inuse_space");
    CHECK_INT_EQ(err, 0);
    struct pprof_mapping_desc exe = {.start = 0x400000, .limit = 0x500000,
                                     .filename = "/usr/bin/demo", .build_id = "",
                                     .has_functions = 1};
    struct pprof_mapping_desc lib = {.start = 0x7f0000000000, .limit = 0x7f0000100000,
                                     .filename = "/usr/lib/x86_64-linux-gnu/libz.so.1",
                                     .build_id = ""};
    *m_exe = (uint64_t)pprof_add_mapping(p, &exe);
    *m_lib = (uint64_t)pprof_add_mapping(p, &lib);
    return p;
}

/* A location in mapping `m` at `addr` with functions `names` (innermost first; NULL-ended). */
static uint64_t loc(struct pprof_profile *p, uint64_t m, uint64_t addr, const char *const *names)
{
    struct pprof_line lines[4];
    size_t n = 0;
    for (; names && names[n] && n < 4; n++)
        lines[n] = (struct pprof_line){(uint64_t)pprof_function_id(p, names[n], names[n],
                                                                   "/src/demo.c", 1),
                                       (int64_t)n + 10};
    return (uint64_t)pprof_location_id(p, m, addr, lines, n);
}

/*
 * The profile the tests print: main calls parse, which calls xmalloc (a big
 * allocation) and, through an inlined grow(), xmalloc again; a recursive
 * walk(); a frame of libz without a symbol; a sample all of whose values
 * are zero but one; two call sites in one function (same names, two
 * locations), which fold into one line.
 */
static struct pprof_profile *demo_profile(void)
{
    uint64_t m_exe, m_lib;
    struct pprof_profile *p = new_heap(&m_exe, &m_lib);
    static const char *const main_[] = {"main", NULL}, *const parse[] = {"parse", NULL},
                             *const xmalloc[] = {"xmalloc", NULL},
                             *const grow_in_parse[] = {"grow", "parse", NULL},
                             *const walk[] = {"walk", NULL}, *const semi[] = {"odd;name", NULL};
    uint64_t l_main = loc(p, m_exe, 0x401000, main_);
    uint64_t l_parse = loc(p, m_exe, 0x402000, parse);
    uint64_t l_parse2 = loc(p, m_exe, 0x402010, parse);
    uint64_t l_grow = loc(p, m_exe, 0x402100, grow_in_parse);
    uint64_t l_xm = loc(p, m_exe, 0x403000, xmalloc);
    uint64_t l_walk1 = loc(p, m_exe, 0x404000, walk);
    uint64_t l_walk2 = loc(p, m_exe, 0x404010, walk);
    uint64_t l_z = loc(p, m_lib, 0x7f0000001234, NULL);
    uint64_t l_semi = loc(p, m_exe, 0x405000, semi);
    struct {
        uint64_t stack[5];
        size_t n;
        int64_t v[4];
    } s[] = {
        {{l_xm, l_parse, l_main}, 3, {4, 3145728, 2, 2097152}},
        {{l_xm, l_grow, l_main}, 3, {1, 1024, 1, 1024}},
        {{l_walk1, l_walk2, l_walk2, l_main}, 4, {10, 5000, 0, 0}},
        {{l_z, l_parse2, l_main}, 3, {2, 200, 2, 200}},
        {{l_xm, l_parse2, l_main}, 3, {1, 100, 1, 100}},
        {{l_semi, l_main}, 2, {0, 0, 0, 0}},
    };
    for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++)
        CHECK_INT_EQ(pprof_add_sample(p, s[i].stack, s[i].n, s[i].v, 4, NULL, 0), 0);
    return p;
}

/* The report `write` makes of sample type `type`, NUL-terminated (the caller frees it). */
static char *report(int (*write)(const struct pprof_profile *, size_t, struct pprof_buf *),
                    const struct pprof_profile *p, size_t type)
{
    struct pprof_buf b = {0};
    CHECK_INT_EQ(write(p, type, &b), 0);
    CHECK_INT_EQ(pprof_buf_append(&b, "", 1), 0);
    return (char *)b.data;
}

/* Checks that `write` prints `want` for sample type `type` of the demo profile. */
static void check_demo_report(int (*write)(const struct pprof_profile *, size_t,
                                           struct pprof_buf *),
                              size_t type, const char *want)
{
    struct pprof_profile *p = demo_profile();
    char *got = report(write, p, type);
    CHECK_STR_EQ(got, want);
    free(got);
    pprof_free(p);
}

static void top_matches_go_tool_pprof_for_bytes(void)
{
    static const char want[] =
        "Type: inuse_space\n"
        "Showing nodes accounting for 2049.29kB, 100% of 2049.29kB total\n"
        "      flat  flat%   sum%        cum   cum%\n"
        " 2049.10kB   100%   100%  2049.10kB   100%  xmalloc\n"
        "    0.20kB 0.0095%   100%     0.20kB 0.0095%  [libz.so.1]\n"
        "         0     0%   100%        1kB 0.049%  grow (inline)\n"
        "         0     0%   100%  2049.29kB   100%  main\n"
        "         0     0%   100%  2049.29kB   100%  parse\n";
    check_demo_report(pprof_write_top, 3, want);
}

static void top_matches_go_tool_pprof_for_counts_and_recursion(void)
{
    /* walk() recurses: its cum counts each sample once. */
    static const char want[] =
        "Type: alloc_objects\n"
        "Showing nodes accounting for 18, 100% of 18 total\n"
        "      flat  flat%   sum%        cum   cum%\n"
        "        10 55.56% 55.56%         10 55.56%  walk\n"
        "         6 33.33% 88.89%          6 33.33%  xmalloc\n"
        "         2 11.11%   100%          2 11.11%  [libz.so.1]\n"
        "         0     0%   100%          1  5.56%  grow (inline)\n"
        "         0     0%   100%         18   100%  main\n"
        "         0     0%   100%          8 44.44%  parse\n";
    check_demo_report(pprof_write_top, 0, want);
}

static void folded_stacks_are_root_first_merged_and_sorted(void)
{
    /* parse's two call sites of xmalloc are one line; the zero sample is left out. */
    static const char want[] = "main;parse;[libz.so.1] 200\n"
                               "main;parse;grow;xmalloc 1024\n"
                               "main;parse;xmalloc 2097252\n";
    check_demo_report(pprof_write_folded, 3, want);
}

static void folded_names_cannot_split_a_line_or_a_frame(void)
{
    uint64_t m_exe, m_lib;
    struct pprof_profile *p = new_heap(&m_exe, &m_lib);
    static const char *const odd[] = {"a;b\nc", NULL}, *const main_[] = {"main", NULL};
    uint64_t stack[] = {loc(p, m_exe, 0x1000, odd), loc(p, m_exe, 0x2000, main_)};
    int64_t v[] = {1, 2, 3, 4};
    struct pprof_label labels[] = {{"pid", "42"}, {"comm", "x;y"}};
    CHECK_INT_EQ(pprof_add_sample(p, stack, 2, v, 4, labels, 2), 0);
    char *got = report(pprof_write_folded, p, 1);
    CHECK_STR_EQ(got, "pid=42 comm=x:y;main;a:b?c 2\n");
    free(got);
    pprof_free(p);
}

static void reports_refuse_a_missing_sample_type(void)
{
    struct pprof_profile *p = demo_profile();
    struct pprof_buf b = {0};
    CHECK_INT_EQ(pprof_write_top(p, 4, &b), -EINVAL);
    CHECK_INT_EQ(pprof_write_folded(p, 4, &b), -EINVAL);
    CHECK_INT_EQ(b.len, 0);
    CHECK_INT_EQ(pprof_sample_type_index(p, "inuse_space"), 3);
    CHECK_INT_EQ(pprof_sample_type_index(p, "cpu"), -ENOENT);
    pprof_free(p);
}

static void an_empty_profile_has_a_header_and_no_lines(void)
{
    uint64_t m_exe, m_lib;
    struct pprof_profile *p = new_heap(&m_exe, &m_lib);
    char *top = report(pprof_write_top, p, 3);
    CHECK_STR_EQ(top, "Type: inuse_space\n"
                      "Showing nodes accounting for 0, 0% of 0 total\n"
                      "      flat  flat%   sum%        cum   cum%\n");
    char *folded = report(pprof_write_folded, p, 3);
    CHECK_STR_EQ(folded, "");
    free(top);
    free(folded);
    pprof_free(p);
}

/* With HEAPPROF_REPORTS_DUMP=DIR, writes the demo profile there for `go tool pprof`. */
static void dump_for_pprof(void)
{
    const char *dir = getenv("HEAPPROF_REPORTS_DUMP");
    if (!dir)
        return;
    struct pprof_profile *p = demo_profile();
    struct pprof_buf raw = {0}, gz = {0};
    char path[512];
    snprintf(path, sizeof(path), "%s/demo.pb.gz", dir);
    FILE *f = fopen(path, "wb");
    if (pprof_encode(p, &raw) == 0 && pprof_gzip(raw.data, raw.len, &gz) == 0 && f)
        fwrite(gz.data, 1, gz.len, f);
    if (f)
        fclose(f);
    pprof_buf_free(&raw);
    pprof_buf_free(&gz);
    pprof_free(p);
}

int main(void)
{
    dump_for_pprof();
    RUN_TEST(top_matches_go_tool_pprof_for_bytes);
    RUN_TEST(top_matches_go_tool_pprof_for_counts_and_recursion);
    RUN_TEST(folded_stacks_are_root_first_merged_and_sorted);
    RUN_TEST(folded_names_cannot_split_a_line_or_a_frame);
    RUN_TEST(reports_refuse_a_missing_sample_type);
    RUN_TEST(an_empty_profile_has_a_header_and_no_lines);
    return check_exit_code();
}
