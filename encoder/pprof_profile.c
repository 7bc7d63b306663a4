/*
 * pprof_profile.c - building the profile model: interned strings, mappings,
 * functions, locations and samples.
 *
 * Strings, functions and locations are deduplicated through hash indexes as
 * they are added, so a profile with many samples through the same frames
 * stays small, and every string the encoder needs is already in the table
 * when it runs (encoding takes a const profile and cannot add any).
 * A failed call leaves the profile as it was, apart from unused strings.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "array_grow.h"
#include "pprof_profile.h"

/*
 * Entries of one kind the indexes can address: positions live in 32-bit
 * slots to keep the indexes small; no real profile has billions of frames.
 */
#define PPROF_MAX_ENTRIES (UINT32_MAX - 1)
/* Slots of an index at its first use; it doubles when half full. */
#define PPROF_INDEX_MIN_CAP 64
/* Elements of an array at its first use. */
#define PPROF_ARRAY_MIN_CAP 16

/* A slot of an index: the key's hash and its array position plus one (0: empty). */
struct pprof_slot {
    uint32_t hash;
    uint32_t id;
};

/* Whether the entry at array position `pos` has key `key`. */
typedef int (*pprof_key_eq)(const struct pprof_profile *p, size_t pos, const void *key);

/* Makes room for `extra` more elements in a PPROF_ARRAY; evaluates to 0 or -ENOMEM. */
#define ARRAY_RESERVE(a, extra)                                                                    \
    ({                                                                                             \
        int err_ = 0;                                                                              \
        if ((extra) > (a).cap - (a).n) {                                                           \
            size_t cap_ = (a).cap;                                                                 \
            void *v_ = (extra) > SIZE_MAX - (a).n                                                  \
                           ? NULL                                                                  \
                           : array_grow((a).v, &cap_, (a).n + (extra), sizeof(*(a).v),             \
                                        PPROF_ARRAY_MIN_CAP);                                      \
            if (v_) {                                                                              \
                (a).v = v_;                                                                        \
                (a).cap = cap_;                                                                    \
            } else {                                                                               \
                err_ = -ENOMEM;                                                                    \
            }                                                                                      \
        }                                                                                          \
        err_;                                                                                      \
    })

/* Folds a 64-bit hash into the 32 bits a slot keeps. */
static uint32_t fold(uint64_t h)
{
    return (uint32_t)(h ^ (h >> 32));
}

/* FNV-1a of a string: simple, and good enough for symbol names and paths. */
static uint32_t hash_string(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ULL;
    return fold(h);
}

/* A hash of two integers, mixed (splitmix64's finalizer) so nearby addresses spread out. */
static uint32_t hash_pair(uint64_t a, uint64_t b)
{
    uint64_t h = a * 0x9e3779b97f4a7c15ULL + b;
    h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ULL;
    h = (h ^ (h >> 27)) * 0x94d049bb133111ebULL;
    return fold(h ^ (h >> 31));
}

/* Makes sure one more key fits while keeping the index at most half full. */
static int index_reserve(struct pprof_index *ix)
{
    if ((ix->used + 1) * 2 <= ix->cap)
        return 0;
    size_t cap = ix->cap ? ix->cap * 2 : PPROF_INDEX_MIN_CAP;
    struct pprof_slot *slots = calloc(cap, sizeof(*slots));
    if (!slots)
        return -ENOMEM;
    for (size_t i = 0; i < ix->cap; i++) {
        struct pprof_slot s = ix->slots[i];
        if (!s.id)
            continue;
        size_t j = s.hash & (cap - 1);
        while (slots[j].id)
            j = (j + 1) & (cap - 1);
        slots[j] = s;
    }
    free(ix->slots);
    ix->slots = slots;
    ix->cap = cap;
    return 0;
}

/* The slot holding `key`, or the empty slot where it goes; index_reserve() first. */
static struct pprof_slot *index_find(const struct pprof_index *ix, uint32_t hash, pprof_key_eq eq,
                                     const struct pprof_profile *p, const void *key)
{
    size_t mask = ix->cap - 1;
    for (size_t i = hash & mask;; i = (i + 1) & mask) {
        struct pprof_slot *s = &ix->slots[i];
        if (!s->id || (s->hash == hash && eq(p, s->id - 1, key)))
            return s;
    }
}

/* Fills an empty slot found by index_find() with array position `pos`. */
static void index_fill(struct pprof_index *ix, struct pprof_slot *s, uint32_t hash, size_t pos)
{
    s->hash = hash;
    s->id = (uint32_t)(pos + 1);
    ix->used++;
}

/* Whether string `pos` of the table is `key`. */
static int string_eq(const struct pprof_profile *p, size_t pos, const void *key)
{
    return strcmp(p->strings.v[pos], key) == 0;
}

/* The index of `s` in the string table, adding a copy on first use; or a negative errno. */
static int64_t intern(struct pprof_profile *p, const char *s)
{
    if (!s)
        return -EINVAL;
    uint32_t hash = hash_string(s);
    int err = index_reserve(&p->string_index);
    if (err)
        return err;
    struct pprof_slot *slot = index_find(&p->string_index, hash, string_eq, p, s);
    if (slot->id)
        return slot->id - 1;
    if (p->strings.n >= PPROF_MAX_ENTRIES)
        return -E2BIG;
    if ((err = ARRAY_RESERVE(p->strings, 1)))
        return err;
    char *copy = strdup(s);
    if (!copy)
        return -ENOMEM;
    size_t pos = p->strings.n++;
    p->strings.v[pos] = copy;
    index_fill(&p->string_index, slot, hash, pos);
    return (int64_t)pos;
}

struct pprof_profile *pprof_new(void)
{
    struct pprof_profile *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    /* profile.proto requires string_table[0] == "". */
    if (intern(p, "") != 0) {
        pprof_free(p);
        return NULL;
    }
    return p;
}

void pprof_free(struct pprof_profile *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->strings.n; i++)
        free(p->strings.v[i]);
    free(p->strings.v);
    free(p->string_index.slots);
    free(p->sample_types.v);
    free(p->comments.v);
    free(p->mappings.v);
    free(p->functions.v);
    free(p->function_index.slots);
    free(p->locations.v);
    free(p->location_index.slots);
    free(p->lines.v);
    free(p->samples.v);
    free(p->sample_locations.v);
    free(p->sample_values.v);
    free(p->sample_labels.v);
    free(p);
}

/* Interns a type and a unit as a ValueType. */
static int value_type(struct pprof_profile *p, const char *type, const char *unit,
                      struct pprof_value_type *vt)
{
    int64_t t = intern(p, type);
    if (t < 0)
        return (int)t;
    int64_t u = intern(p, unit);
    if (u < 0)
        return (int)u;
    vt->type = t;
    vt->unit = u;
    return 0;
}

int pprof_add_sample_type(struct pprof_profile *p, const char *type, const char *unit)
{
    /* Samples already added have one value per type as it was. */
    if (p->samples.n)
        return -EINVAL;
    struct pprof_value_type vt;
    int err = value_type(p, type, unit, &vt);
    if (err || (err = ARRAY_RESERVE(p->sample_types, 1)))
        return err;
    p->sample_types.v[p->sample_types.n++] = vt;
    return 0;
}

int pprof_set_period(struct pprof_profile *p, const char *type, const char *unit, int64_t period)
{
    if (period < 0)
        return -EINVAL;
    int err = value_type(p, type, unit, &p->period_type);
    if (err)
        return err;
    p->period = period;
    return 0;
}

int pprof_set_default_sample_type(struct pprof_profile *p, const char *type)
{
    /* A name that is no sample type would make viewers fall back silently. */
    for (size_t i = 0; type && i < p->sample_types.n; i++) {
        if (strcmp(pprof_str(p, p->sample_types.v[i].type), type) == 0) {
            p->default_sample_type = p->sample_types.v[i].type;
            return 0;
        }
    }
    return -EINVAL;
}

int pprof_sample_type_index(const struct pprof_profile *p, const char *type)
{
    for (size_t i = 0; p && type && i < p->sample_types.n; i++)
        if (strcmp(pprof_str(p, p->sample_types.v[i].type), type) == 0)
            return (int)i;
    return -ENOENT;
}

void pprof_set_time(struct pprof_profile *p, int64_t time_nanos, int64_t duration_nanos)
{
    p->time_nanos = time_nanos;
    p->duration_nanos = duration_nanos;
}

int pprof_add_comment(struct pprof_profile *p, const char *comment)
{
    int64_t s = intern(p, comment);
    if (s < 0)
        return (int)s;
    int err = ARRAY_RESERVE(p->comments, 1);
    if (err)
        return err;
    p->comments.v[p->comments.n++] = s;
    return 0;
}

int64_t pprof_add_mapping(struct pprof_profile *p, const struct pprof_mapping_desc *m)
{
    if (!m || m->limit < m->start)
        return -EINVAL;
    if (p->mappings.n >= PPROF_MAX_ENTRIES)
        return -E2BIG;
    int64_t filename = intern(p, m->filename);
    if (filename < 0)
        return filename;
    int64_t build_id = intern(p, m->build_id);
    if (build_id < 0)
        return build_id;
    int err = ARRAY_RESERVE(p->mappings, 1);
    if (err)
        return err;
    p->mappings.v[p->mappings.n++] = (struct pprof_mapping){
        .start = m->start,
        .limit = m->limit,
        .offset = m->offset,
        .filename = filename,
        .build_id = build_id,
        .has_functions = !!m->has_functions,
        .has_filenames = !!m->has_filenames,
        .has_line_numbers = !!m->has_line_numbers,
        .has_inline_frames = !!m->has_inline_frames,
    };
    return (int64_t)p->mappings.n;
}

int pprof_set_mapping_flags(struct pprof_profile *p, uint64_t mapping_id, int has_functions,
                            int has_filenames, int has_line_numbers, int has_inline_frames)
{
    if (mapping_id == 0 || mapping_id > p->mappings.n)
        return -EINVAL;
    struct pprof_mapping *m = &p->mappings.v[mapping_id - 1];
    m->has_functions = !!has_functions;
    m->has_filenames = !!has_filenames;
    m->has_line_numbers = !!has_line_numbers;
    m->has_inline_frames = !!has_inline_frames;
    return 0;
}

/* A function's identity: its system name and file, as string indexes. */
struct function_key {
    int64_t system_name, filename;
};

/* Whether function `pos` has the key `key` (a struct function_key). */
static int function_eq(const struct pprof_profile *p, size_t pos, const void *key)
{
    const struct function_key *k = key;
    const struct pprof_function *f = &p->functions.v[pos];
    return f->system_name == k->system_name && f->filename == k->filename;
}

int64_t pprof_function_id(struct pprof_profile *p, const char *name, const char *system_name,
                          const char *filename, int64_t start_line)
{
    if (!name)
        return -EINVAL;
    struct function_key key = {intern(p, system_name), intern(p, filename)};
    if (key.system_name < 0)
        return key.system_name;
    if (key.filename < 0)
        return key.filename;
    uint32_t hash = hash_pair((uint64_t)key.system_name, (uint64_t)key.filename);
    int err = index_reserve(&p->function_index);
    if (err)
        return err;
    struct pprof_slot *slot = index_find(&p->function_index, hash, function_eq, p, &key);
    if (slot->id)
        return slot->id;
    /* Only a new function needs its display name in the table. */
    int64_t display = intern(p, name);
    if (display < 0)
        return display;
    if (p->functions.n >= PPROF_MAX_ENTRIES)
        return -E2BIG;
    if ((err = ARRAY_RESERVE(p->functions, 1)))
        return err;
    size_t pos = p->functions.n++;
    p->functions.v[pos] =
        (struct pprof_function){display, key.system_name, key.filename, start_line};
    index_fill(&p->function_index, slot, hash, pos);
    return (int64_t)pos + 1;
}

/* A location's identity. */
struct location_key {
    uint64_t mapping_id, address;
};

/* Whether location `pos` has the key `key` (a struct location_key). */
static int location_eq(const struct pprof_profile *p, size_t pos, const void *key)
{
    const struct location_key *k = key;
    const struct pprof_location *l = &p->locations.v[pos];
    return l->mapping_id == k->mapping_id && l->address == k->address;
}

int64_t pprof_location_id(struct pprof_profile *p, uint64_t mapping_id, uint64_t address,
                          const struct pprof_line *lines, size_t n_lines)
{
    if (mapping_id > p->mappings.n || (n_lines && !lines))
        return -EINVAL;
    struct location_key key = {mapping_id, address};
    uint32_t hash = hash_pair(mapping_id, address);
    int err = index_reserve(&p->location_index);
    if (err)
        return err;
    struct pprof_slot *slot = index_find(&p->location_index, hash, location_eq, p, &key);
    if (slot->id)
        return slot->id;
    for (size_t i = 0; i < n_lines; i++)
        if (lines[i].function_id == 0 || lines[i].function_id > p->functions.n)
            return -EINVAL;
    if (p->locations.n >= PPROF_MAX_ENTRIES)
        return -E2BIG;
    if ((err = ARRAY_RESERVE(p->locations, 1)) || (err = ARRAY_RESERVE(p->lines, n_lines)))
        return err;
    if (n_lines)
        memcpy(p->lines.v + p->lines.n, lines, n_lines * sizeof(*lines));
    size_t pos = p->locations.n++;
    p->locations.v[pos] = (struct pprof_location){mapping_id, address, p->lines.n, n_lines};
    p->lines.n += n_lines;
    index_fill(&p->location_index, slot, hash, pos);
    return (int64_t)pos + 1;
}

int pprof_add_sample(struct pprof_profile *p, const uint64_t *location_ids, size_t n_locations,
                     const int64_t *values, size_t n_values, const struct pprof_label *labels,
                     size_t n_labels)
{
    if (n_values == 0 || n_values != p->sample_types.n || !values)
        return -EINVAL;
    if ((n_locations && !location_ids) || (n_labels && !labels))
        return -EINVAL;
    for (size_t i = 0; i < n_locations; i++)
        if (location_ids[i] == 0 || location_ids[i] > p->locations.n)
            return -EINVAL;
    int err;
    if ((err = ARRAY_RESERVE(p->samples, 1)) ||
        (err = ARRAY_RESERVE(p->sample_locations, n_locations)) ||
        (err = ARRAY_RESERVE(p->sample_values, n_values)) ||
        (err = ARRAY_RESERVE(p->sample_labels, n_labels)))
        return err;
    /*
     * Labels go into the reserved room first; `n` moves only once all
     * succeeded. Indexed, not `v + n`: with no labels yet `v` is NULL, and
     * NULL + 0 is undefined in C (UBSan, found by tests/fuzz/fuzz_encoder).
     */
    for (size_t i = 0; i < n_labels; i++) {
        struct pprof_label_ix *lab = &p->sample_labels.v[p->sample_labels.n + i];
        lab->key = intern(p, labels[i].key);
        if (lab->key < 0)
            return (int)lab->key;
        lab->str = intern(p, labels[i].str);
        if (lab->str < 0)
            return (int)lab->str;
    }
    if (n_locations)
        memcpy(p->sample_locations.v + p->sample_locations.n, location_ids,
               n_locations * sizeof(*location_ids));
    memcpy(p->sample_values.v + p->sample_values.n, values, n_values * sizeof(*values));
    p->samples.v[p->samples.n++] = (struct pprof_sample){
        .first_location = p->sample_locations.n,
        .n_locations = n_locations,
        .first_value = p->sample_values.n,
        .first_label = p->sample_labels.n,
        .n_labels = n_labels,
    };
    p->sample_locations.n += n_locations;
    p->sample_values.n += n_values;
    p->sample_labels.n += n_labels;
    return 0;
}

size_t pprof_sample_count(const struct pprof_profile *p)
{
    return p->samples.n;
}
