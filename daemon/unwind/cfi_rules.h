/*
 * cfi_rules.h - runs the DWARF call frame instructions of one CIE and FDE
 * (x86_64 only) and turns the rules of each resulting row into an
 * hp_unwind_row (bpf/unwind_row.h). unwind_table.c finds the CIEs and FDEs
 * in .eh_frame/.debug_frame; this module owns what their instructions mean.
 *
 * Only three rules matter to the BPF unwinder: the CFA, the caller's %rbp
 * (DWARF register 6) and the return address (register 16, which must be
 * at CFA - 8). Rules of other registers are parsed and dropped.
 *
 * The instructions may be hostile: every read is bounded by the caller's
 * [p, end), arithmetic saturates instead of overflowing, and a malformed or
 * unknown instruction makes the rest of the FDE HP_CFA_UNSUPPORTED rather
 * than an error, so one bad FDE never costs the rest of the table.
 */
#ifndef HEAPPROF_CFI_RULES_H
#define HEAPPROF_CFI_RULES_H

#include <stdbool.h>
#include <stdint.h>

#include "unwind_row.h"

/* DWARF register numbers of x86_64 (System V psABI, figure 3.36). */
#define CFI_REG_RBP 6
#define CFI_REG_RSP 7
#define CFI_REG_RA 16

/* How one register of the caller is found. */
enum cfi_rule_kind {
    CFI_RULE_UNSPEC = 0, /* no instruction named it: callee-saved registers keep their value */
    CFI_RULE_UNDEF,      /* DW_CFA_undefined: not recoverable */
    CFI_RULE_SAME,       /* DW_CFA_same_value */
    CFI_RULE_OFFSET,     /* saved at CFA + off */
    CFI_RULE_OTHER,      /* val_offset, register, expression, val_expression: not modelled */
};

/* One register rule; `off` is meaningful for CFI_RULE_OFFSET only. */
struct cfi_rule {
    uint8_t kind; /* enum cfi_rule_kind */
    int64_t off;  /* already multiplied by the data alignment factor; INT64_MIN if it overflowed */
};

/* How the CFA is found. */
enum cfi_cfa_kind {
    CFI_CFA_UNSET = 0, /* no DW_CFA_def_cfa yet */
    CFI_CFA_REG,       /* register + offset */
    CFI_CFA_EXPR,      /* a DWARF expression */
    CFI_CFA_BAD,       /* the instructions were malformed or not understood from here on */
};

/* The rules in force at one location. */
struct cfi_state {
    uint8_t cfa_kind;    /* enum cfi_cfa_kind */
    uint64_t cfa_reg;    /* CFI_CFA_REG */
    int64_t cfa_off;     /* CFI_CFA_REG; INT64_MIN if it overflowed */
    const uint8_t *expr; /* CFI_CFA_EXPR: points into the section, `expr_len` bytes */
    uint64_t expr_len;
    struct cfi_rule rbp;
    struct cfi_rule ra;
};

/* What the interpreter needs from a CIE, with the state after its initial instructions. */
struct cfi_cie {
    uint64_t code_align; /* code alignment factor: advance_loc deltas are multiplied by it */
    int64_t data_align;  /* data alignment factor: factored offsets are multiplied by it */
    uint64_t ra_reg;     /* the return address column; rows are unsupported unless it is 16 */
    bool signal;         /* 'S' augmentation: the FDEs describe signal trampolines */
    struct cfi_state initial;
};

/* Receives one row: its rules hold from `vaddr` up to the next row. */
typedef int (*cfi_row_fn)(void *ctx, uint64_t vaddr, const struct hp_unwind_row *row);

/* Runs a CIE's initial instructions [p, end) into cie->initial; the other fields must be set. */
void cfi_run_cie(struct cfi_cie *cie, const uint8_t *p, const uint8_t *end);

/*
 * Runs an FDE's instructions [p, end) for the code range [lo, hi) and hands
 * `fn` each row that covers part of [from, hi) (lo <= from < hi), the first
 * one moved up to `from`. Returns 0, or the first nonzero value of `fn`.
 */
int cfi_run_fde(const struct cfi_cie *cie, const uint8_t *p, const uint8_t *end, uint64_t lo,
                uint64_t hi, uint64_t from, cfi_row_fn fn, void *ctx);

/* The table row for the rules `s` of an FDE of `cie` (pc left 0). */
void cfi_row_of(const struct cfi_cie *cie, const struct cfi_state *s, struct hp_unwind_row *row);

#endif
