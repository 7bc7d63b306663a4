/*
 * unwind_table.h - builds the compact unwind table of one ELF file from its
 * call frame information (.eh_frame, and .debug_frame where present), for
 * the BPF unwinder (bpf/unwind_row.h has the row format).
 *
 * Ownership: a `struct unwind_table` owns its rows; free with
 * unwind_table_free().
 */
#ifndef HEAPPROF_UNWIND_TABLE_H
#define HEAPPROF_UNWIND_TABLE_H

#include <stddef.h>
#include <stdint.h>

#include "unwind_row.h"

/* Rows above this are refused: a table's pc is 32 bits and the BPF search
 * is bounded (2^22 rows needs 22 steps). */
#define UNWIND_TABLE_MAX_ROWS (1u << 22)

/* The table of one file. */
struct unwind_table {
    uint64_t base;              /* ELF vaddr that row pc 0 stands for (lowest executable PT_LOAD) */
    struct hp_unwind_row *rows; /* sorted by pc, no two rows with one pc */
    size_t n;
    /* What was seen while building, for metrics and tests. */
    size_t fdes;            /* FDEs read */
    size_t unsupported_cfa; /* rows with HP_CFA_UNSUPPORTED */
    size_t unsupported_rbp; /* rows with HP_RBP_UNSUPPORTED */
};

/*
 * Builds the table of the ELF file at `path`. Consecutive rows with the
 * same rules are merged; a gap between FDEs gets an HP_CFA_NONE row. Returns
 * 0, -ENOENT (no CFI at all, or none that describes loaded code), -ENOEXEC
 * (not ELF / not x86_64 / no executable PT_LOAD, e.g. a relocatable object),
 * -E2BIG (over UNWIND_TABLE_MAX_ROWS or a text segment above 4 GiB), or
 * -errno. Where FDEs overlap, the one with the lowest start wins (then the
 * longer, then .eh_frame over .debug_frame, then the first in its section);
 * a later one only covers what lies past it. On error `out` is empty.
 */
int unwind_table_build(const char *path, struct unwind_table *out);

/* Builds from an ELF image in memory (for tests and fuzzing); same results. */
int unwind_table_build_mem(const void *image, size_t len, struct unwind_table *out);

/* The row covering ELF virtual address `vaddr` (an HP_CFA_NONE row in a gap
 * or past the last FDE), or NULL below the first row (binary search). */
const struct hp_unwind_row *unwind_table_find(const struct unwind_table *t, uint64_t vaddr);

void unwind_table_free(struct unwind_table *t);

#endif
