/*
 * profile_diff.h - the difference between a profile and a base, as `go
 * tool pprof -diff_base` makes it: one profile holding the current samples
 * as they are and the base's samples with their values negated, so that
 * any reader that sums by stack or by function (pprof's top and graph,
 * the folded stacks, a flame graph) shows growth as positive values and
 * shrinkage as negative ones.
 *
 * The base is profile.proto bytes, gzipped or not: a snapshot the daemon
 * kept (snapshots.h) or a profile a client uploaded, which is untrusted
 * input (any bytes give an answer or -EBADMSG, never a crash).
 */
#ifndef HEAPPROF_PROFILE_DIFF_H
#define HEAPPROF_PROFILE_DIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pprof.h"

/* The largest base accepted, gzipped or once inflated: a heap profile of
 * a large program is a few MiB; this bounds what one upload can cost. */
#define PROFILE_DIFF_MAX_BASE_BYTES (64u << 20)

/* The label pprof puts on the base's samples: its report then takes
 * percentages of the base's total, as -diff_base shows them. */
#define PROFILE_DIFF_BASE_LABEL "pprof::base"

/*
 * The profile `cur` minus the base in `base` (`len` bytes of profile.proto,
 * gzipped or not) into *out (owned by the caller). The sample types are
 * `cur`'s; a base value of a type the base lacks counts as 0, and a base
 * that has none of them is -EBADMSG. With `label_base`, every base sample
 * carries PROFILE_DIFF_BASE_LABEL=true (the protobuf form, for pprof);
 * without, equal stacks of both sum into their difference (the top table,
 * the folded stacks). 0, or -errno with a one-line reason in `err`.
 */
int profile_diff(const struct pprof_profile *cur, const uint8_t *base, size_t len, bool label_base,
                 struct pprof_profile **out, char *err, size_t errlen);

/* Whether `len` bytes are a profile.proto (gzipped or not) with sample
 * types: 0, or -EBADMSG/-EFBIG/-ENOMEM with a one-line reason in `err`. */
int profile_diff_check_base(const uint8_t *base, size_t len, char *err, size_t errlen);

/* Inflates `len` bytes of `in` into `out` if they are gzipped (else copies
 * them), at most PROFILE_DIFF_MAX_BASE_BYTES: 0, -EBADMSG or -EFBIG. */
int profile_diff_gunzip(const uint8_t *in, size_t len, struct pprof_buf *out);

#endif
