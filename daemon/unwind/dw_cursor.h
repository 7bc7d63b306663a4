/*
 * dw_cursor.h - the one bounded reader of the binary encodings in
 * .eh_frame and .debug_frame: bytes, little-endian integers, LEB128 and
 * DW_EH_PE_* encoded pointers. Used by unwind_table.c (CIE augmentations,
 * FDE addresses) and cfi_rules.c (call frame instructions).
 *
 * Why not libdw: dwarf_next_cfi() splits the sections into entries for us,
 * but libdw does not export its readers of what is inside an entry, and
 * its dwarf_cfi_addrframe() interpreter cannot be used (cfi_rules.c says
 * why).
 *
 * Reads never pass `end`: a read that would sets `bad`, which sticks, and
 * returns 0, so a caller checks once after a group of reads.
 */
#ifndef HEAPPROF_DW_CURSOR_H
#define HEAPPROF_DW_CURSOR_H

#include <stdbool.h>
#include <stdint.h>

/* A read position in [p, end). */
struct dw_cursor {
    const uint8_t *p, *end;
    bool bad;
};

/* One byte. */
uint8_t dw_u8(struct dw_cursor *c);
/* An `n`-byte little-endian unsigned value (n <= 8). */
uint64_t dw_le(struct dw_cursor *c, unsigned n);
/* An unsigned LEB128; bits past 64 are dropped (only hostile input has them). */
uint64_t dw_uleb(struct dw_cursor *c);
/* A signed LEB128. */
int64_t dw_sleb(struct dw_cursor *c);
/* Skips a block of `len` bytes and returns where it starts (NULL if it does not fit). */
const uint8_t *dw_block(struct dw_cursor *c, uint64_t len);
/*
 * A pointer in DW_EH_PE_* encoding `enc`, where `field_vaddr` is the
 * address the field is loaded at (for DW_EH_PE_pcrel). Only absolute and
 * pc-relative pointers are read (all that x86_64 FDEs use); others set bad.
 */
uint64_t dw_encoded(struct dw_cursor *c, uint8_t enc, uint64_t field_vaddr);

#endif
