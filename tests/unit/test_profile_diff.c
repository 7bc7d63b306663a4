/*
 * test_profile_diff.c - a profile minus a base (daemon/profile/profile_diff.c)
 * and the store of bases (snapshots.c): the difference per stack is exact,
 * the base's samples are negated and labelled pprof::base for pprof, a
 * base of other sample types or of garbage bytes is refused (every prefix
 * of a real profile and every single-byte change of it: an answer or an
 * error, never a crash, under ASan), and the store keeps the newest
 * SNAPSHOT_MAX.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "pprof.h"
#include "pprof_decode.h"
#include "profile_diff.h"
#include "snapshots.h"

/* A profile of two sample types (objects, bytes) with stacks main->leaf[i]
 * holding bytes[i] (objects: one per stack). */
static struct pprof_profile *heap(const char *const *leaves, const int64_t *bytes, size_t n,
                                  const char *type)
{
    struct pprof_profile *p = pprof_new();
    CHECK(p != NULL);
    CHECK_INT_EQ(pprof_add_sample_type(p, "inuse_objects", "count"), 0);
    CHECK_INT_EQ(pprof_add_sample_type(p, type, "bytes"), 0);
    CHECK_INT_EQ(pprof_set_period(p, "space", "bytes", 1), 0);
    struct pprof_mapping_desc m = {.start = 0x1000, .limit = 0x9000, .filename = "/bin/x",
                                   .build_id = "abcd", .has_functions = 1};
    int64_t map = pprof_add_mapping(p, &m);
    struct pprof_line main_line = {(uint64_t)pprof_function_id(p, "main", "main", "x.c", 1), 5};
    uint64_t main_loc = (uint64_t)pprof_location_id(p, (uint64_t)map, 0x1100, &main_line, 1);
    for (size_t i = 0; i < n; i++) {
        struct pprof_line l = {(uint64_t)pprof_function_id(p, leaves[i], leaves[i], "x.c", 9), 9};
        uint64_t locs[2] = {(uint64_t)pprof_location_id(p, (uint64_t)map, 0x1200 + i * 16, &l, 1),
                            main_loc};
        int64_t values[2] = {1, bytes[i]};
        CHECK_INT_EQ(pprof_add_sample(p, locs, 2, values, 2, NULL, 0), 0);
    }
    return p;
}

/* `p` encoded (not gzipped). */
static struct pprof_buf encoded(const struct pprof_profile *p)
{
    struct pprof_buf b = {0};
    CHECK_INT_EQ(pprof_encode(p, &b), 0);
    return b;
}

static void the_folded_difference_is_exact_per_stack(void)
{
    const char *cur_leaves[] = {"grows", "stays"}, *base_leaves[] = {"grows", "stays", "goes"};
    int64_t cur_bytes[] = {3000, 700}, base_bytes[] = {1000, 700, 50};
    struct pprof_profile *cur = heap(cur_leaves, cur_bytes, 2, "inuse_space");
    struct pprof_profile *base = heap(base_leaves, base_bytes, 3, "inuse_space");
    struct pprof_buf b = encoded(base), gz = {0}, folded = {0};
    CHECK_INT_EQ(pprof_gzip(b.data, b.len, &gz), 0);
    struct pprof_profile *d = NULL;
    char err[200] = "";
    CHECK_INT_EQ(profile_diff(cur, gz.data, gz.len, false, &d, err, sizeof(err)), 0);
    CHECK(d != NULL);
    if (d)
        CHECK_INT_EQ(pprof_write_folded(d, 1, &folded), 0);
    CHECK_INT_EQ(pprof_buf_append(&folded, "", 1), 0);
    /* "goes" is all shrinkage; "stays" cancels out (the folded writer
     * sums a stack's samples and keeps the line: the page skips zeros). */
    CHECK_STR_EQ((const char *)folded.data, "main;goes -50\nmain;grows 2000\nmain;stays 0\n");
    pprof_free(d);
    pprof_free(cur);
    pprof_free(base);
    pprof_buf_free(&b);
    pprof_buf_free(&gz);
    pprof_buf_free(&folded);
}

static void the_base_is_negated_and_labelled_for_pprof(void)
{
    const char *leaves[] = {"a"};
    int64_t cur_bytes[] = {300}, base_bytes[] = {100};
    struct pprof_profile *cur = heap(leaves, cur_bytes, 1, "inuse_space");
    struct pprof_profile *base = heap(leaves, base_bytes, 1, "inuse_space");
    struct pprof_buf b = encoded(base), out = {0};
    struct pprof_profile *d = NULL;
    char err[200] = "";
    CHECK_INT_EQ(profile_diff(cur, b.data, b.len, true, &d, err, sizeof(err)), 0);
    struct pprof_decoded dec = {0};
    if (d) {
        out = encoded(d);
        CHECK_INT_EQ(pprof_decode(out.data, out.len, &dec), 0);
    }
    CHECK_INT_EQ(dec.n_samples, 2);
    for (size_t i = 0; i < dec.n_samples; i++) {
        const struct pprof_decoded_sample *s = &dec.samples[i];
        int labelled = s->n_labels == 1 &&
                       strcmp(pprof_decoded_str(&dec, s->labels[0].key), "pprof::base") == 0 &&
                       strcmp(pprof_decoded_str(&dec, s->labels[0].str), "true") == 0;
        CHECK_INT_EQ(labelled, s->values[1] < 0);
        CHECK_INT_EQ(s->values[1], labelled ? -100 : 300);
        CHECK_INT_EQ(s->values[0], labelled ? -1 : 1);
    }
    CHECK_INT_EQ(dec.period, 1);
    pprof_decoded_free(&dec);
    pprof_free(d);
    pprof_free(cur);
    pprof_free(base);
    pprof_buf_free(&b);
    pprof_buf_free(&out);
}

static void a_base_of_other_sample_types_is_refused(void)
{
    const char *leaves[] = {"a"};
    int64_t bytes[] = {100};
    struct pprof_profile *cur = heap(leaves, bytes, 1, "inuse_space");
    struct pprof_profile *other = pprof_new();
    CHECK_INT_EQ(pprof_add_sample_type(other, "cpu", "nanoseconds"), 0);
    struct pprof_buf b = encoded(other);
    struct pprof_profile *d = NULL;
    char err[200] = "";
    CHECK_INT_EQ(profile_diff(cur, b.data, b.len, true, &d, err, sizeof(err)), -EBADMSG);
    CHECK(strstr(err, "none of this profile's sample types") != NULL);
    CHECK(d == NULL);
    CHECK_INT_EQ(profile_diff_check_base((const uint8_t *)"", 0, err, sizeof(err)), -EBADMSG);
    pprof_free(cur);
    pprof_free(other);
    pprof_buf_free(&b);
}

static void any_bytes_give_an_answer_or_an_error(void)
{
    const char *leaves[] = {"a", "b", "c"};
    int64_t bytes[] = {100, 200, 300};
    struct pprof_profile *cur = heap(leaves, bytes, 3, "inuse_space");
    struct pprof_buf b = encoded(cur), gz = {0};
    CHECK_INT_EQ(pprof_gzip(b.data, b.len, &gz), 0);
    size_t answers = 0;
    char err[200];
    /* Every prefix (truncated uploads), raw and gzipped. */
    for (int z = 0; z < 2; z++) {
        const struct pprof_buf *src = z ? &gz : &b;
        for (size_t n = 0; n <= src->len; n++) {
            struct pprof_profile *d = NULL;
            int e = profile_diff(cur, src->data, n, true, &d, err, sizeof(err));
            CHECK(e == 0 || e == -EBADMSG);
            answers += e == 0;
            pprof_free(d);
        }
    }
    /* Every byte of the raw encoding changed to 0xff. */
    uint8_t *copy = malloc(b.len);
    for (size_t i = 0; copy && i < b.len; i++) {
        memcpy(copy, b.data, b.len);
        copy[i] = 0xff;
        struct pprof_profile *d = NULL;
        int e = profile_diff(cur, copy, b.len, false, &d, err, sizeof(err));
        CHECK(e == 0 || e == -EBADMSG);
        pprof_free(d);
    }
    free(copy);
    CHECK(answers >= 2); /* the whole profile, raw and gzipped */
    pprof_free(cur);
    pprof_buf_free(&b);
    pprof_buf_free(&gz);
}

static void the_store_keeps_the_newest_snapshots(void)
{
    const char *leaves[] = {"a"};
    int64_t bytes[] = {100};
    struct pprof_profile *p = heap(leaves, bytes, 1, "inuse_space");
    struct snapshots s;
    snapshots_init(&s);
    char ids[SNAPSHOT_MAX + 8][SNAPSHOT_ID_LEN + 1];
    for (int i = 0; i < SNAPSHOT_MAX + 8; i++)
        CHECK_INT_EQ(snapshots_put(&s, 100 + i, 7, p, ids[i]), 0);
    int kept = 0;
    for (int i = 0; i < SNAPSHOT_MAX + 8; i++) {
        pid_t pid = 0;
        uint64_t start = 0;
        int64_t at = 0;
        struct pprof_buf b = {0};
        int e = snapshots_get(&s, ids[i], &pid, &start, &at, &b);
        CHECK_INT_EQ(e, i < 8 ? -ENOENT : 0);
        if (e == 0) {
            kept++;
            CHECK_INT_EQ(pid, 100 + i);
            CHECK_INT_EQ(start, 7);
            CHECK(b.len > 0);
        }
        pprof_buf_free(&b);
    }
    CHECK_INT_EQ(kept, SNAPSHOT_MAX);
    snapshots_destroy(&s);
    pprof_free(p);
}

int main(void)
{
    RUN_TEST(the_folded_difference_is_exact_per_stack);
    RUN_TEST(the_base_is_negated_and_labelled_for_pprof);
    RUN_TEST(a_base_of_other_sample_types_is_refused);
    RUN_TEST(any_bytes_give_an_answer_or_an_error);
    RUN_TEST(the_store_keeps_the_newest_snapshots);
    return check_exit_code();
}
