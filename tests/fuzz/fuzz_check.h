/*
 * fuzz_check.h - the assertion the fuzz targets share: a broken invariant
 * prints what was expected and what came, then aborts, which libFuzzer
 * reports as a crash and saves the input that caused it.
 */
#ifndef HEAPPROF_FUZZ_CHECK_H
#define HEAPPROF_FUZZ_CHECK_H

#include <stddef.h>
#include <stdint.h>

#include <stdio.h>
#include <stdlib.h>

/* Aborts with a printf-style message unless `cond` holds. */
#define FUZZ_CHECK(cond, ...)                                                                      \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: invariant failed: %s: ", __FILE__, __LINE__, #cond);           \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* Reads up to 8 little-endian bytes of the input at `at` (0 past its end):
 * addresses and offsets the targets take from their input. */
static inline uint64_t fuzz_u64_at(const uint8_t *data, size_t size, size_t at)
{
    uint64_t v = 0;
    for (size_t i = 0; i < 8 && at + i < size; i++)
        v |= (uint64_t)data[at + i] << (8 * i);
    return v;
}

#endif
