/*
 * allocator_names.h - the allocator's names: the entry points heapprofd
 * probes, made from the one list of them (bpf/alloc_entries.h, with what
 * each one is), glibc's internal aliases
 * of them, and the wrappers that allocate on a caller's behalf (operator
 * new, Rust's allocation shims). The probes are placed from it
 * (allocator.c), and profiles drop the allocator's frames from the leaf
 * end of each stack by it (profile_frames.c).
 */
#ifndef HEAPPROF_ALLOCATOR_NAMES_H
#define HEAPPROF_ALLOCATOR_NAMES_H

#include <stdbool.h>
#include <stddef.h>

#include "heapprof.h"

/* What a name is to us. */
enum allocator_role {
    ALLOCATOR_ENTRY,    /* an entry point we probe, with the kind of call it is
                         * (a row of alloc_entries.h) */
    ALLOCATOR_LOADER,   /* a loader function the in-process sampler wraps (dlopen) */
    ALLOCATOR_INTERNAL, /* glibc's internal name of an entry point (__libc_malloc) */
    ALLOCATOR_SHIM,     /* a wrapper that allocates for its caller; matched as the last
                         * component of a qualified name too (std::...::__rdl_alloc) */
    ALLOCATOR_MANGLED,  /* a prefix of mangled names (_Znwm: operator new(unsigned long), ...) */
};

/* One name. */
struct allocator_name {
    const char *name;
    enum allocator_role role;
    enum hp_kind kind; /* ALLOCATOR_ENTRY only */
    int family;        /* ALLOCATOR_ENTRY only: HP_FAMILY_* (alloc_entries.h) */
};

/* Every name; the entry points first, in the order their probes are resolved
 * (malloc first: its object is the one a profile shows as the allocator). */
extern const struct allocator_name allocator_names[];
extern const size_t allocator_names_count;

/*
 * Whether a function is the allocator's: `system_name` is its full
 * (demangled where it could be) name, `display_name` the short one
 * (demangle.h). glibc's __GI_ aliases count as the names they alias.
 */
bool allocator_is_allocator_name(const char *system_name, const char *display_name);

/*
 * Whether entry `n`, defined in the object at `object_path`, is left to the
 * entries it calls, by both samplers: operator new and delete of a C++
 * runtime that implements them with malloc and free (libstdc++, libc++).
 * Their malloc counts the call, and operator new's frame is dropped from
 * the leaf end of the stack, so the caller of new is the leaf all the
 * same; one probe or wrapper a call instead of two. And a return probe on
 * an operator new would put the kernel's trampoline in place of its
 * return address, which no unwinder can walk: a std::bad_alloc thrown
 * through it would end the program in std::terminate.
 */
bool allocator_runtime_calls(const struct allocator_name *n, const char *object_path);

#endif
