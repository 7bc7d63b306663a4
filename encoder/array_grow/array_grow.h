/*
 * array_grow.h - the one way this tree grows a heap array: capacity
 * doubled from a first size, with the multiplication checked, so that
 * every append site is two lines and none can overflow its size.
 *
 * Why here, in a library of its own under encoder/: the encoder and the
 * daemon both grow arrays, and the encoder must stay free of the daemon
 * (it is built and tested alone), so the helper cannot live in the
 * daemon's base/. The encoder is the lowest library of ours; this folder
 * is its lowest part, with no dependency at all, so that daemon/base/
 * links it without taking in the encoder (protobuf, zlib). Each had a copy
 * of its own before, both named array_grow with their arguments in
 * different orders.
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
