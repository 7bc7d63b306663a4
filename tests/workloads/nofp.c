/*
 * nofp.c - a workload whose allocating function has no frame pointer, for
 * tests/integration/test_nofp.py (run with --sample-interval 1).
 *
 * main -> caller_with_fp (this file, built with frame pointers) ->
 * leaf_without_fp (nofp_leaf.c, built with -O2 -fomit-frame-pointer), which
 * makes 100 x malloc(200). At malloc's entry %rbp still points at
 * caller_with_fp's frame, so a frame-pointer walk alone would lose a frame;
 * the leaf must still be leaf_without_fp and the callers must follow it.
 */
#include "handshake.h"

/* Makes 100 x malloc(200); in nofp_leaf.c, without a frame pointer. */
void leaf_without_fp(void);

/* Calls the frameless leaf; has a frame pointer of its own. */
__attribute__((noinline)) void caller_with_fp(void)
{
    leaf_without_fp();
    /* Keeps this call from becoming a tail jump whatever the flags. */
    __asm__ volatile("" ::: "memory");
}

int main(void)
{
    handshake_ready();
    if (!handshake_wait_line())
        return 1;
    caller_with_fp();
    handshake_done();
    handshake_wait_line();
    return 0;
}
