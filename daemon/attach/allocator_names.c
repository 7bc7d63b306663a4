/*
 * allocator_names.c - the allocator's names (see allocator_names.h).
 */
#include "allocator_names.h"

#include <string.h>

/* The loader's rows of alloc_entries.h are the in-process sampler's only:
 * dlopen is neither probed nor the allocator's frame. */
#define ENTRY_ROW(sym, kind, family) \
    {#sym, (kind) == HP_LOADER ? ALLOCATOR_LOADER : ALLOCATOR_ENTRY, (kind), (family)},

const struct allocator_name allocator_names[] = {
    /* Every entry of alloc_entries.h, in its order. Aliases at one address
     * (glibc's memalign and aligned_alloc, tcmalloc's free and tc_free)
     * are probed once. */
    HP_ALLOC_ENTRIES(ENTRY_ROW)
    {"__libc_malloc", ALLOCATOR_INTERNAL, 0, 0},
    {"__libc_calloc", ALLOCATOR_INTERNAL, 0, 0},
    {"__libc_realloc", ALLOCATOR_INTERNAL, 0, 0},
    {"__libc_reallocarray", ALLOCATOR_INTERNAL, 0, 0},
    {"__libc_memalign", ALLOCATOR_INTERNAL, 0, 0},
    {"__libc_valloc", ALLOCATOR_INTERNAL, 0, 0},
    {"__libc_pvalloc", ALLOCATOR_INTERNAL, 0, 0},
    {"__posix_memalign", ALLOCATOR_INTERNAL, 0, 0},
    {"operator new", ALLOCATOR_SHIM, 0, 0},
    {"operator new[]", ALLOCATOR_SHIM, 0, 0},
    /* Rust's global allocator: __rust_* call __rg_* (a #[global_allocator])
     * or __rdl_* (the default, the system allocator). */
    {"__rust_alloc", ALLOCATOR_SHIM, 0, 0},
    {"__rust_alloc_zeroed", ALLOCATOR_SHIM, 0, 0},
    {"__rust_realloc", ALLOCATOR_SHIM, 0, 0},
    {"__rg_alloc", ALLOCATOR_SHIM, 0, 0},
    {"__rg_alloc_zeroed", ALLOCATOR_SHIM, 0, 0},
    {"__rg_realloc", ALLOCATOR_SHIM, 0, 0},
    {"__rdl_alloc", ALLOCATOR_SHIM, 0, 0},
    {"__rdl_alloc_zeroed", ALLOCATOR_SHIM, 0, 0},
    {"__rdl_realloc", ALLOCATOR_SHIM, 0, 0},
    /* operator new and new[] in all their forms, where a name stayed
     * mangled: _Znwm, _Znam, _ZnwmRKSt9nothrow_t, _ZnwmSt11align_val_t, and
     * the 32-bit _Znwj, _Znaj. */
    {"_Znwm", ALLOCATOR_MANGLED, 0, 0},
    {"_Znam", ALLOCATOR_MANGLED, 0, 0},
    {"_Znwj", ALLOCATOR_MANGLED, 0, 0},
    {"_Znaj", ALLOCATOR_MANGLED, 0, 0},
};
const size_t allocator_names_count = sizeof(allocator_names) / sizeof(allocator_names[0]);

/* The last component of a qualified name: "__rdl_alloc" of "std::alloc::__rdl_alloc". */
static const char *last_component(const char *name)
{
    const char *last = name;
    for (const char *s = strstr(name, "::"); s; s = strstr(s + 2, "::"))
        last = s + 2;
    return last;
}

bool allocator_is_allocator_name(const char *system_name, const char *display_name)
{
    /* glibc names its functions' internal aliases __GI_<name>, and DWARF
     * gives the alias as the linkage name: __GI___libc_malloc */
    const char *plain = strncmp(system_name, "__GI_", 5) == 0 ? system_name + 5 : system_name;
    const char *last = last_component(display_name);
    for (size_t i = 0; i < allocator_names_count; i++) {
        const struct allocator_name *n = &allocator_names[i];
        if (n->role == ALLOCATOR_LOADER)
            continue;
        if (n->role == ALLOCATOR_MANGLED ? strncmp(plain, n->name, strlen(n->name)) == 0
                                         : strcmp(plain, n->name) == 0)
            return true;
        if (n->role == ALLOCATOR_SHIM && strcmp(last, n->name) == 0)
            return true;
    }
    return false;
}

bool allocator_runtime_calls(const struct allocator_name *n, const char *object_path)
{
    if (n->role != ALLOCATOR_ENTRY || n->family != HP_FAMILY_CXX)
        return false;
    const char *base = strrchr(object_path, '/');
    base = base ? base + 1 : object_path;
    return strncmp(base, "libstdc++.so", 12) == 0 || strncmp(base, "libc++.so", 9) == 0;
}
