/*
 * clock.h - the daemon's one reading of the monotonic clock, the clock
 * bpf_ktime_get_ns() reads too, so that times taken here and in BPF compare.
 */
#ifndef HEAPPROF_CLOCK_H
#define HEAPPROF_CLOCK_H

#include <stdint.h>

/* Nanoseconds of CLOCK_MONOTONIC. */
uint64_t monotonic_ns(void);

#endif
