/*
 * unwind_row.h - one row of a compact unwind table, shared by the table
 * builder (daemon/unwind/unwind_table.c, from .eh_frame/.debug_frame CFI) and the
 * BPF unwinder that looks rows up by pc.
 *
 * A table covers one ELF file. Rows are sorted by `pc` (an ELF virtual
 * address minus the table's base, see unwind_table.h) and each row holds
 * from its pc up to the next row's pc. x86_64 only: the return address is
 * always at CFA - 8, so only the CFA and the caller's %rbp need rules.
 */
#ifndef HEAPPROF_UNWIND_ROW_H
#define HEAPPROF_UNWIND_ROW_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

/* The size of a PLT stub: the PLT row's rule depends on where in its stub
 * the pc is (the DWARF expression gcc and binutils emit for .plt says
 * "rip & 15"). */
#define HP_PLT_STUB_BYTES 16

/* How the CFA (the caller's %rsp after return) is found. */
enum hp_cfa_type {
    HP_CFA_NONE = 0,      /* no CFI covers this pc (a gap between FDEs) */
    HP_CFA_RSP = 1,       /* CFA = %rsp + cfa_offset */
    HP_CFA_RBP = 2,       /* CFA = %rbp + cfa_offset */
    HP_CFA_PLT = 3,       /* PLT stubs: CFA = %rsp + 8, + 8 more when (%rip & 15) >= cfa_offset */
    HP_CFA_END = 4,       /* the outermost frame (return address undefined): stop here */
    HP_CFA_SIGNAL = 5,    /* a signal trampoline: registers are in the ucontext at %rsp */
    HP_CFA_UNSUPPORTED = 6, /* CFI we do not model (other DWARF expressions): stop, counted */
};

/* How the caller's %rbp is found. */
enum hp_rbp_type {
    HP_RBP_SAME = 0,      /* unchanged (not saved by this frame) */
    HP_RBP_OFFSET = 1,    /* saved at CFA + rbp_offset */
    HP_RBP_UNSUPPORTED = 2, /* a rule we do not model: the caller's %rbp is unknown */
};

/* One row: 12 bytes, so a million rows take 12 MiB. */
struct hp_unwind_row {
    __u32 pc;          /* start of the row, relative to the table's base */
    __s32 cfa_offset;
    __s16 rbp_offset;
    __u8 cfa_type;     /* enum hp_cfa_type */
    __u8 rbp_type;     /* enum hp_rbp_type */
};

#endif
