/*
 * symbol_memo.h - the frames of addresses one symbolizer has already named,
 * so a warm scrape copies them instead of walking DWARF again (finding the
 * scopes of an address walks its whole compile unit, which for a large C
 * file such as CPython's ceval.c takes about half a millisecond).
 *
 * Bounded by SYMBOL_MEMO_MAX_BYTES per file: past it the memo forgets
 * everything and starts over, and the addresses still in use come back at
 * the next lookup. Not thread-safe: it lives under its symbolizer's lock.
 *
 * Ownership: the memo owns copies of the names; `file` strings are the
 * symbolizer's (libdw's), which outlive the memo.
 */
#ifndef HEAPPROF_SYMBOL_MEMO_H
#define HEAPPROF_SYMBOL_MEMO_H

#include <stddef.h>
#include <stdint.h>

#include "symbolizer.h"

/* Bytes of remembered frames per file: a profile names a few thousand
 * addresses of one file at most, about 300 bytes each with C++ names, so
 * 4 MiB holds the working set of several processes sharing a library. */
#define SYMBOL_MEMO_MAX_BYTES (4u << 20)

struct symbol_memo;

/* A new, empty memo; NULL when out of memory. */
struct symbol_memo *symbol_memo_new(void);
void symbol_memo_free(struct symbol_memo *m);

/* Copies the frame remembered for `vaddr` into *out (free with
 * sym_frame_free); -ENOENT if there is none, -ENOMEM. */
int symbol_memo_get(const struct symbol_memo *m, uint64_t vaddr, struct sym_frame *out);

/* Remembers the frame of `vaddr` (copied); 0 or -ENOMEM. */
int symbol_memo_put(struct symbol_memo *m, uint64_t vaddr, const struct sym_frame *f);

/* Bytes the memo holds, for the symbol cache's bound. */
uint64_t symbol_memo_bytes(const struct symbol_memo *m);

#endif
