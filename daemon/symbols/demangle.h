/*
 * demangle.h - the two names of a function in a profile: the full
 * demangled `system_name` (C++ Itanium ABI and Rust legacy and v0 symbols,
 * through libiberty) and a short display `name` without template or generic
 * arguments, parameter lists, return types or trait qualifications, which
 * pprof's views would otherwise cut into pieces:
 *
 *   void std::vector<long, A<long> >::_M_realloc_insert<long>(...)
 *     becomes std::vector::_M_realloc_insert;
 *   <core::result::Result<T, E> as core::ops::FnOnce<A>>::call_once
 *     becomes core::result::Result::call_once.
 *
 * Both are pure functions of their input: no state, safe from any thread.
 */
#ifndef HEAPPROF_DEMANGLE_H
#define HEAPPROF_DEMANGLE_H

#include <stddef.h>

/*
 * The longest mangled name we demangle. libiberty's C++ demangler keeps its
 * parse in arrays on the stack, about 64 bytes per character of the name:
 * 16 KiB names need about 1 MiB of a request thread's 8 MiB stack. Longer
 * names (rare even in template-heavy code) are shown mangled.
 */
#define DEMANGLE_MAX_MANGLED 16384

/* The longest demangled name we keep; a longer one is shown mangled. Bounds
 * what a hostile name that expands exponentially can cost. */
#define DEMANGLE_MAX_DEMANGLED 65536

/*
 * The demangled form of symbol `raw` (C++ "_Z...", Rust "_R..." or legacy
 * "_ZN...17h<hash>E") in *out, malloc'd (the caller frees it); a copy of
 * `raw` when it is not mangled or does not demangle. 0 or -ENOMEM.
 */
int demangle_name(const char *raw, char **out);

/*
 * Writes the short display form of the demangled name `full` into `out`,
 * which must hold strlen(full) + 1 bytes (the short form is never longer).
 */
void demangle_simplify(const char *full, char *out);

#endif
