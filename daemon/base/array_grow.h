/*
 * array_grow.h - the daemon's one way to grow a heap array: capacity
 * doubled from a first size, with the multiplication checked, so that
 * every append site is two lines and none can overflow its size.
 */
#ifndef HEAPPROF_ARRAY_GROW_H
#define HEAPPROF_ARRAY_GROW_H

#include <stddef.h>

/*
 * Makes room for at least `need` elements of `size` bytes in `v`, whose
 * capacity is *cap: returns `v` if it has room, else the array reallocated
 * to the first of min_cap, 2*min_cap, 4*min_cap, ... that holds `need`
 * (*cap updated), or NULL when memory or size_t runs out (then `v` and
 * *cap are as they were).
 */
void *array_grow(void *v, size_t *cap, size_t need, size_t size, size_t min_cap);

#endif
