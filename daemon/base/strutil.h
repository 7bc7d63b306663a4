/*
 * strutil.h - strict parsing of numbers from untrusted text (command line,
 * HTTP queries, /proc files): no sign, no spaces, no trailing junk. The one
 * decimal reader of the daemon: every other parser of digits calls it. And
 * untrusted text made safe for a one-line message. And durations written
 * the way they are read, for help and error texts.
 */
#ifndef HEAPPROF_STRUTIL_H
#define HEAPPROF_STRUTIL_H

#include <stddef.h>
#include <stdint.h>

/* The largest pid Linux can hand out (PID_MAX_LIMIT on 64-bit). */
#define HP_MAX_PID 4194304

/*
 * Reads the decimal digits at *p (up to `end`, or the NUL when `end` is
 * NULL) into *out and moves *p past them; what follows is the caller's.
 * -EINVAL if there is no digit or the value does not fit 64 bits (then *p
 * has not moved).
 */
int parse_decimal(const char **p, const char *end, uint64_t *out);

/* Parses decimal digits only into [min, max]; -EINVAL otherwise. */
int parse_u64(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/* Parses a Go-style duration ("90s", "5m", "1h30m", "250ms"; a plain number
 * is seconds) into nanoseconds; -EINVAL if malformed or over `max_ns`. */
int parse_duration(const char *s, uint64_t max_ns, uint64_t *out);

/* Writes `ns` as parse_duration() reads it, in the largest unit that
 * divides it ("720h", "10m", "250ms"; "0" for zero). */
void format_duration(uint64_t ns, char *out, size_t len);

/* Replaces the control bytes of `s` with '?', so that text a request or a
 * process chose (a path may hold a newline) stays on one line. */
void hide_control_bytes(char *s);

#endif
