/*
 * cfi_rules.c - a DWARF call frame instruction interpreter for x86_64 that
 * keeps only what the BPF unwinder uses (the CFA, %rbp and the return
 * address), and the mapping of those rules onto hp_unwind_row types.
 *
 * Why not libdw's dwarf_cfi_addrframe(): it finds the FDE itself (through
 * .eh_frame_hdr or its own search tree), so where FDEs overlap we could not
 * say which one a row came from; and it re-runs an FDE's program from the
 * start for every row asked for, which is quadratic in the rows of an FDE
 * (a hostile FDE of a million advance_loc bytes would never finish). Here
 * each FDE's program runs once, front to back, and every read is bounded.
 */
#include "cfi_rules.h"

#include <dwarf.h>
#include <string.h>

#include "dw_cursor.h"

/* DW_CFA_remember_state nesting we follow; gcc nests one or two deep. */
#define CFI_STATE_STACK_MAX 32

/* Marks an offset that overflowed 64 bits; it fits no row field, so such rules are unsupported. */
#define CFI_OFF_OVERFLOW INT64_MIN

/* The expression ld emits for the stubs of .plt: CFA = rsp + 8, plus 8 once
 * the stub's push has run, i.e. when (rip & 15) >= B. B, the literal at
 * PLT_EXPR_LIT_AT, is where the push ends: 11 in classic 16-byte stubs, 9 in
 * IBT ones (endbr64 first; -z ibtplt), 10 in other layouts. Any literal is
 * taken; every other byte must match. */
static const uint8_t plt_expr[] = {
    DW_OP_breg7, 8,        DW_OP_breg16, 0,         DW_OP_lit15, DW_OP_and,
    DW_OP_lit11, DW_OP_ge, DW_OP_lit3,   DW_OP_shl, DW_OP_plus,
};
#define PLT_EXPR_LIT_AT 6

/* The interpreter's state: the current rules and the DW_CFA_remember_state stack. */
struct run {
    const struct cfi_cie *cie; /* the CIE (its `initial` is what DW_CFA_restore goes back to) */
    bool in_cie;               /* running the CIE's own instructions: no initial state yet */
    struct cfi_state st;
    unsigned depth;
    struct cfi_state stack[CFI_STATE_STACK_MAX];
};

/* An unsigned factored offset times the data alignment factor, or CFI_OFF_OVERFLOW. */
static int64_t factored_u(uint64_t u, int64_t daf)
{
    int64_t r;
    if (u > INT64_MAX || __builtin_mul_overflow((int64_t)u, daf, &r))
        return CFI_OFF_OVERFLOW;
    return r;
}

/* A signed factored offset times the data alignment factor, or CFI_OFF_OVERFLOW. */
static int64_t factored_s(int64_t s, int64_t daf)
{
    int64_t r;
    if (__builtin_mul_overflow(s, daf, &r))
        return CFI_OFF_OVERFLOW;
    return r;
}

/* Sets the rule of register `reg` if it is one we keep. */
static void set_rule(struct run *r, uint64_t reg, uint8_t kind, int64_t off)
{
    struct cfi_rule rule = {.kind = kind, .off = kind == CFI_RULE_OFFSET ? off : 0};
    if (reg == CFI_REG_RBP)
        r->st.rbp = rule;
    else if (reg == CFI_REG_RA)
        r->st.ra = rule;
}

/* DW_CFA_restore: back to the CIE's rule (to "unspecified" inside the CIE itself). */
static void restore_rule(struct run *r, uint64_t reg)
{
    struct cfi_rule unspec = {.kind = CFI_RULE_UNSPEC, .off = 0};
    if (reg == CFI_REG_RBP)
        r->st.rbp = r->in_cie ? unspec : r->cie->initial.rbp;
    else if (reg == CFI_REG_RA)
        r->st.ra = r->in_cie ? unspec : r->cie->initial.ra;
}

/* Sets the CFA offset, which only a register-based CFA has; false if the CFA is an expression. */
static bool set_cfa_offset(struct run *r, int64_t off)
{
    if (r->st.cfa_kind == CFI_CFA_EXPR)
        return false;
    r->st.cfa_off = off;
    return true;
}

/*
 * Runs one instruction. `*advance` gets the bytes the location moves (0 if
 * it does not). Returns false when the instruction is malformed, unknown or
 * cannot be followed, after which nothing more of the stream is trusted.
 */
static bool step(struct run *r, struct dw_cursor *c, uint64_t *advance)
{
    const int64_t daf = r->cie->data_align;
    uint8_t op = dw_u8(c);
    uint64_t reg, delta = 0, u;
    int64_t s;
    bool ok = true;

    *advance = 0;
    switch (op & 0xc0) {
    case DW_CFA_advance_loc:
        delta = op & 0x3f;
        break;
    case DW_CFA_offset:
        set_rule(r, op & 0x3f, CFI_RULE_OFFSET, factored_u(dw_uleb(c), daf));
        break;
    case DW_CFA_restore:
        restore_rule(r, op & 0x3f);
        break;
    default:
        switch (op) {
        case DW_CFA_nop:
            break;
        case DW_CFA_advance_loc1:
            delta = dw_le(c, 1);
            break;
        case DW_CFA_advance_loc2:
            delta = dw_le(c, 2);
            break;
        case DW_CFA_advance_loc4:
            delta = dw_le(c, 4);
            break;
        case DW_CFA_offset_extended:
            reg = dw_uleb(c);
            set_rule(r, reg, CFI_RULE_OFFSET, factored_u(dw_uleb(c), daf));
            break;
        case DW_CFA_offset_extended_sf:
            reg = dw_uleb(c);
            set_rule(r, reg, CFI_RULE_OFFSET, factored_s(dw_sleb(c), daf));
            break;
        case DW_CFA_GNU_negative_offset_extended:
            reg = dw_uleb(c);
            s = factored_u(dw_uleb(c), daf);
            set_rule(r, reg, CFI_RULE_OFFSET, s == CFI_OFF_OVERFLOW ? s : -s);
            break;
        case DW_CFA_restore_extended:
            restore_rule(r, dw_uleb(c));
            break;
        case DW_CFA_undefined:
            set_rule(r, dw_uleb(c), CFI_RULE_UNDEF, 0);
            break;
        case DW_CFA_same_value:
            set_rule(r, dw_uleb(c), CFI_RULE_SAME, 0);
            break;
        case DW_CFA_register:
            reg = dw_uleb(c);
            (void)dw_uleb(c);
            set_rule(r, reg, CFI_RULE_OTHER, 0);
            break;
        case DW_CFA_val_offset:
            reg = dw_uleb(c);
            (void)dw_uleb(c);
            set_rule(r, reg, CFI_RULE_OTHER, 0);
            break;
        case DW_CFA_val_offset_sf:
            reg = dw_uleb(c);
            (void)dw_sleb(c);
            set_rule(r, reg, CFI_RULE_OTHER, 0);
            break;
        case DW_CFA_expression:
        case DW_CFA_val_expression:
            reg = dw_uleb(c);
            (void)dw_block(c, dw_uleb(c));
            set_rule(r, reg, CFI_RULE_OTHER, 0);
            break;
        case DW_CFA_remember_state:
            if (r->depth == CFI_STATE_STACK_MAX)
                return false;
            r->stack[r->depth++] = r->st;
            break;
        case DW_CFA_restore_state:
            if (r->depth == 0)
                return false;
            r->st = r->stack[--r->depth];
            break;
        case DW_CFA_def_cfa:
            reg = dw_uleb(c);
            u = dw_uleb(c);
            r->st.cfa_kind = CFI_CFA_REG;
            r->st.cfa_reg = reg;
            r->st.cfa_off = u > INT64_MAX ? CFI_OFF_OVERFLOW : (int64_t)u;
            break;
        case DW_CFA_def_cfa_sf:
            reg = dw_uleb(c);
            s = factored_s(dw_sleb(c), daf);
            r->st.cfa_kind = CFI_CFA_REG;
            r->st.cfa_reg = reg;
            r->st.cfa_off = s;
            break;
        case DW_CFA_def_cfa_register:
            reg = dw_uleb(c);
            if (r->st.cfa_kind == CFI_CFA_EXPR)
                return false;
            r->st.cfa_kind = CFI_CFA_REG;
            r->st.cfa_reg = reg;
            break;
        case DW_CFA_def_cfa_offset:
            u = dw_uleb(c);
            ok = set_cfa_offset(r, u > INT64_MAX ? CFI_OFF_OVERFLOW : (int64_t)u);
            break;
        case DW_CFA_def_cfa_offset_sf:
            ok = set_cfa_offset(r, factored_s(dw_sleb(c), daf));
            break;
        case DW_CFA_def_cfa_expression:
            u = dw_uleb(c);
            r->st.expr = dw_block(c, u);
            r->st.expr_len = u;
            r->st.cfa_kind = CFI_CFA_EXPR;
            break;
        case DW_CFA_GNU_args_size:
            (void)dw_uleb(c); /* stack adjustment for landing pads, not for unwinding */
            break;
        default:
            /* DW_CFA_set_loc (its operand uses the FDE's pointer encoding; no
             * x86_64 toolchain emits it), DW_CFA_GNU_window_save and unknown
             * opcodes: we cannot know what follows. */
            return false;
        }
    }
    if (c->bad || !ok)
        return false;
    if (__builtin_mul_overflow(delta, r->cie->code_align, advance))
        *advance = UINT64_MAX;
    return true;
}

void cfi_run_cie(struct cfi_cie *cie, const uint8_t *p, const uint8_t *end)
{
    struct run r;
    struct dw_cursor c = {.p = p, .end = end, .bad = false};
    uint64_t advance;

    r.cie = cie;
    r.in_cie = true;
    r.depth = 0;
    memset(&r.st, 0, sizeof(r.st));
    /* Location advances in a CIE mean nothing; they are skipped like libgcc does. */
    while (c.p < c.end) {
        if (!step(&r, &c, &advance)) {
            r.st.cfa_kind = CFI_CFA_BAD;
            break;
        }
    }
    cie->initial = r.st;
}

/* Hands `fn` the current rules for [start, end) if that reaches into [from, ...). */
static int emit(const struct run *r, uint64_t start, uint64_t end, uint64_t from, cfi_row_fn fn,
                void *ctx)
{
    struct hp_unwind_row row;
    if (end <= from)
        return 0;
    cfi_row_of(r->cie, &r->st, &row);
    return fn(ctx, start > from ? start : from, &row);
}

int cfi_run_fde(const struct cfi_cie *cie, const uint8_t *p, const uint8_t *end, uint64_t lo,
                uint64_t hi, uint64_t from, cfi_row_fn fn, void *ctx)
{
    struct run r;
    struct dw_cursor c = {.p = p, .end = end, .bad = false};
    uint64_t loc = lo, advance, next;
    int err;

    r.cie = cie;
    r.in_cie = false;
    r.depth = 0;
    r.st = cie->initial;
    /* Instructions past `hi` describe nothing we keep, so stop there. */
    while (c.p < c.end && loc < hi) {
        if (!step(&r, &c, &advance)) {
            r.st.cfa_kind = CFI_CFA_BAD; /* the rest of the FDE is unknown */
            break;
        }
        if (advance == 0)
            continue;
        next = hi - loc <= advance ? hi : loc + advance;
        err = emit(&r, loc, next, from, fn, ctx);
        if (err)
            return err;
        loc = next;
    }
    return loc < hi ? emit(&r, loc, hi, from, fn, ctx) : 0;
}

/* The PLT literal B if `expr` is the PLT stub expression, else -1. */
static int plt_literal(const uint8_t *expr, uint64_t len)
{
    if (!expr || len != sizeof(plt_expr) || memcmp(expr, plt_expr, PLT_EXPR_LIT_AT) != 0 ||
        memcmp(expr + PLT_EXPR_LIT_AT + 1, plt_expr + PLT_EXPR_LIT_AT + 1,
               sizeof(plt_expr) - PLT_EXPR_LIT_AT - 1) != 0)
        return -1;
    uint8_t lit = expr[PLT_EXPR_LIT_AT];
    if (lit < DW_OP_lit0 || lit > DW_OP_lit31)
        return -1;
    return lit - DW_OP_lit0;
}

/* The CFA type of rules `s` (and its offset into *off when the type has one). */
static uint8_t cfa_type_of(const struct cfi_cie *cie, const struct cfi_state *s, int32_t *off)
{
    if (cie->signal)
        return HP_CFA_SIGNAL;
    if (cie->ra_reg != CFI_REG_RA)
        return HP_CFA_UNSUPPORTED;
    if (s->ra.kind == CFI_RULE_UNDEF)
        return HP_CFA_END;
    /* The BPF side reads the return address at CFA - 8 and nowhere else. */
    if (s->ra.kind != CFI_RULE_OFFSET || s->ra.off != -8)
        return HP_CFA_UNSUPPORTED;
    if (s->cfa_kind == CFI_CFA_EXPR) {
        int lit = plt_literal(s->expr, s->expr_len);
        if (lit < 0)
            return HP_CFA_UNSUPPORTED;
        *off = lit;
        return HP_CFA_PLT;
    }
    if (s->cfa_kind != CFI_CFA_REG || s->cfa_off < INT32_MIN || s->cfa_off > INT32_MAX ||
        (s->cfa_reg != CFI_REG_RSP && s->cfa_reg != CFI_REG_RBP))
        return HP_CFA_UNSUPPORTED;
    *off = (int32_t)s->cfa_off;
    return s->cfa_reg == CFI_REG_RSP ? HP_CFA_RSP : HP_CFA_RBP;
}

void cfi_row_of(const struct cfi_cie *cie, const struct cfi_state *s, struct hp_unwind_row *row)
{
    int32_t off = 0;

    /* Fields a type does not use stay 0, so equal rules always compare equal when merging. */
    memset(row, 0, sizeof(*row));
    row->cfa_type = cfa_type_of(cie, s, &off);
    row->cfa_offset = off;
    row->rbp_type = HP_RBP_SAME;
    if (row->cfa_type != HP_CFA_RSP && row->cfa_type != HP_CFA_RBP && row->cfa_type != HP_CFA_PLT)
        return;
    switch (s->rbp.kind) {
    case CFI_RULE_UNSPEC:
    case CFI_RULE_UNDEF: /* nothing to restore: the unwinder keeps the %rbp it has */
    case CFI_RULE_SAME:
        break;
    case CFI_RULE_OFFSET:
        if (s->rbp.off >= INT16_MIN && s->rbp.off <= INT16_MAX) {
            row->rbp_type = HP_RBP_OFFSET;
            row->rbp_offset = (int16_t)s->rbp.off;
        } else {
            row->rbp_type = HP_RBP_UNSUPPORTED;
        }
        break;
    default:
        row->rbp_type = HP_RBP_UNSUPPORTED;
        break;
    }
}
