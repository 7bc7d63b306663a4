/*
 * test_pprof_merge.c - one profile's samples added to another
 * (encoder/pprof_merge.c): values, stacks and names arrive as they were,
 * each sample labelled as asked (a label of the same key replaced), two
 * processes' frames at one address stay apart, and profiles of other
 * sample types are refused untouched.
 */
#include <errno.h>
#include <string.h>

#include "check.h"
#include "pprof.h"
#include "pprof_profile.h"

/* A heap-shaped profile (two sample types) with one stack: leaf `leaf`
 * called by main, in a mapping of `file`, values {objects, bytes}. */
static struct pprof_profile *one_stack(const char *file, const char *leaf, int64_t objects,
                                       int64_t bytes, const char *label_key)
{
    struct pprof_profile *p = pprof_new();
    CHECK(p != NULL);
    CHECK_INT_EQ(pprof_add_sample_type(p, "inuse_objects", "count"), 0);
    CHECK_INT_EQ(pprof_add_sample_type(p, "inuse_space", "bytes"), 0);
    struct pprof_mapping_desc m = {.start = 0x1000, .limit = 0x9000, .filename = file,
                                   .build_id = "abcd", .has_functions = 1};
    int64_t map = pprof_add_mapping(p, &m);
    struct pprof_line leaf_line = {(uint64_t)pprof_function_id(p, leaf, leaf, "x.c", 1), 10};
    struct pprof_line main_line = {(uint64_t)pprof_function_id(p, "main", "main", "x.c", 20),
                                   25};
    uint64_t locs[2] = {(uint64_t)pprof_location_id(p, (uint64_t)map, 0x1100, &leaf_line, 1),
                        (uint64_t)pprof_location_id(p, (uint64_t)map, 0x1200, &main_line, 1)};
    int64_t values[2] = {objects, bytes};
    struct pprof_label label = {label_key, "old"};
    CHECK_INT_EQ(pprof_add_sample(p, locs, 2, values, 2, &label, label_key ? 1 : 0), 0);
    return p;
}

/* The value of label `key` on sample `i` of `p`, or NULL. */
static const char *label_of(const struct pprof_profile *p, size_t i, const char *key)
{
    const struct pprof_sample *s = &p->samples.v[i];
    for (size_t k = 0; k < s->n_labels; k++) {
        const struct pprof_label_ix *l = &p->sample_labels.v[s->first_label + k];
        if (strcmp(pprof_str(p, l->key), key) == 0)
            return pprof_str(p, l->str);
    }
    return NULL;
}

/* The function name of frame `k` of sample `i`. */
static const char *frame_name(const struct pprof_profile *p, size_t i, size_t k)
{
    const struct pprof_sample *s = &p->samples.v[i];
    const struct pprof_location *l = &p->locations.v[p->sample_locations.v[s->first_location + k] - 1];
    const struct pprof_function *f = &p->functions.v[p->lines.v[l->first_line].function_id - 1];
    return pprof_str(p, f->name);
}

static void merged_samples_keep_their_values_stacks_and_names_and_get_the_labels(void)
{
    struct pprof_profile *dst = one_stack("/usr/bin/a", "alloc_a", 3, 300, NULL);
    struct pprof_profile *src = one_stack("/usr/bin/b", "alloc_b", 5, 500, "pid");
    struct pprof_label labels[2] = {{"pid", "42"}, {"comm", "b"}};
    CHECK_INT_EQ(pprof_merge(dst, src, labels, 2), 0);
    CHECK_INT_EQ(pprof_sample_count(dst), 2);
    CHECK_INT_EQ(dst->mappings.n, 2);
    CHECK_STR_EQ(pprof_str(dst, dst->mappings.v[1].filename), "/usr/bin/b");
    CHECK_INT_EQ(dst->sample_values.v[dst->samples.v[1].first_value], 5);
    CHECK_INT_EQ(dst->sample_values.v[dst->samples.v[1].first_value + 1], 500);
    CHECK_STR_EQ(frame_name(dst, 1, 0), "alloc_b");
    CHECK_STR_EQ(frame_name(dst, 1, 1), "main");
    CHECK_STR_EQ(label_of(dst, 1, "pid"), "42"); /* "old" replaced */
    CHECK_STR_EQ(label_of(dst, 1, "comm"), "b");
    CHECK_INT_EQ(dst->samples.v[1].n_labels, 2);
    CHECK(label_of(dst, 0, "pid") == NULL); /* the samples there before are untouched */
    /* `main` is one function in both: shared, not added twice. */
    CHECK_INT_EQ(dst->functions.n, 3);
    pprof_free(src);
    pprof_free(dst);
}

static void two_processes_frames_at_one_address_stay_apart(void)
{
    struct pprof_profile *dst = one_stack("/usr/bin/a", "alloc_a", 1, 1, NULL);
    struct pprof_profile *src = one_stack("/usr/bin/a", "alloc_a", 2, 2, NULL);
    struct pprof_label pid = {"pid", "7"};
    CHECK_INT_EQ(pprof_merge(dst, src, &pid, 1), 0);
    CHECK_INT_EQ(dst->locations.n, 4); /* same addresses, other mapping */
    CHECK(dst->sample_locations.v[dst->samples.v[0].first_location] !=
          dst->sample_locations.v[dst->samples.v[1].first_location]);
    struct pprof_buf raw = {0};
    CHECK_INT_EQ(pprof_encode(dst, &raw), 0); /* still a profile the encoder takes */
    CHECK(raw.len > 0);
    pprof_buf_free(&raw);
    pprof_free(src);
    pprof_free(dst);
}

static void other_sample_types_are_refused_and_leave_the_profile_as_it_was(void)
{
    struct pprof_profile *dst = one_stack("/usr/bin/a", "alloc_a", 1, 1, NULL);
    struct pprof_profile *cpu = pprof_new();
    CHECK_INT_EQ(pprof_add_sample_type(cpu, "samples", "count"), 0);
    CHECK_INT_EQ(pprof_add_sample_type(cpu, "cpu", "nanoseconds"), 0);
    CHECK_INT_EQ(pprof_merge(dst, cpu, NULL, 0), -EINVAL);
    CHECK_INT_EQ(pprof_sample_count(dst), 1);
    CHECK_INT_EQ(dst->mappings.n, 1);
    struct pprof_profile *empty = pprof_new();
    CHECK_INT_EQ(pprof_merge(dst, empty, NULL, 0), -EINVAL); /* no sample types at all */
    pprof_free(empty);
    pprof_free(cpu);
    pprof_free(dst);
}

int main(void)
{
    RUN_TEST(merged_samples_keep_their_values_stacks_and_names_and_get_the_labels);
    RUN_TEST(two_processes_frames_at_one_address_stay_apart);
    RUN_TEST(other_sample_types_are_refused_and_leave_the_profile_as_it_was);
    return check_exit_code();
}
