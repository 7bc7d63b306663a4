/*
 * new_fail_size.h - the size from which no operator new can succeed on
 * this machine, put into the BPF programs' read-only data before load
 * (bpf_state.c). The uprobe sampler samples no operator new of that size:
 * its return probe would put the kernel's trampoline in place of the
 * return address, no unwinder can walk that, and the std::bad_alloc such
 * a call throws would end the program in std::terminate.
 */
#ifndef HEAPPROF_NEW_FAIL_SIZE_H
#define HEAPPROF_NEW_FAIL_SIZE_H

#include <stdint.h>

struct heapprof; /* the skeleton */

/* The size, from the kernel's overcommit policy and the machine's memory:
 * more than RAM and swap together (which the kernel refuses to one mapping
 * unless it overcommits always), else more than the user address space. */
uint64_t new_fail_size(void);

/* Sets it in the programs' read-only data; before load. */
void new_fail_size_set(struct heapprof *skel);

#endif
