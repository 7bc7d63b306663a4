/*
 * unwind_table.c - builds the compact unwind table of one ELF file (see
 * unwind_table.h) from the CIEs and FDEs of its .eh_frame and .debug_frame.
 *
 * libelf finds the sections, libdw's dwarf_next_cfi() splits them into
 * entries (checking each entry's length against the section), and
 * cfi_rules.c runs each FDE's instructions. The steps:
 *   1. the executable PT_LOADs give the base (row pc 0) and the ranges an
 *      FDE must lie in; anything else is not code we could be asked about;
 *   2. each section is read front to back: CIEs parsed once (augmentation,
 *      initial instructions run once), FDEs decoded to [lo, hi);
 *   3. FDEs are sorted by (lo, longest first, .eh_frame before .debug_frame,
 *      section offset). Where FDEs overlap, the one first in that order owns
 *      the overlap and a later one only covers what lies past it: that is
 *      the deterministic choice the header promises;
 *   4. rows come out in pc order, so they are merged as they are appended,
 *      and a gap between FDEs (and the end of the last) gets an
 *      HP_CFA_NONE row.
 * The input may be hostile: every pointer we compute is checked against the
 * entry libdw handed us, and sizes and counts are bounded.
 */
#include "unwind_table.h"

#include "array_grow.h"
#include "cfi_rules.h"
#include "dw_cursor.h"
#include "search.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* First allocation of each growing array; doubling from here, libc's ~3700
 * FDEs and ~20k rows need a handful of reallocations. */
#define GROW_MIN 256

/* Where a CIE or FDE came from; the order is the priority when FDEs overlap. */
enum cfi_src { SRC_EH_FRAME = 0, SRC_DEBUG_FRAME = 1, SRC_COUNT };

/* A CFI section and what decoding its pointers needs. */
struct cfi_section {
    Elf_Data *data; /* NULL if the file has no such section */
    uint64_t vaddr; /* sh_addr: DW_EH_PE_pcrel pointers are relative to it */
};

/* A CIE as kept for its FDEs. */
struct cie_entry {
    uint64_t off;       /* section offset, what FDEs point at */
    bool usable;        /* augmentation understood; FDEs of other CIEs are skipped */
    bool sized_aug;     /* 'z': FDEs carry an augmentation length before their instructions */
    uint8_t fde_enc;    /* DW_EH_PE_* encoding of the FDEs' addresses */
    struct cfi_cie cie; /* alignment factors and the state after the initial instructions */
};

/* An FDE, first as read and then, once its CIE is known, decoded. */
struct fde_entry {
    uint64_t lo, hi;          /* code range [lo, hi), ELF virtual addresses */
    uint64_t off;             /* section offset, the last tie-breaker of the sort */
    uint64_t cie_off;         /* section offset of its CIE */
    const uint8_t *ins, *end; /* before decoding: after the CIE pointer; after: the instructions */
    size_t cie;               /* index into build.cies */
    uint8_t src;              /* enum cfi_src */
};

/* An executable PT_LOAD: [lo, hi). */
struct exec_seg {
    uint64_t lo, hi;
};

/* Everything one build holds until the table is handed out. */
struct build {
    const unsigned char *ident; /* e_ident, for dwarf_next_cfi */
    uint64_t base;
    struct exec_seg *segs;
    size_t nsegs;
    struct cie_entry *cies;
    size_t ncies, cies_cap;
    struct fde_entry *fdes;
    size_t nfdes, fdes_cap;
    struct unwind_table *out; /* rows are appended here */
    size_t rows_cap;
};

/* Parses a CIE's augmentation into `ce`; leaves it unusable if not understood. */
static void parse_cie(const Dwarf_CIE *c, uint64_t off, struct cie_entry *ce)
{
    const char *aug = c->augmentation;
    struct dw_cursor data = {.p = c->augmentation_data,
                             .end = c->augmentation_data ? c->augmentation_data +
                                                               c->augmentation_data_size
                                                         : NULL};

    memset(ce, 0, sizeof(*ce));
    ce->off = off;
    ce->fde_enc = DW_EH_PE_absptr;
    if (aug[0] != '\0' && aug[0] != 'z')
        return; /* "eh" and other old or unknown forms: their FDE layout is unknown */
    ce->sized_aug = aug[0] == 'z';
    for (const char *a = aug + (ce->sized_aug ? 1 : 0); *a; a++) {
        uint8_t enc;
        if (*a == 'S') {
            ce->cie.signal = true;
            continue;
        }
        if (*a == 'B')
            continue; /* AArch64 BTI, no data */
        if (*a != 'R' && *a != 'L' && *a != 'P')
            break; /* unknown letter: 'z' says how much data to skip, so FDEs stay readable */
        enc = dw_u8(&data);
        if (*a == 'R')
            ce->fde_enc = enc;
        /* The personality pointer may be indirect or pc-relative; only its
         * size matters, which an aligned one does not say. */
        else if (*a == 'P' && (enc & 0x70) == DW_EH_PE_aligned)
            return;
        else if (*a == 'P')
            (void)dw_encoded(&data, enc & 0x0f, 0);
        if (data.bad)
            return;
    }
    ce->cie.code_align = c->code_alignment_factor;
    ce->cie.data_align = c->data_alignment_factor;
    ce->cie.ra_reg = c->return_address_register;
    cfi_run_cie(&ce->cie, c->initial_instructions, c->initial_instructions_end);
    ce->usable = true;
}

/* Whether [lo, hi) lies inside one executable PT_LOAD. */
static bool in_exec_seg(const struct build *b, uint64_t lo, uint64_t hi)
{
    for (size_t i = 0; i < b->nsegs; i++)
        if (lo >= b->segs[i].lo && hi <= b->segs[i].hi)
            return true;
    return false;
}

/* A CIE sought by its section offset. */
struct cie_sought {
    const struct build *b;
    uint64_t off;
};

/* Whether CIE i lies before the offset sought. */
static bool cie_before(const void *ctx, size_t i)
{
    const struct cie_sought *s = ctx;
    return s->b->cies[i].off < s->off;
}

/* The index of the CIE at section offset `off` among cies[first, ncies), or SIZE_MAX. */
static size_t find_cie(const struct build *b, size_t first, uint64_t off)
{
    struct cie_sought s = {b, off};
    size_t l = search_partition(first, b->ncies, cie_before, &s);
    return l < b->ncies && b->cies[l].off == off ? l : SIZE_MAX;
}

/* Decodes FDE `f` against its CIE; false if it is unusable or lies outside the code. */
static bool decode_fde(const struct build *b, const struct cfi_section *s, size_t cie_first,
                       struct fde_entry *f)
{
    struct dw_cursor c = {.p = f->ins, .end = f->end};

    f->cie = find_cie(b, cie_first, f->cie_off);
    if (f->cie == SIZE_MAX || !b->cies[f->cie].usable)
        return false;
    const struct cie_entry *ce = &b->cies[f->cie];
    uint64_t field_vaddr = s->vaddr + (uint64_t)(c.p - (const uint8_t *)s->data->d_buf);
    uint64_t lo = dw_encoded(&c, ce->fde_enc, field_vaddr);
    uint64_t len = dw_encoded(&c, ce->fde_enc & 0x0f, 0);
    if (ce->sized_aug)
        (void)dw_block(&c, dw_uleb(&c)); /* the augmentation data, which we do not use */
    if (c.bad || len == 0 || lo + len < lo || !in_exec_seg(b, lo, lo + len))
        return false;
    f->lo = lo;
    f->hi = lo + len;
    f->ins = c.p;
    return true;
}

/* Reads every CIE and FDE of one section into `b`, keeping the FDEs that decode. */
static int scan_section(struct build *b, const struct cfi_section *s, enum cfi_src src)
{
    size_t cie_first = b->ncies, fde_first = b->nfdes;
    Dwarf_Off off = 0, next;
    Dwarf_CFI_Entry e;
    int r;

    for (;;) {
        next = off;
        r = dwarf_next_cfi(b->ident, s->data, src == SRC_EH_FRAME, off, &next, &e);
        if (r > 0)
            break;
        /* A bad entry that libdw could step over is skipped; otherwise stop. */
        if (next == (Dwarf_Off)-1 || next <= off)
            break;
        if (r == 0 && dwarf_cfi_cie_p(&e)) {
            struct cie_entry *cies =
                array_grow(b->cies, &b->cies_cap, b->ncies + 1, sizeof(*cies), GROW_MIN);
            if (!cies)
                return -ENOMEM;
            b->cies = cies;
            parse_cie(&e.cie, off, &b->cies[b->ncies++]);
        } else if (r == 0) {
            b->out->fdes++;
            struct fde_entry *fdes =
                array_grow(b->fdes, &b->fdes_cap, b->nfdes + 1, sizeof(*fdes), GROW_MIN);
            if (!fdes)
                return -ENOMEM;
            b->fdes = fdes;
            b->fdes[b->nfdes++] = (struct fde_entry){.off = off,
                                                     .cie_off = e.fde.CIE_pointer,
                                                     .ins = e.fde.start,
                                                     .end = e.fde.end,
                                                     .src = src};
        }
        off = next;
    }
    /* CIEs were appended in section order, so find_cie can search them; a
     * CIE may follow its FDEs in .debug_frame, hence the second pass. */
    size_t kept = fde_first;
    for (size_t i = fde_first; i < b->nfdes; i++)
        if (decode_fde(b, s, cie_first, &b->fdes[i]))
            b->fdes[kept++] = b->fdes[i];
    b->nfdes = kept;
    return 0;
}

/* Sort order of FDEs; see step 3 at the top. */
static int cmp_fde(const void *pa, const void *pb)
{
    const struct fde_entry *a = pa, *b = pb;
    if (a->lo != b->lo)
        return a->lo < b->lo ? -1 : 1;
    if (a->hi != b->hi)
        return a->hi > b->hi ? -1 : 1;
    if (a->src != b->src)
        return a->src < b->src ? -1 : 1;
    return a->off < b->off ? -1 : a->off > b->off;
}

/* Whether two rows have the same rules (pc aside). */
static bool same_rules(const struct hp_unwind_row *a, const struct hp_unwind_row *b)
{
    return a->cfa_type == b->cfa_type && a->cfa_offset == b->cfa_offset &&
           a->rbp_type == b->rbp_type && a->rbp_offset == b->rbp_offset;
}

/* Appends a row at `vaddr` (never below the last one), merging it with its neighbours. */
static int add_row(void *ctx, uint64_t vaddr, const struct hp_unwind_row *row)
{
    struct build *b = ctx;
    struct unwind_table *t = b->out;
    /* FDEs lie in executable segments, which were checked to end within 4 GiB of the base. */
    uint32_t pc = (uint32_t)(vaddr - b->base);

    if (t->n && t->rows[t->n - 1].pc > pc)
        return -EINVAL; /* cannot happen: rows come in order */
    if (t->n && t->rows[t->n - 1].pc == pc) {
        /* An empty row (advance by 0, or an FDE starting where a NONE row went): replace it. */
        t->n--;
    }
    if (t->n && same_rules(&t->rows[t->n - 1], row))
        return 0;
    if (t->n >= UNWIND_TABLE_MAX_ROWS)
        return -E2BIG;
    struct hp_unwind_row *rows =
        array_grow(t->rows, &b->rows_cap, t->n + 1, sizeof(*rows), GROW_MIN);
    if (!rows)
        return -ENOMEM;
    t->rows = rows;
    t->rows[t->n] = *row;
    t->rows[t->n].pc = pc;
    t->n++;
    return 0;
}

/* Walks the sorted FDEs into rows, with a NONE row at each gap and at the end. */
static int walk_fdes(struct build *b)
{
    const struct hp_unwind_row none = {.cfa_type = HP_CFA_NONE, .rbp_type = HP_RBP_SAME};
    uint64_t covered = 0; /* end of what the rows so far describe */
    bool any = false;
    int err;

    if (b->nfdes > 1) /* fdes is NULL when there are none, and qsort may not take NULL */
        qsort(b->fdes, b->nfdes, sizeof(*b->fdes), cmp_fde);
    for (size_t i = 0; i < b->nfdes; i++) {
        const struct fde_entry *f = &b->fdes[i];
        uint64_t from = f->lo;
        if (any && f->hi <= covered)
            continue; /* wholly inside an FDE that sorted earlier */
        if (any && from < covered)
            from = covered;
        else if (any && from > covered && (err = add_row(b, covered, &none)))
            return err;
        err = cfi_run_fde(&b->cies[f->cie].cie, f->ins, f->end, f->lo, f->hi, from, add_row, b);
        if (err)
            return err;
        covered = f->hi;
        any = true;
    }
    return any ? add_row(b, covered, &none) : 0;
}

/* Whether `ph` is an executable PT_LOAD that occupies memory. */
static bool is_exec_load(const GElf_Phdr *ph)
{
    return ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && ph->p_memsz != 0;
}

/* The executable PT_LOADs: base and ranges. -E2BIG if the code spans more than 4 GiB. */
static int read_segments(Elf *elf, struct build *b)
{
    size_t phnum, count = 0;
    GElf_Phdr ph;

    if (elf_getphdrnum(elf, &phnum) != 0)
        return -ENOEXEC;
    /* Counted first, so a hostile e_phnum costs no allocation of its size. */
    for (size_t i = 0; i < phnum; i++) {
        if (!gelf_getphdr(elf, (int)i, &ph))
            return -ENOEXEC;
        count += is_exec_load(&ph);
    }
    if (count == 0)
        return -ENOEXEC; /* e.g. a relocatable object: nothing is loaded, so no pc to map */
    b->segs = calloc(count, sizeof(*b->segs));
    if (!b->segs)
        return -ENOMEM;
    for (size_t i = 0; i < phnum && b->nsegs < count; i++) {
        if (!gelf_getphdr(elf, (int)i, &ph) || !is_exec_load(&ph))
            continue;
        if (ph.p_vaddr + ph.p_memsz < ph.p_vaddr)
            return -ENOEXEC;
        b->segs[b->nsegs++] = (struct exec_seg){ph.p_vaddr, ph.p_vaddr + ph.p_memsz};
        if (b->nsegs == 1 || ph.p_vaddr < b->base)
            b->base = ph.p_vaddr;
    }
    for (size_t i = 0; i < b->nsegs; i++)
        if (b->segs[i].hi - b->base > UINT32_MAX)
            return -E2BIG;
    return 0;
}

/* Finds .eh_frame and .debug_frame; -ENOENT if neither has data. */
static int find_sections(Elf *elf, struct cfi_section secs[SRC_COUNT])
{
    static const char *const names[SRC_COUNT] = {".eh_frame", ".debug_frame"};
    size_t shstrndx;
    Elf_Scn *scn = NULL;
    GElf_Shdr sh;

    if (elf_getshdrstrndx(elf, &shstrndx) != 0)
        return -ENOENT;
    while ((scn = elf_nextscn(elf, scn))) {
        const char *name;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
            continue;
        /* Compressed sections are skipped: decompressing would write libelf's
         * view of the caller's image; toolchains compress only .debug_*,
         * and .eh_frame, which is what matters, never is. */
        if (sh.sh_flags & SHF_COMPRESSED || !(name = elf_strptr(elf, shstrndx, sh.sh_name)))
            continue;
        for (int s = 0; s < SRC_COUNT; s++) {
            if (secs[s].data || strcmp(name, names[s]) != 0)
                continue;
            Elf_Data *d = elf_getdata(scn, NULL);
            if (d && d->d_buf && d->d_size) {
                secs[s].data = d;
                secs[s].vaddr = sh.sh_addr;
            }
        }
    }
    return secs[SRC_EH_FRAME].data || secs[SRC_DEBUG_FRAME].data ? 0 : -ENOENT;
}

/* Builds the table of an open ELF handle into `out` (zeroed by the caller). */
static int build_elf(Elf *elf, struct unwind_table *out)
{
    struct build b = {.out = out};
    struct cfi_section secs[SRC_COUNT] = {{0}};
    GElf_Ehdr eh;
    int err;

    if (elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh) ||
        !(b.ident = (const unsigned char *)elf_getident(elf, NULL)))
        return -ENOEXEC;
    if (b.ident[EI_CLASS] != ELFCLASS64 || b.ident[EI_DATA] != ELFDATA2LSB ||
        eh.e_machine != EM_X86_64)
        return -ENOEXEC;
    if ((err = read_segments(elf, &b)) || (err = find_sections(elf, secs)))
        goto out;
    out->base = b.base;
    for (int s = 0; s < SRC_COUNT; s++)
        if (secs[s].data && (err = scan_section(&b, &secs[s], s)))
            goto out;
    if ((err = walk_fdes(&b)))
        goto out;
    if (out->n == 0) {
        err = -ENOENT; /* sections there, but no FDE we could use */
        goto out;
    }
    for (size_t i = 0; i < out->n; i++) {
        out->unsupported_cfa += out->rows[i].cfa_type == HP_CFA_UNSUPPORTED;
        out->unsupported_rbp += out->rows[i].rbp_type == HP_RBP_UNSUPPORTED;
    }
    /* Give back the doubling slack: tables live as long as a process maps the file. */
    struct hp_unwind_row *shrunk = realloc(out->rows, out->n * sizeof(*out->rows));
    if (shrunk)
        out->rows = shrunk;
out:
    free(b.segs);
    free(b.cies);
    free(b.fdes);
    return err;
}

int unwind_table_build_mem(const void *image, size_t len, struct unwind_table *out)
{
    Elf *elf;
    int err;

    memset(out, 0, sizeof(*out));
    if (elf_version(EV_CURRENT) == EV_NONE)
        return -ENOEXEC;
    /* libelf only reads an image opened this way (ELF_C_READ_MMAP_PRIVATE
     * semantics, native byte order, nothing updated), so the cast is safe. */
    elf = elf_memory((char *)image, len);
    if (!elf)
        return -ENOEXEC;
    err = build_elf(elf, out);
    elf_end(elf);
    if (err)
        unwind_table_free(out);
    return err;
}

int unwind_table_build(const char *path, struct unwind_table *out)
{
    struct stat st;
    Elf *elf = NULL;
    int fd, err;

    memset(out, 0, sizeof(*out));
    if (elf_version(EV_CURRENT) == EV_NONE)
        return -ENOEXEC;
    fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) != 0) {
        err = -errno;
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        err = -ENOEXEC;
        goto out;
    }
    /* ELF_C_READ, not MMAP: libelf then reads only the headers and the
     * sections we ask for, and a file truncated under us gives an error,
     * not SIGBUS. */
    elf = elf_begin(fd, ELF_C_READ, NULL);
    if (!elf) {
        err = -ENOEXEC;
        goto out;
    }
    err = build_elf(elf, out);
out:
    if (elf)
        elf_end(elf);
    close(fd);
    if (err)
        unwind_table_free(out);
    return err;
}

/* A row sought by its pc. */
struct row_sought {
    const struct unwind_table *t;
    uint32_t pc;
};

/* Whether row i starts at or below the pc sought. */
static bool row_at_or_below(const void *ctx, size_t i)
{
    const struct row_sought *s = ctx;
    return s->t->rows[i].pc <= s->pc;
}

const struct hp_unwind_row *unwind_table_find(const struct unwind_table *t, uint64_t vaddr)
{
    if (!t || t->n == 0 || vaddr < t->base || vaddr - t->base > UINT32_MAX)
        return NULL;
    struct row_sought s = {t, (uint32_t)(vaddr - t->base)};
    /* The answer is the last row with row.pc <= pc. */
    size_t l = search_partition(0, t->n, row_at_or_below, &s);
    return l ? &t->rows[l - 1] : NULL;
}

void unwind_table_free(struct unwind_table *t)
{
    if (!t)
        return;
    free(t->rows);
    memset(t, 0, sizeof(*t));
}
