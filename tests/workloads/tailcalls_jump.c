/*
 * tailcalls_jump.c - a function of the program that jumps to malloc (a
 * sibling call: built with -foptimize-sibling-calls, unlike the other
 * workload sources), for tailcalls.c. With another tool's return probe on
 * it, malloc is entered with the uretprobe trampoline as its return
 * address; the caller of jump_to_malloc is the leaf all the same.
 */
#include <stdlib.h>

void *jump_to_malloc(size_t n);

void *jump_to_malloc(size_t n)
{
    return malloc(n);
}
