/*
 * dlalloc.c - a plugin that dlopener.c's library loads after the attach,
 * for test_inprocess_safety.py: its allocations must be in the profile,
 * exactly, though its relocation slots did not exist when the sampler was
 * put in.
 */
#include <stdlib.h>

#define DLALLOC_SIZE 4321

static void *kept[1024];

__attribute__((noinline)) void dlalloc_run(int n)
{
    for (int i = 0; i < n && i < 1024; i++) {
        kept[i] = malloc(DLALLOC_SIZE);
        ((volatile char *)kept[i])[0] = 1;
    }
}
