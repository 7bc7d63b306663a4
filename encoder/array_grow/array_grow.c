/*
 * array_grow.c - capacity doubling for heap arrays, for the encoder and the
 * daemon alike (see array_grow.h).
 */
#include "array_grow.h"

#include <stdint.h>
#include <stdlib.h>

void *array_grow(void *v, size_t *cap, size_t need, size_t size, size_t min_cap)
{
    if (need <= *cap)
        return v;
    size_t ncap = *cap ? *cap : min_cap ? min_cap : 1;
    while (ncap < need) {
        if (ncap > SIZE_MAX / 2)
            return NULL;
        ncap *= 2;
    }
    if (ncap > SIZE_MAX / size)
        return NULL;
    void *nv = realloc(v, ncap * size);
    if (nv)
        *cap = ncap;
    return nv;
}
