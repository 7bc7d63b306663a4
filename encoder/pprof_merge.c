/*
 * pprof_merge.c - adds one profile's samples to another (see pprof.h):
 * the kept last profile of a process that exited, merged into the profile
 * of a service's running processes. Mappings are added afresh (two
 * processes' mappings are different things even at one address), functions
 * are shared where they are the same, and every added sample gets the
 * caller's labels, which tell whose it is.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pprof_profile.h"

/* Whether `a` and `b` have the same sample types, in the same order. */
static int same_sample_types(const struct pprof_profile *a, const struct pprof_profile *b)
{
    if (a->sample_types.n != b->sample_types.n)
        return 0;
    for (size_t i = 0; i < a->sample_types.n; i++) {
        const struct pprof_value_type *x = &a->sample_types.v[i], *y = &b->sample_types.v[i];
        if (strcmp(pprof_str(a, x->type), pprof_str(b, y->type)) != 0 ||
            strcmp(pprof_str(a, x->unit), pprof_str(b, y->unit)) != 0)
            return 0;
    }
    return 1;
}

/* Adds src's mappings to dst; ids[i] is the dst id of src mapping i + 1. */
static int merge_mappings(struct pprof_profile *dst, const struct pprof_profile *src,
                          uint64_t *ids)
{
    for (size_t i = 0; i < src->mappings.n; i++) {
        const struct pprof_mapping *m = &src->mappings.v[i];
        struct pprof_mapping_desc d = {
            .start = m->start, .limit = m->limit, .offset = m->offset,
            .filename = pprof_str(src, m->filename), .build_id = pprof_str(src, m->build_id),
            .has_functions = m->has_functions, .has_filenames = m->has_filenames,
            .has_line_numbers = m->has_line_numbers, .has_inline_frames = m->has_inline_frames,
        };
        int64_t id = pprof_add_mapping(dst, &d);
        if (id < 0)
            return (int)id;
        ids[i] = (uint64_t)id;
    }
    return 0;
}

/* Adds src's functions to dst; ids[i] is the dst id of src function i + 1. */
static int merge_functions(struct pprof_profile *dst, const struct pprof_profile *src,
                           uint64_t *ids)
{
    for (size_t i = 0; i < src->functions.n; i++) {
        const struct pprof_function *f = &src->functions.v[i];
        int64_t id = pprof_function_id(dst, pprof_str(src, f->name),
                                       pprof_str(src, f->system_name),
                                       pprof_str(src, f->filename), f->start_line);
        if (id < 0)
            return (int)id;
        ids[i] = (uint64_t)id;
    }
    return 0;
}

/* Adds src's locations to dst, with the mapping and function ids of dst. */
static int merge_locations(struct pprof_profile *dst, const struct pprof_profile *src,
                           const uint64_t *mapping_ids, const uint64_t *function_ids,
                           uint64_t *ids)
{
    struct pprof_line *lines = NULL;
    size_t cap = 0;
    int e = 0;
    for (size_t i = 0; i < src->locations.n && e == 0; i++) {
        const struct pprof_location *l = &src->locations.v[i];
        if (l->n_lines > cap) {
            free(lines);
            cap = l->n_lines;
            lines = calloc(cap, sizeof(*lines));
            if (!lines)
                return -ENOMEM;
        }
        for (size_t k = 0; k < l->n_lines; k++) {
            const struct pprof_line *in = &src->lines.v[l->first_line + k];
            lines[k] = (struct pprof_line){.function_id = function_ids[in->function_id - 1],
                                           .line = in->line};
        }
        uint64_t mapping = l->mapping_id ? mapping_ids[l->mapping_id - 1] : 0;
        int64_t id = pprof_location_id(dst, mapping, l->address, lines, l->n_lines);
        if (id < 0)
            e = (int)id;
        else
            ids[i] = (uint64_t)id;
    }
    free(lines);
    return e;
}

/* Adds one sample of src to dst: its labels, but those of `labels` replaced. */
static int merge_sample(struct pprof_profile *dst, const struct pprof_profile *src,
                        const struct pprof_sample *s, const uint64_t *location_ids,
                        uint64_t *locs, struct pprof_label *all, const struct pprof_label *labels,
                        size_t n_labels)
{
    for (size_t k = 0; k < s->n_locations; k++)
        locs[k] = location_ids[src->sample_locations.v[s->first_location + k] - 1];
    size_t n = 0;
    for (size_t k = 0; k < s->n_labels; k++) {
        const struct pprof_label_ix *l = &src->sample_labels.v[s->first_label + k];
        const char *key = pprof_str(src, l->key);
        int replaced = 0;
        for (size_t j = 0; j < n_labels && !replaced; j++)
            replaced = strcmp(labels[j].key, key) == 0;
        if (!replaced)
            all[n++] = (struct pprof_label){.key = key, .str = pprof_str(src, l->str)};
    }
    for (size_t j = 0; j < n_labels; j++)
        all[n++] = labels[j];
    return pprof_add_sample(dst, locs, s->n_locations, &src->sample_values.v[s->first_value],
                            src->sample_types.n, all, n);
}

int pprof_merge(struct pprof_profile *dst, const struct pprof_profile *src,
                const struct pprof_label *labels, size_t n_labels)
{
    if (!same_sample_types(dst, src))
        return -EINVAL;
    size_t max_labels = 0, max_locations = 0;
    for (size_t i = 0; i < src->samples.n; i++) {
        if (src->samples.v[i].n_labels > max_labels)
            max_labels = src->samples.v[i].n_labels;
        if (src->samples.v[i].n_locations > max_locations)
            max_locations = src->samples.v[i].n_locations;
    }
    uint64_t *mapping_ids = calloc(src->mappings.n + 1, sizeof(*mapping_ids));
    uint64_t *function_ids = calloc(src->functions.n + 1, sizeof(*function_ids));
    uint64_t *location_ids = calloc(src->locations.n + 1, sizeof(*location_ids));
    uint64_t *locs = calloc(max_locations + 1, sizeof(*locs));
    struct pprof_label *all = calloc(max_labels + n_labels + 1, sizeof(*all));
    int e = mapping_ids && function_ids && location_ids && locs && all ? 0 : -ENOMEM;
    if (e == 0)
        e = merge_mappings(dst, src, mapping_ids);
    if (e == 0)
        e = merge_functions(dst, src, function_ids);
    if (e == 0)
        e = merge_locations(dst, src, mapping_ids, function_ids, location_ids);
    for (size_t i = 0; i < src->samples.n && e == 0; i++)
        e = merge_sample(dst, src, &src->samples.v[i], location_ids, locs, all, labels, n_labels);
    free(mapping_ids);
    free(function_ids);
    free(location_ids);
    free(locs);
    free(all);
    return e;
}
