/*
 * fuzz_check.h - the assertion the fuzz targets share: a broken invariant
 * prints what was expected and what came, then aborts, which libFuzzer
 * reports as a crash and saves the input that caused it.
 */
#ifndef HEAPPROF_FUZZ_CHECK_H
#define HEAPPROF_FUZZ_CHECK_H

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

#endif
