/*
 * symbolizer_names.h - the names of one line of a location, from a DWARF
 * function scope or from a symbol table entry: the full demangled
 * `system_name` and the short display `name` (demangle.h).
 *
 * DWARF names come from the linkage name where the compiler wrote one
 * (following abstract origins and specifications, so inlined calls get
 * their callee's name). Without one, as for C++ lambdas and static
 * functions that were only ever inlined, C++ and Rust names are qualified
 * with their enclosing namespaces, types and functions from the DIE tree:
 * `main::{lambda}::operator()` rather than a bare `operator()`.
 */
#ifndef HEAPPROF_SYMBOLIZER_NAMES_H
#define HEAPPROF_SYMBOLIZER_NAMES_H

#include <stdbool.h>

#include <elfutils/libdw.h>

#include "symbolizer.h"

/* Whether names in language `lang` (DW_LANG_*) live in namespaces and
 * types, and so have linkage names that carry them (C++, Rust, D). */
bool sym_lang_has_scopes(int lang);

/* Whether `die` (a function scope) has a linkage name, directly or through
 * its abstract origin or specification. */
bool sym_has_linkage_name(Dwarf_Die *die);

/* Fills l->name and l->system_name (malloc'd) for the function scope `die`
 * of a unit in language `lang` (DW_LANG_*); 0 or -ENOMEM. */
int sym_names_of_die(Dwarf_Die *die, int lang, struct sym_line *l);

/* Fills l->name and l->system_name for a symbol table name, without any
 * "@VERSION" suffix; 0 or -ENOMEM. */
int sym_names_of_symbol(const char *symbol, struct sym_line *l);

#endif
