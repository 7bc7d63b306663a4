/*
 * test_unwind_table.c - unwind tables (daemon/unwind/unwind_table.c, cfi_rules.c)
 * checked against readelf's interpretation of the same CFI.
 *
 * The oracle is `readelf --debug-dump=frames-interp` run at test time
 * (readelf_frames.c), on Debian's libc, on this test binary and on programs
 * compiled here from data/unwind_table/: prog.c (PLT, _start, alloca), odd.s
 * (odd CFI, one function per case, with .cfi_* directives) and overlap.s
 * (a hand-written .eh_frame with overlapping FDEs). Nothing depends on the
 * exact build of libc seen today. Corrupted images (bytes of .eh_frame flipped,
 * files cut short) must give an error or a well-formed table; the _asan
 * build of this test is the one that proves no read goes out of bounds.
 */
#include "check.h"
#include "readelf_frames.h"
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

/* Mismatches printed in full before the rest are only counted. */
#define MAX_PRINTED 10
/* Longest line of `readelf -sW` we read; symbol lines are ~100 characters. */
#define LINE_LEN 1024

/* The scratch directory of this run (mkdtemp): programs are built there. */
static char tmpdir[] = "/tmp/test_unwind_table.XXXXXX";

/* Runs `cmd` through the shell; 0 if it exited 0. */
static int sh(const char *cmd)
{
    int st = system(cmd);
    return st == 0 ? 0 : -1;
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
    char cmd[PATH_MAX + 64], line[LINE_LEN], val[32], sym[256];
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
    if (t->n == 0)
        return;
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

/* Checks our table of `path` against every row readelf prints, at its first and last byte. */
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
    frows_free(&fr);
    unwind_table_free(&t);
}

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

    /* libc's own PLT (calls into ld.so and its IFUNC-resolved string functions). */
    CHECK_INT_EQ(unwind_table_build(LIBC, &t), 0);
    CHECK(section(LIBC, ".plt", &plt, &size, NULL) && size > 16);
    for (uint64_t a = plt + 16; a < plt + size; a++)
        CHECK_ROW(&t, a, HP_CFA_PLT, 11, HP_RBP_SAME, 0);
    unwind_table_free(&t);

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
    CHECK_ROW(&t, AT("f_state", 4), HP_CFA_RSP, 16, HP_RBP_OFFSET, -16);   /* restore_state */
    CHECK_TYPE(&t, AT("f_huge", 1), HP_CFA_UNSUPPORTED);                   /* CFA offset 2^32 */
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
    /* One merged row each: f_expr, f_ra_register, f_huge, f_window_save, f_deep,
     * f_ra_offset16, f_restore_empty, f_r12, f_expr_then_offset; and the rbp
     * rules of f_huge, f_rbp_register, f_val_offset_rbp. */
    CHECK_INT_EQ(t.unsupported_cfa, 9);
    CHECK_INT_EQ(t.unsupported_rbp, 3);
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

/* Copies data/unwind_table into tmpdir and builds the test programs there; 0 if all built. */
static int setup(void)
{
    const char *data = getenv("HEAPPROF_TESTDATA"); /* set by ctest (tests/unit/CMakeLists.txt) */
    char cmd[PATH_MAX * 2 + 256];
    int err = 0;

    if (!data) {
        fprintf(stderr, "HEAPPROF_TESTDATA is not set: run through ctest\n");
        return -ENOENT;
    }
    if (!mkdtemp(tmpdir))
        return -errno;
    /* .cfi_sections must come before any CFI: prepend it to copies of odd.s. */
    snprintf(cmd, sizeof(cmd),
             "cp '%s'/unwind_table/* '%s' && cd '%s' && "
             "(echo '.cfi_sections .debug_frame'; cat odd.s) > odd_dbg.s && "
             "(echo '.cfi_sections .eh_frame, .debug_frame'; cat odd.s) > odd_both.s",
             data, tmpdir, tmpdir);
    err |= sh(cmd);
    err |= gcc("prog.c", "-O2 -fomit-frame-pointer", "prog");
    err |= gcc("prog.c", "-O2 -fomit-frame-pointer -fcf-protection=full -Wl,-z,ibtplt", "prog_ibt");
    err |= gcc("prog.c", "-O2 -c", "prog.o");
    err |=
        gcc("prog.c", "-O2 -g -fno-asynchronous-unwind-tables -shared -fPIC -nostdlib", "dbg.so");
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
