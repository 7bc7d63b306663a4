/*
 * pprof.h - an in-memory pprof profile and its encodings.
 *
 * The profile model (string table, mappings, functions, locations, samples)
 * and the ways out of it: profile.proto (hand-written protobuf, see
 * https://github.com/google/pprof/blob/main/proto/profile.proto), gzip of
 * any buffer, Go's legacy `debug=1` heap text, a top table and collapsed
 * stacks. Nothing here knows about BPF, processes or HTTP, so the encoder
 * can be tested on its own.
 *
 * Ownership: a `struct pprof_profile` owns every string and array it was
 * given (they are copied in). A `struct pprof_buf` owns its `data`; free it
 * with pprof_buf_free(). Functions return 0 or a negative errno, or an id
 * (>= 1) where they say so; ids are never 0, as profile.proto reserves 0.
 * A NULL string argument is -EINVAL: pass "" for an unknown one.
 */
#ifndef HEAPPROF_PPROF_H
#define HEAPPROF_PPROF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

/* A growable byte buffer. */
struct pprof_buf {
    uint8_t *data;
    size_t len;
    size_t cap;
};

/* Appends `n` bytes; returns 0 or -ENOMEM. */
int pprof_buf_append(struct pprof_buf *b, const void *data, size_t n);
/* Appends printf-formatted text (no NUL); returns 0, -ENOMEM or -EINVAL
 * (a format vsnprintf refuses). The encoder's text forms (debug=1, top,
 * folded) write with it; the daemon's own pages use its strbuf (base/). */
__attribute__((format(printf, 2, 3))) int pprof_buf_printf(struct pprof_buf *b,
                                                           const char *fmt, ...);
__attribute__((format(printf, 2, 0))) int pprof_buf_vprintf(struct pprof_buf *b,
                                                            const char *fmt, va_list ap);
/* Releases the buffer's memory and empties it. */
void pprof_buf_free(struct pprof_buf *b);

/* A mapping as profile.proto's Mapping message has it. */
struct pprof_mapping_desc {
    uint64_t start;          /* first address of the mapping */
    uint64_t limit;          /* one past its last address */
    uint64_t offset;         /* file offset of `start` */
    const char *filename;    /* path of the mapped file, or "" */
    const char *build_id;    /* GNU build ID as lowercase hex, or "" */
    int has_functions;       /* every location in it got a function name */
    int has_filenames;       /* ... and a file name */
    int has_line_numbers;    /* ... and a line number */
    int has_inline_frames;   /* ... and its inlined calls */
};

/* One line of a location: a function (by id) and a line in it (0 if unknown). */
struct pprof_line {
    uint64_t function_id;
    int64_t line;
};

/* A string label of a sample (profile.proto Label with `str`). */
struct pprof_label {
    const char *key;
    const char *str;
};

struct pprof_profile;

/* A new, empty profile; NULL when out of memory. */
struct pprof_profile *pprof_new(void);
/* Frees the profile and everything it owns; NULL is fine. */
void pprof_free(struct pprof_profile *p);

/*
 * Appends a sample type (ValueType); samples then carry one value per type,
 * so this returns -EINVAL once a sample was added.
 */
int pprof_add_sample_type(struct pprof_profile *p, const char *type, const char *unit);
/* The index of the sample type named `type`, or -ENOENT. */
int pprof_sample_type_index(const struct pprof_profile *p, const char *type);
/* Sets period_type and period. */
int pprof_set_period(struct pprof_profile *p, const char *type, const char *unit, int64_t period);
/*
 * Names the sample type a viewer shows first (profile.proto
 * default_sample_type); -EINVAL unless a sample type of that name was added.
 */
int pprof_set_default_sample_type(struct pprof_profile *p, const char *type);
/* Sets time_nanos and duration_nanos. */
void pprof_set_time(struct pprof_profile *p, int64_t time_nanos, int64_t duration_nanos);
/* Adds a free-form comment line (profile.proto comment). */
int pprof_add_comment(struct pprof_profile *p, const char *comment);

/* Adds a mapping; returns its id (>= 1) or a negative errno. */
int64_t pprof_add_mapping(struct pprof_profile *p, const struct pprof_mapping_desc *m);
/* Updates the has_* flags of a mapping added earlier; returns 0 or -EINVAL. */
int pprof_set_mapping_flags(struct pprof_profile *p, uint64_t mapping_id, int has_functions,
                            int has_filenames, int has_line_numbers, int has_inline_frames);

/*
 * The id of the function (system_name, filename), added on first use with
 * the display `name`: two functions with one display name but different
 * system names or files stay apart. Returns the id (>= 1) or a negative errno.
 */
int64_t pprof_function_id(struct pprof_profile *p, const char *name, const char *system_name,
                          const char *filename, int64_t start_line);

/*
 * The id of the location at `address` in mapping `mapping_id` (0: none),
 * added on first use with `lines` (innermost first; may be empty). One
 * location per distinct (mapping, address): later calls with the same key
 * return the first id and ignore `lines`. Returns the id or a negative errno.
 */
int64_t pprof_location_id(struct pprof_profile *p, uint64_t mapping_id, uint64_t address,
                          const struct pprof_line *lines, size_t n_lines);

/*
 * Adds a sample: location ids leaf first, one value per sample type (the
 * count must equal the number of sample types, else -EINVAL), and labels.
 */
int pprof_add_sample(struct pprof_profile *p, const uint64_t *location_ids, size_t n_locations,
                     const int64_t *values, size_t n_values, const struct pprof_label *labels,
                     size_t n_labels);

/*
 * Adds every sample of `src` to `dst`, with the mappings, functions and
 * locations they use, each sample labelled with `labels` (replacing a
 * label of the same key it has). The sample types must be the same, in
 * the same order: else -EINVAL. On another error (-ENOMEM) `dst` may hold
 * part of `src`: discard it.
 */
int pprof_merge(struct pprof_profile *dst, const struct pprof_profile *src,
                const struct pprof_label *labels, size_t n_labels);

/* The number of samples added so far. */
size_t pprof_sample_count(const struct pprof_profile *p);

/* Appends the profile encoded as profile.proto (not compressed) to `out`. */
int pprof_encode(const struct pprof_profile *p, struct pprof_buf *out);

/* Appends `len` bytes of `data`, gzip-compressed (RFC 1952), to `out`. */
int pprof_gzip(const uint8_t *data, size_t len, struct pprof_buf *out);

/*
 * Appends Go's legacy heap text format (what net/http/pprof serves for
 * `debug=1`) to `out`. It expects the four heap sample types in the order
 * alloc_objects, alloc_space, inuse_objects, inuse_space and the sampling
 * period; returns -EINVAL for any other profile shape.
 */
int pprof_write_heap_text(const struct pprof_profile *p, struct pprof_buf *out);

/*
 * Appends the top table of sample type `type` (an index) to `out`, as
 * `go tool pprof -top` prints it: flat and cum per function, one line each,
 * largest flat first (see pprof_top.c). -EINVAL if there is no such type.
 */
int pprof_write_top(const struct pprof_profile *p, size_t type, struct pprof_buf *out);

/*
 * Appends the collapsed stacks of sample type `type` to `out`: one line per
 * distinct stack, `root;...;leaf VALUE` (see pprof_folded.c). -EINVAL if
 * there is no such type.
 */
int pprof_write_folded(const struct pprof_profile *p, size_t type, struct pprof_buf *out);

#endif
