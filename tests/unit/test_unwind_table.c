/*
 * test_unwind_table.c - unwind tables (daemon/unwind_table.c, cfi_rules.c)
 * checked against readelf's interpretation of the same CFI.
 *
 * The oracle is `readelf --debug-dump=frames-interp` run at test time, on
 * Debian's libc, on this test binary and on programs compiled here; odd CFI
 * comes from assembly written here with .cfi_* directives (and one
 * hand-written .eh_frame for overlapping FDEs). Nothing depends on the exact
 * build of libc seen today. Corrupted images (bytes of .eh_frame flipped,
 * files cut short) must give an error or a well-formed table; the _asan
 * build of this test is the one that proves no read goes out of bounds.
 */
#include "check.h"
#include "unwind_table.h"

#include <dlfcn.h>
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <link.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"

/* Longest readelf row we parse; libc's widest (all 17 registers) is ~200 characters. */
#define LINE_MAX_LEN 1024
/* Columns of a readelf row: LOC, CFA and up to 17 registers, with room to spare. */
#define MAX_COLS 40
/* CIEs remembered per file: libc has 3, python3 a few; a test file far fewer. */
#define MAX_CIES 64
/* Mismatches printed in full before the rest are only counted. */
#define MAX_PRINTED 10

/* The scratch directory of this run (mkdtemp). */
static char tmpdir[] = "/tmp/test_unwind_table.XXXXXX";

/* One row of readelf's interpretation: rules for [lo, hi). */
struct frow {
    uint64_t lo, hi;
    char cfa[32], rbp[32], ra[32];
    bool signal;
};

/* All rows readelf printed for one file. */
struct frows {
    struct frow *v;
    size_t n, cap;
};

/* A CIE's augmentation and initial row, for FDEs that add no rows of their own. */
struct fcie {
    int section;
    uint64_t off;
    struct frow init;
};

/* Runs `cmd` through the shell; 0 if it exited 0. */
static int sh(const char *cmd)
{
    int st = system(cmd);
    return st == 0 ? 0 : -1;
}

/* Writes `text` to tmpdir/name and puts the path into `path`. */
static void write_file(const char *name, const char *text, char *path, size_t cap)
{
    snprintf(path, cap, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* Builds tmpdir/out from tmpdir/src with gcc `flags`; 0 on success. */
static int gcc(const char *src, const char *flags, const char *out)
{
    char cmd[PATH_MAX * 3];
    snprintf(cmd, sizeof(cmd), "cd '%s' && gcc %s -o '%s' '%s'", tmpdir, flags, out, src);
    int err = sh(cmd);
    if (err)
        fprintf(stderr, "failed: %s\n", cmd);
    return err;
}

/* The address of symbol `name` in tmpdir/file (readelf -sW), or 0. */
static uint64_t symbol(const char *file, const char *name)
{
    char cmd[PATH_MAX + 64], line[LINE_MAX_LEN], val[32], sym[256];
    uint64_t addr = 0;
    snprintf(cmd, sizeof(cmd), "readelf -sW '%s/%s'", tmpdir, file);
    FILE *f = popen(cmd, "r");
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "%*s %31s %*s %*s %*s %*s %*s %255s", val, sym) == 2 &&
            strcmp(sym, name) == 0)
            addr = strtoull(val, NULL, 16);
    if (f)
        pclose(f);
    return addr;
}

/* Address and size of section `name` of `path` (libelf); false if absent. */
static bool section(const char *path, const char *name, uint64_t *addr, uint64_t *size,
                    uint64_t *offset)
{
    bool found = false;
    FILE *f = fopen(path, "rb");
    if (!f || elf_version(EV_CURRENT) == EV_NONE)
        goto out;
    Elf *elf = elf_begin(fileno(f), ELF_C_READ, NULL);
    size_t shstrndx;
    if (elf && elf_getshdrstrndx(elf, &shstrndx) == 0) {
        for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
            GElf_Shdr sh;
            const char *n;
            if (gelf_getshdr(scn, &sh) && (n = elf_strptr(elf, shstrndx, sh.sh_name)) &&
                strcmp(n, name) == 0) {
                *addr = sh.sh_addr;
                *size = sh.sh_size;
                if (offset)
                    *offset = sh.sh_offset;
                found = true;
                break;
            }
        }
    }
    if (elf)
        elf_end(elf);
out:
    if (f)
        fclose(f);
    return found;
}

/* Splits a readelf row at blanks, gluing "(name)" onto the "rN" before it. */
static int split_cols(char *line, char *cols[MAX_COLS])
{
    int n = 0;
    for (char *tok = strtok(line, " \t\n"); tok; tok = strtok(NULL, " \t\n")) {
        if (tok[0] == '(' && n > 0)
            continue; /* "r9 (r9)": the register number says it already */
        if (n < MAX_COLS)
            cols[n++] = tok;
    }
    return n;
}

/* Appends a row, growing the array. */
static void frows_add(struct frows *rs, const struct frow *r)
{
    if (rs->n == rs->cap) {
        rs->cap = rs->cap ? 2 * rs->cap : 1024;
        rs->v = realloc(rs->v, rs->cap * sizeof(*rs->v));
        if (!rs->v)
            abort();
    }
    rs->v[rs->n++] = *r;
}

/* Every row `readelf --debug-dump=frames-interp` prints for `path`, .eh_frame and .debug_frame. */
static int readelf_frames(const char *path, struct frows *out)
{
    char cmd[PATH_MAX + 64], line[LINE_MAX_LEN], *cols[MAX_COLS];
    struct fcie cies[MAX_CIES];
    struct fcie *cie = NULL; /* the CIE being read, or the current FDE's */
    size_t ncies = 0, fde_first = 0;
    int section = -1, col_rbp = -1, col_ra = -1;
    bool in_fde = false, in_cie = false;
    uint64_t off, cie_off, lo, hi, fde_lo = 0, fde_hi = 0, loc;

    memset(out, 0, sizeof(*out));
    snprintf(cmd, sizeof(cmd), "readelf --debug-dump=frames-interp '%s' 2>/dev/null", path);
    FILE *f = popen(cmd, "r");
    if (!f)
        return -errno;
    for (;;) {
        bool eof = !fgets(line, sizeof(line), f);
        bool fde_line = !eof && sscanf(line, "%" SCNx64 " %*x %*x FDE cie=%" SCNx64 " pc=%" SCNx64
                                       "..%" SCNx64, &off, &cie_off, &lo, &hi) == 4;
        const char *cie_aug = eof ? NULL : strstr(line, " CIE \"");
        bool new_section = !eof && strstr(line, "Contents of the") != NULL;

        /* An FDE ends where the next entry or section begins; one that
         * printed no rows of its own runs on its CIE's initial row. */
        if (in_fde && (eof || fde_line || cie_aug || new_section)) {
            if (out->n == fde_first && cie) {
                struct frow r = cie->init;
                r.lo = fde_lo;
                r.hi = fde_hi;
                frows_add(out, &r);
            }
            in_fde = false;
        }
        if (eof)
            break;
        if (new_section) {
            section++;
        } else if (cie_aug) {
            in_cie = ncies < MAX_CIES && sscanf(line, "%" SCNx64, &off) == 1;
            if (in_cie) {
                cie = &cies[ncies++];
                memset(cie, 0, sizeof(*cie));
                cie->section = section;
                cie->off = off;
                for (const char *q = cie_aug + 6; *q && *q != '"'; q++)
                    cie->init.signal |= *q == 'S';
            }
        } else if (fde_line) {
            cie = NULL;
            for (size_t i = 0; i < ncies; i++)
                if (cies[i].section == section && cies[i].off == cie_off)
                    cie = &cies[i];
            in_fde = true;
            in_cie = false;
            fde_first = out->n;
            fde_lo = lo;
            fde_hi = hi;
        } else if (strstr(line, "   LOC ")) {
            int n = split_cols(line, cols);
            col_rbp = col_ra = -1;
            for (int i = 0; i < n; i++) {
                if (strcmp(cols[i], "rbp") == 0)
                    col_rbp = i;
                if (strcmp(cols[i], "ra") == 0)
                    col_ra = i;
            }
        } else if (strlen(line) > 17 && line[16] == ' ' &&
                   sscanf(line, "%16" SCNx64, &loc) == 1) {
            int n = split_cols(line, cols);
            struct frow r = {.lo = loc, .hi = fde_hi};
            snprintf(r.cfa, sizeof(r.cfa), "%s", n > 1 ? cols[1] : "?");
            snprintf(r.rbp, sizeof(r.rbp), "%s", col_rbp > 0 && col_rbp < n ? cols[col_rbp] : "u");
            snprintf(r.ra, sizeof(r.ra), "%s", col_ra > 0 && col_ra < n ? cols[col_ra] : "?");
            if (in_cie && cie) {
                r.signal = cie->init.signal;
                cie->init = r;
                in_cie = false; /* only the first row is the initial state */
            } else if (in_fde) {
                r.signal = cie && cie->init.signal;
                if (out->n > fde_first)
                    out->v[out->n - 1].hi = loc;
                frows_add(out, &r);
            }
        }
    }
    pclose(f);
    return out->n ? 0 : -ENOENT;
}

/* What readelf's row says our row must hold. */
struct expect {
    int cfa_type;
    int32_t cfa_offset;
    int rbp_type;
    int16_t rbp_offset;
    bool expr; /* CFA "exp": the PLT expression or another one, HP_CFA_PLT or UNSUPPORTED */
};

/* Our reading of a readelf row, written independently of cfi_rules.c. */
static struct expect expect_of(const struct frow *r)
{
    struct expect e = {.rbp_type = HP_RBP_SAME};
    char reg[8];
    long v;

    if (r->signal) {
        e.cfa_type = HP_CFA_SIGNAL;
        return e;
    }
    if (strcmp(r->ra, "u") == 0) {
        e.cfa_type = HP_CFA_END;
        return e;
    }
    if (strcmp(r->ra, "c-8") != 0) {
        e.cfa_type = HP_CFA_UNSUPPORTED;
        return e;
    }
    if (strcmp(r->cfa, "exp") == 0) {
        e.expr = true;
    } else if (sscanf(r->cfa, "%7[a-z0-9]%ld", reg, &v) == 2 &&
               (strcmp(reg, "rsp") == 0 || strcmp(reg, "rbp") == 0)) {
        e.cfa_type = strcmp(reg, "rsp") == 0 ? HP_CFA_RSP : HP_CFA_RBP;
        e.cfa_offset = (int32_t)v;
    } else {
        e.cfa_type = HP_CFA_UNSUPPORTED;
        return e;
    }
    if (strcmp(r->rbp, "u") == 0 || strcmp(r->rbp, "s") == 0)
        e.rbp_type = HP_RBP_SAME;
    else if (sscanf(r->rbp, "c%ld", &v) == 1 && v >= INT16_MIN && v <= INT16_MAX)
        e.rbp_type = HP_RBP_OFFSET, e.rbp_offset = (int16_t)v;
    else
        e.rbp_type = HP_RBP_UNSUPPORTED;
    return e;
}

/* Whether our row `g` holds what `e` expects. */
static bool row_matches(const struct expect *e, const struct hp_unwind_row *g)
{
    if (!g)
        return false;
    if (e->expr && g->cfa_type == HP_CFA_UNSUPPORTED)
        return true;
    if (e->expr ? g->cfa_type != HP_CFA_PLT : g->cfa_type != e->cfa_type)
        return false;
    if ((g->cfa_type == HP_CFA_RSP || g->cfa_type == HP_CFA_RBP) && g->cfa_offset != e->cfa_offset)
        return false;
    if (g->cfa_type != HP_CFA_RSP && g->cfa_type != HP_CFA_RBP && g->cfa_type != HP_CFA_PLT)
        return true;
    return g->rbp_type == e->rbp_type &&
           (g->rbp_type != HP_RBP_OFFSET || g->rbp_offset == e->rbp_offset);
}

/* The invariants every table holds, whatever the input was. */
static void check_table_shape(const struct unwind_table *t)
{
    size_t ucfa = 0, urbp = 0, bad = 0;
    CHECK(t->n > 0 && t->n <= UNWIND_TABLE_MAX_ROWS);
    for (size_t i = 0; i < t->n; i++) {
        const struct hp_unwind_row *r = &t->rows[i], *p = i ? &t->rows[i - 1] : NULL;
        ucfa += r->cfa_type == HP_CFA_UNSUPPORTED;
        urbp += r->rbp_type == HP_RBP_UNSUPPORTED;
        if (r->cfa_type > HP_CFA_UNSUPPORTED || r->rbp_type > HP_RBP_UNSUPPORTED ||
            (p && p->pc >= r->pc) ||
            (p && p->cfa_type == r->cfa_type && p->cfa_offset == r->cfa_offset &&
             p->rbp_type == r->rbp_type && p->rbp_offset == r->rbp_offset)) {
            if (bad++ < MAX_PRINTED)
                fprintf(stderr, "  bad row %zu: pc 0x%x type %d off %d rbp %d/%d\n", i, r->pc,
                        r->cfa_type, r->cfa_offset, r->rbp_type, r->rbp_offset);
        }
    }
    CHECK_INT_EQ(bad, 0);
    CHECK_INT_EQ(ucfa, t->unsupported_cfa);
    CHECK_INT_EQ(urbp, t->unsupported_rbp);
    CHECK_INT_EQ(t->rows[t->n - 1].cfa_type, HP_CFA_NONE); /* the last FDE's end */
}

/* Checks our table of `path` against every row readelf prints, at each row's first and last byte. */
static void compare_with_readelf(const char *path, size_t min_rows)
{
    struct frows fr;
    struct unwind_table t;
    size_t checked = 0, wrong = 0;

    CHECK_INT_EQ(readelf_frames(path, &fr), 0);
    CHECK_INT_EQ(unwind_table_build(path, &t), 0);
    if (t.n)
        check_table_shape(&t);
    for (size_t i = 0; i < fr.n; i++) {
        const struct frow *r = &fr.v[i];
        if (r->hi <= r->lo)
            continue; /* an empty row (advance by 0): rules for no address */
        struct expect e = expect_of(r);
        uint64_t at[2] = {r->lo, r->hi - 1};
        for (int k = 0; k < 2; k++, checked++) {
            const struct hp_unwind_row *g = unwind_table_find(&t, at[k]);
            if (row_matches(&e, g))
                continue;
            if (wrong++ < MAX_PRINTED)
                fprintf(stderr,
                        "  %s 0x%" PRIx64 ": readelf CFA %s rbp %s ra %s%s; ours type %d off %d "
                        "rbp %d/%d\n",
                        path, at[k], r->cfa, r->rbp, r->ra, r->signal ? " (signal)" : "",
                        g ? g->cfa_type : -1, g ? g->cfa_offset : 0, g ? g->rbp_type : -1,
                        g ? g->rbp_offset : 0);
        }
    }
    fprintf(stderr, "  %s: %zu readelf rows, %zu addresses checked, %zu table rows\n", path, fr.n,
            checked, t.n);
    CHECK(checked >= min_rows);
    CHECK_INT_EQ(wrong, 0);
    free(fr.v);
    unwind_table_free(&t);
}

/* A program with PLT calls, _start from Debian's crt1, and an alloca frame. */
static const char prog_c[] = "#include <alloca.h>\n"
                             "#include <stdio.h>\n"
                             "#include <string.h>\n"
                             "__attribute__((noinline)) int vla_frame(int n)\n"
                             "{\n"
                             "    char *p = alloca(n);\n"
                             "    memset(p, 'a', n);\n"
                             "    p[n - 1] = 0;\n"
                             "    puts(p);\n"
                             "    return p[n / 2];\n"
                             "}\n"
                             "int main(int argc, char **argv)\n"
                             "{\n"
                             "    printf(\"%d %s\\n\", vla_frame(argc * 16), argv[0]);\n"
                             "    return 0;\n"
                             "}\n";

/* Odd CFI, one function per case; every instruction used is one byte (nop, ret, push, pop,
 * leave) except `mov %rsp,%rbp` (three), so the offsets in test_odd_cfi are exact. */
static const char odd_s[] =
    "    .text\n"
    "    .macro FN name\n"
    "    .globl \\name\n"
    "    .type \\name,@function\n"
    "\\name:\n"
    "    .endm\n"
    /* DW_CFA_def_cfa_expression: DW_OP_breg7 8; DW_OP_deref */
    "    FN f_expr\n    .cfi_startproc\n    nop\n"
    "    .cfi_escape 0x0f, 0x03, 0x77, 0x08, 0x06\n    nop\n    ret\n    .cfi_endproc\n"
    "    FN f_undef_rip\n    .cfi_startproc\n    .cfi_undefined rip\n    nop\n    ret\n"
    "    .cfi_endproc\n"
    "    .skip 64\n"
    "    FN f_ra_register\n    .cfi_startproc\n    nop\n    .cfi_register rip, rax\n    nop\n"
    "    ret\n    .cfi_endproc\n"
    "    FN f_state\n    .cfi_startproc\n    push %rbp\n    .cfi_def_cfa_offset 16\n"
    "    .cfi_offset rbp, -16\n    nop\n    .cfi_remember_state\n    pop %rbp\n"
    "    .cfi_def_cfa_offset 8\n    .cfi_restore rbp\n    ret\n    .cfi_restore_state\n"
    "    nop\n    ret\n    .cfi_endproc\n"
    "    FN f_huge\n    .cfi_startproc\n    nop\n    .cfi_def_cfa_offset 0x100000000\n    nop\n"
    "    .cfi_def_cfa_offset 16\n    .cfi_offset rbp, -0x20000\n    nop\n    ret\n"
    "    .cfi_endproc\n"
    "    FN f_signal\n    .cfi_startproc\n    .cfi_signal_frame\n    nop\n    ret\n"
    "    .cfi_endproc\n"
    /* The PLT expression with DW_OP_lit10 (.plt.sec's) */
    "    FN f_plt10\n    .cfi_startproc\n    nop\n"
    "    .cfi_escape 0x0f, 0x0b, 0x77, 0x08, 0x80, 0x00, 0x3f, 0x1a, 0x3a, 0x2a, 0x33, 0x24, 0x22\n"
    "    nop\n    ret\n    .cfi_endproc\n"
    /* DW_CFA_GNU_window_save: SPARC's, unknown on x86_64 */
    "    FN f_window_save\n    .cfi_startproc\n    nop\n    .cfi_escape 0x2d\n    nop\n"
    "    ret\n    .cfi_endproc\n"
    /* 40 x DW_CFA_remember_state: deeper than we follow */
    "    FN f_deep\n    .cfi_startproc\n    nop\n    .rept 40\n    .cfi_escape 0x0a\n"
    "    .endr\n    nop\n    ret\n    .cfi_endproc\n"
    "    FN f_rbp_register\n    .cfi_startproc\n    nop\n    .cfi_register rbp, rbx\n"
    "    nop\n    ret\n    .cfi_endproc\n"
    /* DW_CFA_GNU_args_size 16: ignored */
    "    FN f_args_size\n    .cfi_startproc\n    nop\n    .cfi_escape 0x2e, 0x10\n    nop\n"
    "    ret\n    .cfi_endproc\n"
    "    FN f_ra_offset16\n    .cfi_startproc\n    nop\n    .cfi_offset rip, -16\n    nop\n"
    "    ret\n    .cfi_endproc\n"
    /* DW_CFA_def_cfa_sf rsp, -2 (times the data alignment -8: 16) */
    "    FN f_cfa_sf\n    .cfi_startproc\n    nop\n    .cfi_escape 0x12, 0x07, 0x7e\n    nop\n"
    "    ret\n    .cfi_endproc\n"
    /* DW_CFA_restore_state with nothing remembered */
    "    FN f_restore_empty\n    .cfi_startproc\n    nop\n    .cfi_escape 0x0b\n    nop\n"
    "    ret\n    .cfi_endproc\n"
    "    FN f_r12\n    .cfi_startproc\n    nop\n    .cfi_def_cfa r12, 8\n    nop\n    ret\n"
    "    .cfi_endproc\n"
    "    FN f_val_offset_rbp\n    .cfi_startproc\n    nop\n    .cfi_val_offset rbp, -16\n"
    "    nop\n    ret\n    .cfi_endproc\n"
    "    FN f_rbp_cfa\n    .cfi_startproc\n    push %rbp\n    .cfi_def_cfa_offset 16\n"
    "    .cfi_offset rbp, -16\n    mov %rsp, %rbp\n    .cfi_def_cfa_register rbp\n    nop\n"
    "    leave\n    .cfi_def_cfa rsp, 8\n    ret\n    .cfi_endproc\n"
    /* DW_CFA_GNU_negative_offset_extended rbp, 2: saved at CFA + 16 */
    "    FN f_neg_offset\n    .cfi_startproc\n    nop\n    .cfi_escape 0x2f, 0x06, 0x02\n"
    "    nop\n    ret\n    .cfi_endproc\n"
    /* an expression CFA, then DW_CFA_def_cfa_offset, which only a register CFA has */
    "    FN f_expr_then_offset\n    .cfi_startproc\n    nop\n"
    "    .cfi_escape 0x0f, 0x02, 0x77, 0x08\n    nop\n    .cfi_def_cfa_offset 16\n    nop\n"
    "    ret\n    .cfi_endproc\n";

/* FDEs that overlap (written by hand: gas never makes them), each with its own CFA offset. */
static const char overlap_s[] = "    .text\n"
                                "    .globl outer, partial, same\n"
                                "    .hidden outer, partial, same\n"
                                "outer: .fill 32, 1, 0x90\n"
                                "partial: .fill 32, 1, 0x90\n"
                                "same: .fill 16, 1, 0x90\n"
                                "    .macro FDE name, start, len, off\n"
                                "\\name:\n"
                                "    .long \\name\\()_end - \\name\\()_id\n"
                                "\\name\\()_id:\n"
                                "    .long \\name\\()_id - cie\n"
                                "    .long \\start - .\n"
                                "    .long \\len\n"
                                "    .uleb128 0\n"
                                "    .byte 0x0e, \\off\n"
                                "    .balign 8, 0\n"
                                "\\name\\()_end:\n"
                                "    .endm\n"
                                "    .section .eh_frame,\"a\",@unwind\n"
                                "cie:\n"
                                "    .long cie_end - cie_id\n"
                                "cie_id:\n"
                                "    .long 0\n"
                                "    .byte 1\n"
                                "    .asciz \"zR\"\n"
                                "    .uleb128 1\n"
                                "    .sleb128 -8\n"
                                "    .uleb128 16\n"
                                "    .uleb128 1\n"
                                "    .byte 0x1b\n"
                                "    .byte 0x0c, 7, 8\n"
                                "    .byte 0x90, 1\n"
                                "    .balign 8, 0\n"
                                "cie_end:\n"
                                "    FDE fa, outer, 32, 16\n"
                                "    FDE fb, outer+8, 8, 24\n"
                                "    FDE fc, partial, 16, 32\n"
                                "    FDE fd, partial+8, 16, 40\n"
                                "    FDE fe, same, 8, 48\n"
                                "    FDE ff, same, 16, 56\n"
                                "    .long 0\n";

/* Code and no CFI at all. */
static const char nocfi_s[] = "    .text\n    .globl f\nf:  nop\n    ret\n";

/* Builds the table of tmpdir/file; fails the test if it cannot. */
static int build_tmp(const char *file, struct unwind_table *t)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", tmpdir, file);
    int err = unwind_table_build(path, t);
    CHECK_INT_EQ(err, 0);
    if (!err)
        check_table_shape(t);
    return err;
}

/* Checks the row at `vaddr`: its CFA type and offset, and its rbp rule. */
#define CHECK_ROW(t, vaddr, type, off, rtype, roff)                                                \
    do {                                                                                           \
        const struct hp_unwind_row *r_ = unwind_table_find((t), (vaddr));                          \
        CHECK(r_ != NULL);                                                                         \
        if (r_) {                                                                                  \
            CHECK_INT_EQ(r_->cfa_type, (type));                                                    \
            CHECK_INT_EQ(r_->cfa_offset, (off));                                                   \
            CHECK_INT_EQ(r_->rbp_type, (rtype));                                                   \
            CHECK_INT_EQ(r_->rbp_offset, (roff));                                                  \
        }                                                                                          \
    } while (0)

/* Checks only the CFA type of the row at `vaddr`. */
#define CHECK_TYPE(t, vaddr, type)                                                                 \
    do {                                                                                           \
        const struct hp_unwind_row *r_ = unwind_table_find((t), (vaddr));                          \
        CHECK_INT_EQ(r_ ? r_->cfa_type : -1, (type));                                              \
    } while (0)

static void libc_rows_match_readelf(void)
{
    compare_with_readelf(LIBC, 20000);
}

static void this_binary_rows_match_readelf(void)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    CHECK(n > 0);
    self[n > 0 ? n : 0] = '\0';
    compare_with_readelf(self, 100);
}

static void compiled_program_rows_match_readelf(void)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/prog", tmpdir);
    compare_with_readelf(path, 10);
    snprintf(path, sizeof(path), "%s/prog_ibt", tmpdir);
    compare_with_readelf(path, 10);
}

static void debug_frame_is_read_when_there_is_no_eh_frame(void)
{
    char path[PATH_MAX];
    uint64_t addr, size;
    snprintf(path, sizeof(path), "%s/dbg.so", tmpdir);
    CHECK(section(path, ".debug_frame", &addr, &size, NULL));
    CHECK(!section(path, ".eh_frame", &addr, &size, NULL) || size == 0);
    compare_with_readelf(path, 4);
}

static void plt_stubs_get_plt_rows(void)
{
    struct unwind_table t;
    char path[PATH_MAX];
    uint64_t plt, size;

    snprintf(path, sizeof(path), "%s/prog", tmpdir);
    if (build_tmp("prog", &t) == 0 && section(path, ".plt", &plt, &size, NULL)) {
        CHECK(size >= 32); /* PLT0 and at least one stub: puts, printf */
        CHECK_ROW(&t, plt, HP_CFA_RSP, 16, HP_RBP_SAME, 0); /* PLT0 after its push */
        for (uint64_t a = plt + 16; a < plt + size; a++)
            CHECK_ROW(&t, a, HP_CFA_PLT, 11, HP_RBP_SAME, 0);
    }
    unwind_table_free(&t);

    /* IBT PLTs (-z ibtplt): the stubs in .plt are 16 bytes with an endbr64
     * first, so ld's literal is smaller; .plt.sec stubs push nothing. */
    snprintf(path, sizeof(path), "%s/prog_ibt", tmpdir);
    if (build_tmp("prog_ibt", &t) == 0 && section(path, ".plt", &plt, &size, NULL)) {
        for (uint64_t a = plt + 16; a < plt + size; a++) {
            const struct hp_unwind_row *r = unwind_table_find(&t, a);
            CHECK(r && r->cfa_type == HP_CFA_PLT && r->cfa_offset > 8 && r->cfa_offset < 12);
        }
        CHECK(section(path, ".plt.sec", &plt, &size, NULL));
        for (uint64_t a = plt; a < plt + size; a++)
            CHECK_ROW(&t, a, HP_CFA_RSP, 8, HP_RBP_SAME, 0);
    }
    unwind_table_free(&t);
}

static void start_is_the_end_of_the_stack(void)
{
    struct unwind_table t;
    uint64_t start = symbol("prog", "_start");
    CHECK(start != 0);
    /* Debian's Scrt1.o gives _start an FDE whose CIE says DW_CFA_undefined rip. */
    if (build_tmp("prog", &t) == 0) {
        CHECK_TYPE(&t, start, HP_CFA_END);
        CHECK_TYPE(&t, start + 1, HP_CFA_END);
    }
    unwind_table_free(&t);
}

static void restore_rt_is_a_signal_frame(void)
{
    /* The kernel's view of a handler glibc installed: sa_restorer is __restore_rt. */
    struct {
        void *handler;
        unsigned long flags;
        void *restorer;
        uint64_t mask;
    } k;
    struct sigaction sa = {.sa_handler = SIG_IGN};
    struct link_map *lm = NULL;
    struct unwind_table t;
    Dl_info info;

    CHECK_INT_EQ(sigaction(SIGUSR2, &sa, NULL), 0);
    CHECK_INT_EQ(syscall(SYS_rt_sigaction, SIGUSR2, NULL, &k, sizeof(k.mask)), 0);
    CHECK(dladdr1(k.restorer, &info, (void **)&lm, RTLD_DL_LINKMAP) != 0 && lm);
    if (!lm)
        return;
    CHECK(strstr(info.dli_fname, "libc.so.6") != NULL);
    uint64_t vaddr = (uint64_t)(uintptr_t)k.restorer - lm->l_addr;
    CHECK_INT_EQ(unwind_table_build(info.dli_fname, &t), 0);
    /* glibc's FDE starts one byte early (a nop) so that pc - 1 still finds it. */
    CHECK_TYPE(&t, vaddr, HP_CFA_SIGNAL);
    CHECK_TYPE(&t, vaddr - 1, HP_CFA_SIGNAL);
    unwind_table_free(&t);
}

static void alloca_frame_uses_rbp(void)
{
    struct unwind_table t;
    uint64_t f = symbol("prog", "vla_frame");
    size_t rbp_rows = 0;
    CHECK(f != 0);
    if (build_tmp("prog", &t) != 0)
        return;
    CHECK_ROW(&t, f, HP_CFA_RSP, 8, HP_RBP_SAME, 0);
    for (size_t i = 0; i < t.n; i++) {
        const struct hp_unwind_row *r = &t.rows[i];
        if (r->pc + t.base > f && r->pc + t.base < f + 256 && r->cfa_type == HP_CFA_RBP) {
            CHECK_INT_EQ(r->cfa_offset, 16);
            CHECK_INT_EQ(r->rbp_type, HP_RBP_OFFSET);
            CHECK_INT_EQ(r->rbp_offset, -16);
            rbp_rows++;
        }
    }
    CHECK(rbp_rows >= 1);
    unwind_table_free(&t);
}

/* Checks odd.so or a variant of it (same code, CFI in another section). */
static void check_odd(const char *file, bool signal_kept)
{
    struct unwind_table t;
    if (build_tmp(file, &t) != 0)
        return;
#define AT(fn, k) (symbol(file, fn) + (k))
    CHECK_ROW(&t, AT("f_expr", 0), HP_CFA_RSP, 8, HP_RBP_SAME, 0);
    CHECK_TYPE(&t, AT("f_expr", 1), HP_CFA_UNSUPPORTED);
    CHECK_TYPE(&t, AT("f_undef_rip", 0), HP_CFA_END);
    CHECK_TYPE(&t, AT("f_undef_rip", 2), HP_CFA_NONE); /* the .skip gap */
    CHECK_TYPE(&t, AT("f_ra_register", 0), HP_CFA_RSP);
    CHECK_TYPE(&t, AT("f_ra_register", 1), HP_CFA_UNSUPPORTED);
    CHECK_ROW(&t, AT("f_state", 0), HP_CFA_RSP, 8, HP_RBP_SAME, 0);
    CHECK_ROW(&t, AT("f_state", 1), HP_CFA_RSP, 16, HP_RBP_OFFSET, -16);
    CHECK_ROW(&t, AT("f_state", 2), HP_CFA_RSP, 16, HP_RBP_OFFSET, -16);
    CHECK_ROW(&t, AT("f_state", 3), HP_CFA_RSP, 8, HP_RBP_SAME, 0);
    CHECK_ROW(&t, AT("f_state", 4), HP_CFA_RSP, 16, HP_RBP_OFFSET, -16); /* restore_state */
    CHECK_TYPE(&t, AT("f_huge", 1), HP_CFA_UNSUPPORTED); /* CFA offset 2^32 */
    CHECK_ROW(&t, AT("f_huge", 2), HP_CFA_RSP, 16, HP_RBP_UNSUPPORTED, 0); /* rbp at -0x20000 */
    CHECK_TYPE(&t, AT("f_signal", 0), signal_kept ? HP_CFA_SIGNAL : HP_CFA_NONE);
    CHECK_ROW(&t, AT("f_plt10", 1), HP_CFA_PLT, 10, HP_RBP_SAME, 0);
    CHECK_TYPE(&t, AT("f_window_save", 1), HP_CFA_UNSUPPORTED);
    CHECK_TYPE(&t, AT("f_window_save", 2), HP_CFA_UNSUPPORTED);
    CHECK_TYPE(&t, AT("f_deep", 1), HP_CFA_UNSUPPORTED);
    CHECK_ROW(&t, AT("f_rbp_register", 1), HP_CFA_RSP, 8, HP_RBP_UNSUPPORTED, 0);
    CHECK_ROW(&t, AT("f_args_size", 1), HP_CFA_RSP, 8, HP_RBP_SAME, 0);
    CHECK_TYPE(&t, AT("f_ra_offset16", 1), HP_CFA_UNSUPPORTED);
    CHECK_ROW(&t, AT("f_cfa_sf", 1), HP_CFA_RSP, 16, HP_RBP_SAME, 0);
    CHECK_TYPE(&t, AT("f_restore_empty", 1), HP_CFA_UNSUPPORTED);
    CHECK_TYPE(&t, AT("f_r12", 1), HP_CFA_UNSUPPORTED);
    CHECK_ROW(&t, AT("f_val_offset_rbp", 1), HP_CFA_RSP, 8, HP_RBP_UNSUPPORTED, 0);
    CHECK_ROW(&t, AT("f_rbp_cfa", 4), HP_CFA_RBP, 16, HP_RBP_OFFSET, -16);
    CHECK_ROW(&t, AT("f_rbp_cfa", 6), HP_CFA_RSP, 8, HP_RBP_OFFSET, -16);
    CHECK_ROW(&t, AT("f_neg_offset", 1), HP_CFA_RSP, 8, HP_RBP_OFFSET, 16);
    CHECK_TYPE(&t, AT("f_expr_then_offset", 1), HP_CFA_UNSUPPORTED);
    CHECK_TYPE(&t, AT("f_expr_then_offset", 2), HP_CFA_UNSUPPORTED);
#undef AT
    CHECK(t.unsupported_cfa >= 10);
    CHECK(t.unsupported_rbp >= 3);
    unwind_table_free(&t);
}

static void odd_cfi_maps_to_the_right_rows(void)
{
    check_odd("odd.so", true);
    /* gas writes no 'S' augmentation into .debug_frame, so f_signal has no FDE there. */
    check_odd("odd_dbg.so", false);
    /* Both sections describe the same code: .eh_frame wins each tie, with equal rules. */
    check_odd("odd_both.so", true);
}

static void overlapping_fdes_keep_the_earliest_then_longest(void)
{
    struct unwind_table t;
    uint64_t outer = symbol("overlap.so", "outer"), partial = symbol("overlap.so", "partial"),
             same = symbol("overlap.so", "same");
    if (build_tmp("overlap.so", &t) != 0)
        return;
    CHECK_INT_EQ(t.fdes, 6);
    /* [outer, +32) CFA rsp+16 holds [outer+8, +16) rsp+24 wholly: the outer one wins. */
    CHECK_ROW(&t, outer + 8, HP_CFA_RSP, 16, HP_RBP_SAME, 0);
    CHECK_ROW(&t, outer + 31, HP_CFA_RSP, 16, HP_RBP_SAME, 0);
    /* [partial, +16) rsp+32 then [partial+8, +16) rsp+40: the second covers only what is past. */
    CHECK_ROW(&t, partial + 8, HP_CFA_RSP, 32, HP_RBP_SAME, 0);
    CHECK_ROW(&t, partial + 16, HP_CFA_RSP, 40, HP_RBP_SAME, 0);
    CHECK_TYPE(&t, partial + 24, HP_CFA_NONE);
    /* Two FDEs at `same`: the longer (rsp+56) wins. */
    CHECK_ROW(&t, same, HP_CFA_RSP, 56, HP_RBP_SAME, 0);
    CHECK_ROW(&t, same + 15, HP_CFA_RSP, 56, HP_RBP_SAME, 0);
    CHECK_TYPE(&t, same + 16, HP_CFA_NONE);
    unwind_table_free(&t);
}

/* The whole of a file, read into memory; NULL on failure. */
static unsigned char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    unsigned char *buf = NULL;
    long n;
    if (f && fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
        (buf = malloc((size_t)n)) && fread(buf, 1, (size_t)n, f) == (size_t)n)
        *len = (size_t)n;
    else if (buf)
        free(buf), buf = NULL;
    if (f)
        fclose(f);
    return buf;
}

static void build_and_build_mem_agree(void)
{
    struct unwind_table a, b;
    size_t len = 0;
    unsigned char *img = slurp(LIBC, &len);
    CHECK(img != NULL);
    if (!img)
        return;
    CHECK_INT_EQ(unwind_table_build(LIBC, &a), 0);
    CHECK_INT_EQ(unwind_table_build_mem(img, len, &b), 0);
    CHECK_INT_EQ(a.n, b.n);
    CHECK_U64_EQ(a.base, b.base);
    CHECK_INT_EQ(a.fdes, b.fdes);
    CHECK(a.n == b.n && memcmp(a.rows, b.rows, a.n * sizeof(*a.rows)) == 0);
    unwind_table_free(&a);
    unwind_table_free(&b);
    free(img);
}

static void bad_inputs_are_refused(void)
{
    struct unwind_table t;
    char path[PATH_MAX];
    unsigned char empty[1] = {0};

    CHECK_INT_EQ(unwind_table_build("/nonexistent/libfoo.so", &t), -ENOENT);
    CHECK_INT_EQ(unwind_table_build(tmpdir, &t), -ENOEXEC);
    snprintf(path, sizeof(path), "%s/prog.c", tmpdir);
    CHECK_INT_EQ(unwind_table_build(path, &t), -ENOEXEC);
    snprintf(path, sizeof(path), "%s/prog.o", tmpdir);
    CHECK_INT_EQ(unwind_table_build(path, &t), -ENOEXEC); /* relocatable: nothing loaded */
    snprintf(path, sizeof(path), "%s/nocfi.so", tmpdir);
    CHECK_INT_EQ(unwind_table_build(path, &t), -ENOENT);
    CHECK_INT_EQ(unwind_table_build_mem(empty, 0, &t), -ENOEXEC);
    CHECK(t.rows == NULL && t.n == 0);

    /* Another machine's ELF. */
    size_t len = 0;
    snprintf(path, sizeof(path), "%s/prog", tmpdir);
    unsigned char *img = slurp(path, &len);
    CHECK(img && len > 64);
    if (img) {
        img[18] = 0xb7; /* e_machine = EM_AARCH64 */
        CHECK_INT_EQ(unwind_table_build_mem(img, len, &t), -ENOEXEC);
        free(img);
    }
}

/* A small deterministic generator (xorshift64), so a failure can be replayed. */
static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Builds from `img` and checks the answer is an expected error or a well-formed table. */
static void check_build_survives(const unsigned char *img, size_t len)
{
    struct unwind_table t;
    int err = unwind_table_build_mem(img, len, &t);
    CHECK(err == 0 || err == -ENOENT || err == -ENOEXEC || err == -E2BIG);
    if (err == 0) {
        check_table_shape(&t);
        (void)unwind_table_find(&t, t.base + t.rows[t.n / 2].pc);
    } else {
        CHECK(t.rows == NULL && t.n == 0);
    }
    unwind_table_free(&t);
}

/* Flips bytes of .eh_frame `rounds` times (a fresh copy each time) and cuts the file short. */
static void corrupt_and_build(const char *path, unsigned rounds, uint64_t seed)
{
    uint64_t addr, size, off, s = seed;
    size_t len = 0;
    unsigned char *img = slurp(path, &len), *copy = malloc(len ? len : 1);
    CHECK(img && copy && section(path, ".eh_frame", &addr, &size, &off));
    if (!img || !copy || !section(path, ".eh_frame", &addr, &size, &off) || off + size > len)
        goto out;
    for (unsigned i = 0; i < rounds; i++) {
        memcpy(copy, img, len);
        unsigned flips = 1 + next_rand(&s) % 8;
        for (unsigned k = 0; k < flips; k++) {
            uint64_t at = off + next_rand(&s) % size;
            copy[at] ^= (unsigned char)(1u << (next_rand(&s) % 8));
            if (next_rand(&s) % 4 == 0)
                copy[at] = (unsigned char)next_rand(&s); /* sometimes a whole new byte */
        }
        check_build_survives(copy, len);
    }
    /* Cut inside and around .eh_frame, and at a spread of other lengths. The
     * copy is exactly as long as the cut so ASan sees any read past it. */
    size_t cuts[] = {0, 1, 16, 63, 64, 65, off, off + 4, off + size / 2, off + size - 1, len - 1};
    for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]) + 16; i++) {
        size_t n = i < sizeof(cuts) / sizeof(cuts[0]) ? cuts[i] : next_rand(&s) % len;
        unsigned char *cut = malloc(n ? n : 1);
        if (!cut)
            break;
        memcpy(cut, img, n);
        check_build_survives(cut, n);
        free(cut);
    }
out:
    free(img);
    free(copy);
}

static void corrupted_images_give_an_error_or_a_table(void)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/prog", tmpdir);
    corrupt_and_build(path, 2000, 0x9e3779b97f4a7c15ull);
    snprintf(path, sizeof(path), "%s/odd.so", tmpdir);
    corrupt_and_build(path, 2000, 0xd1b54a32d192ed03ull);
    corrupt_and_build(LIBC, 20, 0x2545f4914f6cdd1dull);
}

static void find_outside_the_table_is_null(void)
{
    struct unwind_table t, empty = {0};
    CHECK(unwind_table_find(&empty, 0) == NULL);
    CHECK(unwind_table_find(NULL, 0) == NULL);
    if (build_tmp("prog", &t) != 0)
        return;
    uint64_t first = t.base + t.rows[0].pc;
    if (first > 0)
        CHECK(unwind_table_find(&t, first - 1) == NULL);
    CHECK(unwind_table_find(&t, first) == &t.rows[0]);
    CHECK(unwind_table_find(&t, t.base + 0x100000000ull) == NULL); /* past 32-bit pcs */
    CHECK_TYPE(&t, t.base + t.rows[t.n - 1].pc + 12345, HP_CFA_NONE);
    unwind_table_free(&t);
}

/* Writes the sources and builds the test programs in tmpdir; 0 if all built. */
static int setup(void)
{
    char path[PATH_MAX];
    int err = 0;

    if (!mkdtemp(tmpdir))
        return -errno;
    write_file("prog.c", prog_c, path, sizeof(path));
    write_file("odd.s", odd_s, path, sizeof(path));
    write_file("overlap.s", overlap_s, path, sizeof(path));
    write_file("nocfi.s", nocfi_s, path, sizeof(path));
    /* .cfi_sections must come before any CFI: prepend it to copies of odd.s. */
    snprintf(path, sizeof(path),
             "cd '%s' && (echo '.cfi_sections .debug_frame'; cat odd.s) > odd_dbg.s && "
             "(echo '.cfi_sections .eh_frame, .debug_frame'; cat odd.s) > odd_both.s",
             tmpdir);
    err |= sh(path);
    err |= gcc("prog.c", "-O2 -fomit-frame-pointer", "prog");
    err |= gcc("prog.c", "-O2 -fomit-frame-pointer -fcf-protection=full -Wl,-z,ibtplt", "prog_ibt");
    err |= gcc("prog.c", "-O2 -c", "prog.o");
    err |= gcc("prog.c", "-O2 -g -fno-asynchronous-unwind-tables -shared -fPIC -nostdlib",
               "dbg.so");
    err |= gcc("odd.s", "-shared -nostdlib", "odd.so");
    err |= gcc("odd_dbg.s", "-shared -nostdlib", "odd_dbg.so");
    err |= gcc("odd_both.s", "-shared -nostdlib", "odd_both.so");
    /* ld refuses to index overlapping FDEs in .eh_frame_hdr; we do not need it. */
    err |= gcc("overlap.s", "-shared -nostdlib -Wl,--no-eh-frame-hdr", "overlap.so");
    err |= gcc("nocfi.s", "-shared -nostdlib", "nocfi.so");
    return err ? -EIO : 0;
}

int main(void)
{
    char cmd[PATH_MAX + 16];
    int err = setup();
    CHECK_INT_EQ(err, 0);
    if (err == 0) {
        RUN_TEST(libc_rows_match_readelf);
        RUN_TEST(this_binary_rows_match_readelf);
        RUN_TEST(compiled_program_rows_match_readelf);
        RUN_TEST(debug_frame_is_read_when_there_is_no_eh_frame);
        RUN_TEST(plt_stubs_get_plt_rows);
        RUN_TEST(start_is_the_end_of_the_stack);
        RUN_TEST(restore_rt_is_a_signal_frame);
        RUN_TEST(alloca_frame_uses_rbp);
        RUN_TEST(odd_cfi_maps_to_the_right_rows);
        RUN_TEST(overlapping_fdes_keep_the_earliest_then_longest);
        RUN_TEST(build_and_build_mem_agree);
        RUN_TEST(bad_inputs_are_refused);
        RUN_TEST(corrupted_images_give_an_error_or_a_table);
        RUN_TEST(find_outside_the_table_is_null);
    }
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    if (sh(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
    return check_exit_code();
}
