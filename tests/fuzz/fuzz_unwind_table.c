/*
 * fuzz_unwind_table.c - libFuzzer target for the unwind table builder
 * (daemon/unwind/unwind_table.c and cfi_rules.c): the input is an ELF image, handed
 * to unwind_table_build_mem() as it came.
 *
 * Whatever the bytes, the answer must be one of the documented errors with an
 * empty table, or a table that keeps the contract of unwind_table.h: rows
 * strictly sorted by pc, no two neighbours with the same rules, known types
 * only, counters that match the rows, an HP_CFA_NONE row last, and lookups
 * that land on the row whose range holds the address.
 *
 * Seeds (corpus/unwind_table/, each under 7 KB), built from the sources in
 * tests/unit/data/unwind_table/ with gcc -Wl,-z,noseparate-code to keep them
 * small: odd.so (odd.s: the odd-CFI cases in .eh_frame; -shared -nostdlib
 * -s), odd_dbg.so (the same with `.cfi_sections .debug_frame` prepended, not
 * stripped, which would drop it), overlap.so (overlap.s: overlapping FDEs;
 * -shared -nostdlib -s -Wl,--no-eh-frame-hdr) and prog (prog.c; -O2
 * -fomit-frame-pointer -s: PLT, _start, an alloca frame).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "fuzz_check.h"
#include "unwind_table.h"

/* Rows whose lookups are checked; the rest only for order, to keep each run fast. */
#define ROWS_LOOKED_UP 4096

/* Checks the table against the contract of unwind_table.h. */
static void check_table(const struct unwind_table *t)
{
    size_t ucfa = 0, urbp = 0;

    FUZZ_CHECK(t->n > 0 && t->n <= UNWIND_TABLE_MAX_ROWS && t->rows, "n %zu", t->n);
    for (size_t i = 0; i < t->n; i++) {
        const struct hp_unwind_row *r = &t->rows[i];
        FUZZ_CHECK(r->cfa_type <= HP_CFA_UNSUPPORTED && r->rbp_type <= HP_RBP_UNSUPPORTED,
                   "row %zu types %d/%d", i, r->cfa_type, r->rbp_type);
        ucfa += r->cfa_type == HP_CFA_UNSUPPORTED;
        urbp += r->rbp_type == HP_RBP_UNSUPPORTED;
        if (i == 0)
            continue;
        const struct hp_unwind_row *p = &t->rows[i - 1];
        FUZZ_CHECK(p->pc < r->pc, "row %zu pc 0x%x after 0x%x", i, r->pc, p->pc);
        FUZZ_CHECK(p->cfa_type != r->cfa_type || p->cfa_offset != r->cfa_offset ||
                       p->rbp_type != r->rbp_type || p->rbp_offset != r->rbp_offset,
                   "row %zu not merged with the one before", i);
    }
    FUZZ_CHECK(ucfa == t->unsupported_cfa && urbp == t->unsupported_rbp,
               "counted %zu/%zu, table says %zu/%zu", ucfa, urbp, t->unsupported_cfa,
               t->unsupported_rbp);
    FUZZ_CHECK(t->rows[t->n - 1].cfa_type == HP_CFA_NONE, "last row type %d",
               t->rows[t->n - 1].cfa_type);
    for (size_t i = 0; i < t->n && i < ROWS_LOOKED_UP; i++) {
        uint64_t at = t->base + t->rows[i].pc;
        FUZZ_CHECK(unwind_table_find(t, at) == &t->rows[i], "lookup of row %zu", i);
        if (i + 1 < t->n)
            FUZZ_CHECK(unwind_table_find(t, t->base + t->rows[i + 1].pc - 1) == &t->rows[i],
                       "lookup of the last byte of row %zu", i);
    }
    if (t->rows[0].pc > 0)
        FUZZ_CHECK(unwind_table_find(t, t->base + t->rows[0].pc - 1) == NULL, "below row 0");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct unwind_table t;
    int err = unwind_table_build_mem(data, size, &t);

    FUZZ_CHECK(err == 0 || err == -ENOENT || err == -ENOEXEC || err == -E2BIG || err == -ENOMEM,
               "error %d", err);
    if (err == 0)
        check_table(&t);
    else
        FUZZ_CHECK(t.rows == NULL && t.n == 0, "error %d left %zu rows", err, t.n);
    unwind_table_free(&t);
    return 0;
}
