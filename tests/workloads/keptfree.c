/*
 * keptfree.c - frees through a pointer to free taken before the attach,
 * for test_inprocess_safety.py: that pointer goes straight to the
 * allocator, past every relocation slot, so the in-process sampler does
 * not see those frees. Its allocations are 100 blocks of 64 bytes from
 * first_batch(), freed through the kept pointer, then 100 more from
 * second_batch(), which glibc gives the same addresses (tcache and
 * fastbins hand back what was freed last): the sampler must take each
 * first block out of in-use when its address comes back.
 */
#include <stdint.h>
#include <stdlib.h>

#include "handshake.h"

#define BLOCKS 100
#define SIZE 64

/* Not a relocation slot: a value copied at run time, before the attach. */
static void (*volatile kept_free)(void *);
static void *first[BLOCKS], *second[BLOCKS];

__attribute__((noinline)) static void *first_batch(void) { return malloc(SIZE); }
__attribute__((noinline)) static void *second_batch(void) { return malloc(SIZE); }

int main(void)
{
    void (*volatile through_slot)(void *) = free;
    kept_free = through_slot;
    handshake_ready();
    handshake_wait_line();
    for (int i = 0; i < BLOCKS; i++) {
        first[i] = first_batch();
        handshake_touch(first[i], SIZE);
    }
    for (int i = 0; i < BLOCKS; i++)
        kept_free(first[i]);
    for (int i = 0; i < BLOCKS; i++) {
        second[i] = second_batch();
        handshake_touch(second[i], SIZE);
    }
    handshake_done();
    handshake_wait_line();
    return 0;
}
