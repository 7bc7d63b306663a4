/*
 * entry_families.h - the families of allocator entry points a process's
 * calls can be interposed on (the C functions, C++'s operator new and
 * delete, and the allocators' own APIs), told apart by the entry's name,
 * so that the index and /metrics can say, per process, which families the
 * sampler in use sees: the functions the uprobe sampler probes, or the
 * entries whose relocation slots the in-process sampler took.
 */
#ifndef HEAPPROF_ENTRY_FAMILIES_H
#define HEAPPROF_ENTRY_FAMILIES_H

#include <stddef.h>
#include <stdint.h>

/* A family; its bit in a mask is 1u << the family. */
enum entry_family {
    ENTRY_FAMILY_C = 0,    /* malloc, calloc, realloc, free, posix_memalign, ... */
    ENTRY_FAMILY_CXX,      /* operator new and delete, every form (_Znwm, _ZdlPv, ...) */
    ENTRY_FAMILY_JEMALLOC, /* mallocx, rallocx, sdallocx, ... and je_*, _rjem_* */
    ENTRY_FAMILY_TCMALLOC, /* tc_* */
    ENTRY_FAMILY_MIMALLOC, /* mi_* */
    ENTRY_FAMILY_COUNT,
};

/* The family of the entry point `name` (a row of bpf/alloc_entries.h),
 * or -1 if it allocates nothing (dlopen, dlmopen: followed, not counted)
 * or is no entry. */
int entry_family_of(const char *name);

/* The family's name as the index and /metrics write it ("c", "cxx", ...). */
const char *entry_family_name(enum entry_family f);

/* Writes the names of the families in `mask`, separated by `sep`, into
 * `buf` ("" for none; truncated to fit). */
void entry_families_describe(uint32_t mask, const char *sep, char *buf, size_t len);

#endif
