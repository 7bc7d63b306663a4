/*
 * strutil.h - strict parsing of numbers from untrusted text (command line,
 * HTTP queries, /proc files): no sign, no spaces, no trailing junk.
 */
#ifndef HEAPPROF_STRUTIL_H
#define HEAPPROF_STRUTIL_H

#include <stdint.h>

/* The largest pid Linux can hand out (PID_MAX_LIMIT on 64-bit). */
#define HP_MAX_PID 4194304

/* Parses decimal digits only into [min, max]; -EINVAL otherwise. */
int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);

#endif
