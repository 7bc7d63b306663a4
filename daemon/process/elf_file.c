/*
 * elf_file.c - the parts of an ELF file heapprofd uses, read with libelf.
 *
 * Everything is read once at open: the program headers, the build ID, the
 * DT_NEEDED names and the function symbols. Symbol names and DT_NEEDED names
 * point into libelf's mapping of the file (ELF_C_READ_MMAP), so they cost no
 * copies; only names carrying a version suffix ("foo@@V2", found in .symtab)
 * are copied, without the suffix, so a profile shows "foo".
 *
 * Each symbol table is kept twice over: sorted by address for symbolization
 * (aliases at one address ordered best name first) and as an index sorted by
 * name for uprobe placement (the default version of a name first).
 */
#include "elf_file.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "build_id.h"
#include "search.h"

/* Bit of a .gnu.version entry that marks a non-default ("foo@V1") version. */
#define VERSYM_HIDDEN 0x8000

/* One function symbol as kept in memory: 32 bytes, so 100k symbols cost ~3 MB. */
struct fsym {
    uint64_t vaddr;
    uint64_t size;
    const char *name; /* the base name, without any "@VERSION" */
    uint8_t rank;     /* binding preference for naming: 0 global, 1 weak, 2 local */
    bool hidden;      /* a non-default version: never chosen over a default one */
    bool owned;       /* `name` was copied (a version suffix was cut) and is freed at close */
};

/* The function symbols of one symbol table. */
struct sym_table {
    struct fsym *v;    /* sorted by address, then best name first */
    uint32_t *by_name; /* indices into v, sorted by name, default version first */
    size_t n;
};

/* An open ELF file and what was read from it. */
struct elf_file {
    int fd;
    Elf *elf;
    GElf_Ehdr ehdr;
    GElf_Phdr *ph;
    size_t nph;
    unsigned char build_id[BUILD_ID_MAX_BYTES];
    size_t build_id_len;     /* 0: the file has none */
    struct sym_table symtab; /* .symtab, empty when stripped */
    struct sym_table dynsym; /* .dynsym */
    const char **needed;
    size_t n_needed;
};

/* The table used for naming addresses: .symtab when present, as it also has local functions. */
static const struct sym_table *main_table(const struct elf_file *ef)
{
    return ef->symtab.n ? &ef->symtab : &ef->dynsym;
}

/* Orders symbols by address, then global before weak before local, sized before unsized. */
static int cmp_addr(const void *a, const void *b)
{
    const struct fsym *x = a, *y = b;
    if (x->vaddr != y->vaddr)
        return x->vaddr < y->vaddr ? -1 : 1;
    if (x->rank != y->rank)
        return x->rank - y->rank;
    if ((x->size == 0) != (y->size == 0))
        return x->size == 0 ? 1 : -1;
    return strcmp(x->name, y->name);
}

/* Orders name indices by name, then default version first, then binding, then address. */
static int cmp_name(const void *a, const void *b, void *arg)
{
    const struct fsym *v = arg;
    const struct fsym *x = &v[*(const uint32_t *)a], *y = &v[*(const uint32_t *)b];
    int c = strcmp(x->name, y->name);
    if (c)
        return c;
    if (x->hidden != y->hidden)
        return x->hidden ? 1 : -1;
    if (x->rank != y->rank)
        return x->rank - y->rank;
    return x->vaddr < y->vaddr ? -1 : x->vaddr > y->vaddr;
}

/* Frees a table's arrays and the names it copied. */
static void table_free(struct sym_table *t)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->v[i].owned)
            free((char *)t->v[i].name);
    free(t->v);
    free(t->by_name);
    memset(t, 0, sizeof(*t));
}

/* The naming rank of a symbol binding. */
static uint8_t bind_rank(unsigned bind)
{
    if (bind == STB_GLOBAL || bind == STB_GNU_UNIQUE)
        return 0;
    return bind == STB_WEAK ? 1 : 2;
}

/*
 * Reads the defined functions of symbol section `scn` into `t`. `versym` is
 * the section's .gnu.version data or NULL; without it, a version is read from
 * the name ("foo@V1" hidden, "foo@@V2" default).
 */
static int load_symbols(Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh, Elf_Data *versym,
                        struct sym_table *t)
{
    Elf_Data *data = elf_getdata(scn, NULL);
    int err = 0;

    if (!data || !data->d_buf || sh->sh_entsize == 0)
        return 0;
    size_t count = sh->sh_size / sh->sh_entsize;
    if (count > UINT32_MAX)
        return -EFBIG;
    t->v = calloc(count ? count : 1, sizeof(*t->v));
    if (!t->v)
        return -ENOMEM;

    for (size_t i = 0; i < count; i++) {
        GElf_Sym sym;
        if (!gelf_getsym(data, (int)i, &sym))
            break;
        unsigned type = GELF_ST_TYPE(sym.st_info);
        if ((type != STT_FUNC && type != STT_GNU_IFUNC) || sym.st_shndx == SHN_UNDEF)
            continue;
        const char *name = elf_strptr(elf, sh->sh_link, sym.st_name);
        if (!name || !*name)
            continue;

        struct fsym *f = &t->v[t->n];
        f->vaddr = sym.st_value;
        f->size = sym.st_size;
        f->rank = bind_rank(GELF_ST_BIND(sym.st_info));
        f->name = name;
        GElf_Versym vs;
        if (versym && gelf_getversym(versym, (int)i, &vs))
            f->hidden = (vs & VERSYM_HIDDEN) != 0;
        const char *at = strchr(name, '@');
        if (at) {
            if (!versym)
                f->hidden = at[1] != '@';
            f->name = strndup(name, (size_t)(at - name));
            if (!f->name) {
                err = -ENOMEM;
                goto out;
            }
            f->owned = true;
        }
        t->n++;
    }

    qsort(t->v, t->n, sizeof(*t->v), cmp_addr);
    t->by_name = malloc((t->n ? t->n : 1) * sizeof(*t->by_name));
    if (!t->by_name) {
        err = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < t->n; i++)
        t->by_name[i] = (uint32_t)i;
    qsort_r(t->by_name, t->n, sizeof(*t->by_name), cmp_name, t->v);
    /* Give back the slots of the non-function symbols. */
    struct fsym *shrunk = realloc(t->v, (t->n ? t->n : 1) * sizeof(*t->v));
    if (shrunk)
        t->v = shrunk;
    return 0;
out:
    table_free(t);
    return err;
}

/* Copies the NT_GNU_BUILD_ID descriptor out of one block of notes, if it is there. */
static bool find_build_id_note(Elf_Data *data, struct elf_file *ef)
{
    size_t off = 0, next, name_off, desc_off;
    GElf_Nhdr nh;

    if (!data)
        return false;
    while (off < data->d_size && (next = gelf_getnote(data, off, &nh, &name_off, &desc_off)) > 0) {
        const char *name = (const char *)data->d_buf + name_off;
        if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && memcmp(name, "GNU", 4) == 0 &&
            nh.n_descsz > 0 && nh.n_descsz <= BUILD_ID_MAX_BYTES) {
            memcpy(ef->build_id, (const char *)data->d_buf + desc_off, nh.n_descsz);
            ef->build_id_len = nh.n_descsz;
            return true;
        }
        off = next;
    }
    return false;
}

/* Finds the build ID in the PT_NOTE segments, else in the SHT_NOTE sections. */
static void read_build_id(struct elf_file *ef)
{
    for (size_t i = 0; i < ef->nph; i++) {
        const GElf_Phdr *p = &ef->ph[i];
        if (p->p_type != PT_NOTE || p->p_filesz == 0)
            continue;
        Elf_Type t = p->p_align == 8 ? ELF_T_NHDR8 : ELF_T_NHDR;
        if (find_build_id_note(elf_getdata_rawchunk(ef->elf, (int64_t)p->p_offset, p->p_filesz, t),
                               ef))
            return;
    }
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(ef->elf, scn))) {
        GElf_Shdr sh;
        if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_NOTE &&
            find_build_id_note(elf_getdata(scn, NULL), ef))
            return;
    }
}

/* Collects the DT_NEEDED names from the SHT_DYNAMIC section. */
static int read_needed(struct elf_file *ef, Elf_Scn *scn, const GElf_Shdr *sh)
{
    Elf_Data *data = elf_getdata(scn, NULL);

    if (!data || !data->d_buf || sh->sh_entsize == 0)
        return 0;
    size_t count = sh->sh_size / sh->sh_entsize;
    ef->needed = calloc(count ? count : 1, sizeof(*ef->needed));
    if (!ef->needed)
        return -ENOMEM;
    for (size_t i = 0; i < count; i++) {
        GElf_Dyn dyn;
        if (!gelf_getdyn(data, (int)i, &dyn) || dyn.d_tag == DT_NULL)
            break;
        if (dyn.d_tag != DT_NEEDED)
            continue;
        const char *name = elf_strptr(ef->elf, sh->sh_link, dyn.d_un.d_val);
        if (name)
            ef->needed[ef->n_needed++] = name;
    }
    return 0;
}

/* Reads the symbol tables and DT_NEEDED list from the section headers. */
static int read_sections(struct elf_file *ef)
{
    Elf_Scn *scn = NULL, *symtab = NULL, *dynsym = NULL, *dynamic = NULL;
    GElf_Shdr sh_symtab = {0}, sh_dynsym = {0}, sh_dynamic = {0}, sh;
    Elf_Data *versym = NULL;
    int err;

    /* .gnu.version names its symbol table via sh_link; find the tables first. */
    while ((scn = elf_nextscn(ef->elf, scn))) {
        if (!gelf_getshdr(scn, &sh))
            continue;
        if (sh.sh_type == SHT_SYMTAB && !symtab) {
            symtab = scn;
            sh_symtab = sh;
        } else if (sh.sh_type == SHT_DYNSYM && !dynsym) {
            dynsym = scn;
            sh_dynsym = sh;
        } else if (sh.sh_type == SHT_DYNAMIC && !dynamic) {
            dynamic = scn;
            sh_dynamic = sh;
        }
    }
    scn = NULL;
    while (dynsym && (scn = elf_nextscn(ef->elf, scn))) {
        if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_GNU_versym &&
            sh.sh_link == elf_ndxscn(dynsym)) {
            versym = elf_getdata(scn, NULL);
            break;
        }
    }

    if (symtab && (err = load_symbols(ef->elf, symtab, &sh_symtab, NULL, &ef->symtab)))
        return err;
    if (dynsym && (err = load_symbols(ef->elf, dynsym, &sh_dynsym, versym, &ef->dynsym)))
        return err;
    if (dynamic && (err = read_needed(ef, dynamic, &sh_dynamic)))
        return err;
    return 0;
}

/* Opens `path`, reading its symbol tables too if `with_symbols`. */
/* Reads the file open on `fd`, which it takes over (closed on failure). */
static int open_fd(int fd, bool with_symbols, struct elf_file **out)
{
    struct elf_file *ef;
    int err;

    if (elf_version(EV_CURRENT) == EV_NONE) {
        close(fd);
        return -ENOSYS;
    }
    ef = calloc(1, sizeof(*ef));
    if (!ef) {
        close(fd);
        return -ENOMEM;
    }
    ef->fd = fd;
    /* Anything libelf cannot take as a 64-bit ELF file is "not an executable format". */
    err = -ENOEXEC;
    ef->elf = elf_begin(ef->fd, ELF_C_READ_MMAP, NULL);
    if (!ef->elf || elf_kind(ef->elf) != ELF_K_ELF || gelf_getclass(ef->elf) != ELFCLASS64 ||
        !gelf_getehdr(ef->elf, &ef->ehdr) || elf_getphdrnum(ef->elf, &ef->nph) != 0)
        goto out;
    ef->ph = calloc(ef->nph ? ef->nph : 1, sizeof(*ef->ph));
    if (!ef->ph) {
        err = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < ef->nph; i++) {
        const GElf_Phdr *p = gelf_getphdr(ef->elf, (int)i, &ef->ph[i]);
        /*
         * A PT_LOAD whose ranges wrap around 2^64, or with more file than
         * memory, cannot be loaded; refused here so that the address and
         * offset translations below never wrap (tests/fuzz/fuzz_elf_file).
         */
        if (!p || (p->p_type == PT_LOAD &&
                   (p->p_filesz > p->p_memsz || p->p_offset > UINT64_MAX - p->p_filesz ||
                    p->p_vaddr > UINT64_MAX - p->p_memsz)))
            goto out;
    }

    read_build_id(ef);
    err = with_symbols ? read_sections(ef) : 0;
    if (err)
        goto out;
    *out = ef;
    return 0;
out:
    elf_file_close(ef);
    return err;
}

static int open_file(const char *path, bool with_symbols, struct elf_file **out)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    return fd < 0 ? -errno : open_fd(fd, with_symbols, out);
}

int elf_file_open(const char *path, struct elf_file **out)
{
    return open_file(path, true, out);
}

int elf_file_open_fd(int fd, struct elf_file **out)
{
    return open_fd(fd, true, out);
}

int elf_file_open_headers(const char *path, struct elf_file **out)
{
    return open_file(path, false, out);
}

void elf_file_close(struct elf_file *ef)
{
    if (!ef)
        return;
    table_free(&ef->symtab);
    table_free(&ef->dynsym);
    free(ef->needed);
    free(ef->ph);
    if (ef->elf)
        elf_end(ef->elf);
    if (ef->fd >= 0)
        close(ef->fd);
    free(ef);
}

int elf_file_type(const struct elf_file *ef)
{
    return ef->ehdr.e_type;
}

int elf_file_machine(const struct elf_file *ef)
{
    return ef->ehdr.e_machine;
}

int elf_file_build_id(const struct elf_file *ef, char *hex, size_t cap)
{
    char full[BUILD_ID_HEX_SIZE];
    if (ef->build_id_len == 0)
        return -ENOENT;
    if (cap < 2 * ef->build_id_len + 1)
        return -ENOSPC;
    build_id_hex(ef->build_id, ef->build_id_len, full);
    memcpy(hex, full, 2 * ef->build_id_len + 1);
    return 0;
}

/* The PT_LOAD whose file-backed part holds [vaddr, vaddr + len), or NULL. */
static const GElf_Phdr *load_for_vaddr(const struct elf_file *ef, uint64_t vaddr, uint64_t len)
{
    for (size_t i = 0; i < ef->nph; i++) {
        const GElf_Phdr *p = &ef->ph[i];
        if (p->p_type == PT_LOAD && vaddr >= p->p_vaddr && vaddr - p->p_vaddr < p->p_filesz &&
            len <= p->p_filesz - (vaddr - p->p_vaddr))
            return p;
    }
    return NULL;
}

int elf_file_vaddr_to_offset(const struct elf_file *ef, uint64_t vaddr, uint64_t *offset)
{
    const GElf_Phdr *p = load_for_vaddr(ef, vaddr, 1);
    if (!p)
        return -ENOENT;
    *offset = p->p_offset + (vaddr - p->p_vaddr);
    return 0;
}

int elf_file_offset_to_vaddr(const struct elf_file *ef, uint64_t offset, uint64_t *vaddr)
{
    for (size_t i = 0; i < ef->nph; i++) {
        const GElf_Phdr *p = &ef->ph[i];
        if (p->p_type == PT_LOAD && offset >= p->p_offset && offset - p->p_offset < p->p_filesz) {
            *vaddr = p->p_vaddr + (offset - p->p_offset);
            return 0;
        }
    }
    return -ENOENT;
}

/* Fills the public form of a symbol; file_offset is 0 when the address is in no PT_LOAD. */
static void to_public(const struct elf_file *ef, const struct fsym *f, struct elf_symbol *out)
{
    out->name = f->name;
    out->vaddr = f->vaddr;
    out->size = f->size;
    if (elf_file_vaddr_to_offset(ef, f->vaddr, &out->file_offset))
        out->file_offset = 0;
}

/* A symbol sought in a table: by name, or by address. */
struct sym_sought {
    const struct sym_table *t;
    const char *name;
    uint64_t vaddr;
};

/* Whether the i-th symbol in name order sorts before the name sought. */
static bool name_before(const void *ctx, size_t i)
{
    const struct sym_sought *s = ctx;
    return strcmp(s->t->v[s->t->by_name[i]].name, s->name) < 0;
}

/* Whether the i-th symbol in address order starts at or below the address sought. */
static bool starts_at_or_below(const void *ctx, size_t i)
{
    const struct sym_sought *s = ctx;
    return s->t->v[i].vaddr <= s->vaddr;
}

/* The best symbol named `name` in `t`: the first in name order, or NULL. */
static const struct fsym *lookup_name(const struct sym_table *t, const char *name)
{
    struct sym_sought s = {.t = t, .name = name};
    size_t lo = search_partition(0, t->n, name_before, &s);
    if (lo < t->n && strcmp(t->v[t->by_name[lo]].name, name) == 0)
        return &t->v[t->by_name[lo]];
    return NULL;
}

int elf_file_find_function(const struct elf_file *ef, const char *name, bool dynamic_only,
                           struct elf_symbol *out)
{
    const struct fsym *f = lookup_name(dynamic_only ? &ef->dynsym : main_table(ef), name);
    if (!f)
        return -ENOENT;
    to_public(ef, f, out);
    return 0;
}

int elf_file_find_dynamic_object(const struct elf_file *ef, const char *name,
                                 struct elf_symbol *out)
{
    Elf_Scn *scn = NULL;
    GElf_Shdr sh;
    while ((scn = elf_nextscn(ef->elf, scn)))
        if (gelf_getshdr(scn, &sh) && sh.sh_type == SHT_DYNSYM)
            break;
    Elf_Data *d = scn ? elf_getdata(scn, NULL) : NULL;
    if (!d || sh.sh_entsize == 0)
        return -ENOENT;
    for (size_t i = 1; i < sh.sh_size / sh.sh_entsize; i++) {
        GElf_Sym sym;
        if (!gelf_getsym(d, (int)i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_OBJECT ||
            sym.st_shndx == SHN_UNDEF)
            continue;
        const char *n = elf_strptr(ef->elf, sh.sh_link, sym.st_name);
        if (n && strcmp(n, name) == 0) {
            out->name = n;
            out->vaddr = sym.st_value;
            out->size = sym.st_size;
            if (elf_file_vaddr_to_offset(ef, sym.st_value, &out->file_offset))
                out->file_offset = 0;
            return 0;
        }
    }
    return -ENOENT;
}

bool elf_file_exports_function(const struct elf_file *ef, const char *name)
{
    return lookup_name(&ef->dynsym, name) != NULL;
}

int elf_file_symbolize(const struct elf_file *ef, uint64_t vaddr, struct elf_symbol *out)
{
    const struct sym_table *t = main_table(ef);
    struct sym_sought s = {.t = t, .vaddr = vaddr};
    /* lo: the number of symbols starting at or below vaddr. */
    size_t lo = search_partition(0, t->n, starts_at_or_below, &s);
    if (lo == 0)
        return -ENOENT;
    uint64_t start = t->v[lo - 1].vaddr;
    size_t first = lo - 1;
    while (first > 0 && t->v[first - 1].vaddr == start)
        first--;
    /* Aliases are sorted best name first; take the best whose extent covers vaddr. */
    for (size_t i = first; i < lo; i++) {
        const struct fsym *f = &t->v[i];
        if (f->size == 0 || vaddr - f->vaddr < f->size) {
            to_public(ef, f, out);
            return 0;
        }
    }
    return -ENOENT;
}

size_t elf_file_needed_count(const struct elf_file *ef)
{
    return ef->n_needed;
}

const char *elf_file_needed(const struct elf_file *ef, size_t i)
{
    return i < ef->n_needed ? ef->needed[i] : NULL;
}

bool elf_file_is_dynamic(const struct elf_file *ef)
{
    for (size_t i = 0; i < ef->nph; i++)
        if (ef->ph[i].p_type == PT_INTERP || ef->ph[i].p_type == PT_DYNAMIC)
            return true;
    return false;
}

int elf_file_read(const struct elf_file *ef, uint64_t vaddr, void *buf, size_t len)
{
    const GElf_Phdr *p = load_for_vaddr(ef, vaddr, len);
    if (!p)
        return -ENOENT;
    uint64_t off = p->p_offset + (vaddr - p->p_vaddr);
    size_t done = 0;
    while (done < len) {
        ssize_t r = pread(ef->fd, (char *)buf + done, len - done, (off_t)(off + done));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            return -EIO; /* the file is shorter than its headers say */
        done += (size_t)r;
    }
    return 0;
}
