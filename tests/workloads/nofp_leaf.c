/*
 * nofp_leaf.c - the allocating function of the nofp workload, built with
 * -O2 -fomit-frame-pointer (see CMakeLists.txt) so it has no frame pointer.
 */
#include <stdlib.h>

#include "handshake.h"

#define N_LEAF 100 /* malloc(200), kept */
#define SIZE_LEAF 200

/* Kept pointers: a global, so no allocation is dead code. */
void *leaf_ptrs[N_LEAF];

/* Makes 100 x malloc(200), kept: 100 objects, 20000 bytes. */
__attribute__((noinline)) void leaf_without_fp(void)
{
    for (int i = 0; i < N_LEAF; i++) {
        void *p = malloc(SIZE_LEAF);
        if (p == NULL)
            handshake_die("nofp: allocation failed");
        ((volatile char *)p)[0] = 1;
        leaf_ptrs[i] = p;
    }
}
