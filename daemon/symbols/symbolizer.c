/*
 * symbolizer.c - addresses of one ELF file to functions, files, lines and
 * inlined calls with libdwfl (see symbolizer.h).
 *
 * The file is reported to its own Dwfl as one module at load bias 0, so a
 * module address is the ELF virtual address plus the bias libdwfl chose.
 * libdwfl asks our find_debuginfo for a separate debug file when the file
 * has no DWARF or symbol table of its own, and again for a dwz
 * supplementary file when the debug file names one. When neither is
 * here, it asks debuginfod (debuginfod_fetch.h) by build ID without
 * waiting: libdwfl asks once per module, so a symbolizer opened before the
 * file arrived stays without it, says so (symbolizer_debuginfod_arrived),
 * and the symbol cache opens the file anew.
 */
#include "symbolizer.h"

#include <dwarf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>

#include "build_id.h"
#include "debug_link.h"
#include "debuginfod_fetch.h"
#include "symbol_memo.h"
#include "symbolizer_names.h"

struct symbolizer {
    Dwfl *dwfl;
    Dwfl_Module *mod;
    GElf_Addr bias; /* module address = ELF virtual address + bias */
    GElf_Phdr *loads;
    size_t nloads;
    unsigned char build_id[BUILD_ID_MAX_BYTES];
    size_t build_id_len;
    char build_id_hex[BUILD_ID_HEX_SIZE];
    const char *debuglink; /* in the file's own Elf, NULL if none */
    GElf_Word debuglink_crc;
    char *root, *path; /* where the process sees the file, for the debug search */
    struct safe_open_rule reader; /* whom its debug files are opened for */
    dev_t dev;
    ino_t ino;
    uint64_t file_bytes, debug_bytes;
    char *debug_path;         /* the debug file found, NULL if none */
    struct symbol_memo *memo; /* frames named already */
    struct debuginfod_fetch *fetch; /* NULL: no debuginfod */
    atomic_bool awaits_fetch; /* no debug file was found, and debuginfod may bring one */
    atomic_bool awaits_alt;   /* nor the dwz file it names, whose build ID is alt_id */
    unsigned char alt_id[BUILD_ID_MAX_BYTES]; /* written once, before awaits_alt is set */
    size_t alt_id_len;
};

/* The fields of `z` the debug search needs. */
static struct debug_target target_of(const struct symbolizer *z)
{
    return (struct debug_target){
        .root = z->root,
        .path = z->path,
        .build_id = z->build_id_len ? z->build_id : NULL,
        .build_id_len = z->build_id_len,
        .debuglink = z->debuglink,
        .debuglink_crc = z->debuglink_crc,
        .dev = z->dev,
        .ino = z->ino,
        .reader = z->reader,
    };
}

/*
 * Asks debuginfod for the file's debug file, or (alt) for the dwz
 * supplementary file its debug file names, when none was found here: a
 * descriptor and *found, or -errno with the symbolizer marked as waiting
 * for it. Not there yet, or not now: the symbol cache asks again at each
 * use of this file, which queues a retry when one is due.
 */
static int fetch_debuginfo(struct symbolizer *z, bool alt, char **found)
{
    const unsigned char *id = z->build_id;
    size_t len = z->build_id_len;
    atomic_bool *awaits = &z->awaits_fetch;
    if (!z->fetch)
        return -ENOENT;
    if (alt) {
        struct debug_target t = target_of(z);
        if (atomic_load(&z->awaits_alt) ||
            debug_link_alt_build_id(&t, z->debug_path, z->alt_id, &z->alt_id_len) != 0)
            return -ENOENT;
        id = z->alt_id;
        len = z->alt_id_len;
        awaits = &z->awaits_alt;
    }
    if (len == 0)
        return -ENOENT;
    int fd = debuginfod_fetch_open(z->fetch, id, len, found);
    if (fd < 0 && fd != -ENOMEM)
        atomic_store(awaits, true);
    return fd;
}

/* libdwfl's request for a debug file: the file's own separate debug file,
 * or (named by the debug file) a dwz supplementary file. */
static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
                          const char *file_name, const char *debuglink_file,
                          GElf_Word debuglink_crc, char **debuginfo_file_name)
{
    (void)mod, (void)modname, (void)base, (void)file_name, (void)debuglink_crc;
    struct symbolizer *z = *userdata;
    struct debug_target t = target_of(z);
    char *found = NULL;
    int fd;
    bool alt = debuglink_file && (!z->debuglink || strcmp(debuglink_file, z->debuglink) != 0);
    if (alt)
        fd = debug_link_open_alt(&t, z->debug_path, debuglink_file, &found);
    else
        fd = debug_link_open(&t, &found);
    if (fd == -ENOENT)
        fd = fetch_debuginfo(z, alt, &found);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) == 0)
        z->debug_bytes += (uint64_t)st.st_size;
    if (!alt && !z->debug_path)
        z->debug_path = strdup(found);
    *debuginfo_file_name = found; /* libdwfl frees it */
    return fd;
}

/* A module is only ever reported with its file open: there is nothing to find. */
static int find_elf(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
                    char **file_name, Elf **elfp)
{
    (void)mod, (void)userdata, (void)modname, (void)base, (void)file_name, (void)elfp;
    return -1;
}

static const Dwfl_Callbacks callbacks = {
    .find_elf = find_elf,
    .find_debuginfo = find_debuginfo,
    .section_address = dwfl_offline_section_address,
};

/* Reads the build ID, debuglink and PT_LOAD headers of the reported file. */
static int read_file_facts(struct symbolizer *z)
{
    Elf *elf = dwfl_module_getelf(z->mod, &z->bias);
    if (!elf)
        return -ENOEXEC;
    const unsigned char *id;
    GElf_Addr id_vaddr;
    int len = dwfl_module_build_id(z->mod, &id, &id_vaddr);
    if (len > 0 && len <= BUILD_ID_MAX_BYTES) {
        memcpy(z->build_id, id, (size_t)len);
        z->build_id_len = (size_t)len;
        build_id_hex(id, (size_t)len, z->build_id_hex);
    }
    z->debuglink = dwelf_elf_gnu_debuglink(elf, &z->debuglink_crc);
    size_t nph;
    if (elf_getphdrnum(elf, &nph) != 0)
        return -ENOEXEC;
    z->loads = calloc(nph ? nph : 1, sizeof(*z->loads));
    if (!z->loads)
        return -ENOMEM;
    for (size_t i = 0; i < nph; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_LOAD)
            z->loads[z->nloads++] = ph;
    }
    return 0;
}

void symbolizer_set_reader(struct symbolizer *z, uid_t uid, gid_t gid)
{
    z->reader.reader_uid = uid;
    z->reader.reader_gid = gid;
}

bool symbolizer_is_file(const struct symbolizer *z, dev_t dev, ino_t ino)
{
    return z->dev == dev && z->ino == ino;
}

int symbolizer_open(const char *open_path, const char *root, const char *path,
                    struct symbolizer **out)
{
    return symbolizer_open_fetching(open_path, root, path, NULL, out);
}

int symbolizer_open_fetching(const char *open_path, const char *root, const char *path,
                             struct debuginfod_fetch *fetch, struct symbolizer **out)
{
    int err = -ENOMEM;
    struct symbolizer *z = calloc(1, sizeof(*z));
    if (!z)
        return -ENOMEM;
    z->fetch = fetch;
    z->root = strdup(root ? root : "");
    z->path = strdup(path ? path : "");
    z->memo = symbol_memo_new();
    if (!z->root || !z->path || !z->memo)
        goto out;
    /* Only root opens here, for whoever may profile: the reader is set
     * later (symbolizer_set_reader()) for the debug files. */
    z->reader = (struct safe_open_rule){.max_bytes = SAFE_OPEN_MAX_DEBUG_BYTES};
    struct stat st;
    int fd = safe_open_path(open_path, &z->reader, &st);
    if (fd < 0) {
        err = fd == -EFBIG ? -ENOEXEC : fd;
        goto out;
    }
    z->dev = st.st_dev;
    z->ino = st.st_ino;
    z->file_bytes = (uint64_t)st.st_size;
    z->dwfl = dwfl_begin(&callbacks);
    if (!z->dwfl) {
        close(fd);
        goto out;
    }
    dwfl_report_begin(z->dwfl);
    /* On success libdwfl owns fd. */
    z->mod = dwfl_report_elf(z->dwfl, z->path[0] ? z->path : open_path, open_path, fd, 0, false);
    dwfl_report_end(z->dwfl, NULL, NULL);
    if (!z->mod) {
        close(fd);
        err = -ENOEXEC;
        goto out;
    }
    void **userdata;
    dwfl_module_info(z->mod, &userdata, NULL, NULL, NULL, NULL, NULL, NULL);
    *userdata = z;
    err = read_file_facts(z);
    if (err)
        goto out;
    *out = z;
    return 0;
out:
    symbolizer_close(z);
    return err;
}

void symbolizer_close(struct symbolizer *z)
{
    if (!z)
        return;
    if (z->dwfl)
        dwfl_end(z->dwfl);
    free(z->loads);
    free(z->root);
    free(z->path);
    free(z->debug_path);
    symbol_memo_free(z->memo);
    free(z);
}

const char *symbolizer_build_id(const struct symbolizer *z)
{
    return z->build_id_hex;
}

int symbolizer_offset_to_vaddr(const struct symbolizer *z, uint64_t offset, uint64_t *vaddr)
{
    for (size_t i = 0; i < z->nloads; i++) {
        const GElf_Phdr *p = &z->loads[i];
        if (offset >= p->p_offset && offset - p->p_offset < p->p_filesz) {
            *vaddr = p->p_vaddr + (offset - p->p_offset);
            return 0;
        }
    }
    return -ENOENT;
}

uint64_t symbolizer_bytes(const struct symbolizer *z)
{
    return z->file_bytes + z->debug_bytes + symbol_memo_bytes(z->memo);
}

const char *symbolizer_debug_path(const struct symbolizer *z)
{
    return z->debug_path ? z->debug_path : "";
}

bool symbolizer_debuginfod_arrived(struct symbolizer *z)
{
    return (atomic_load(&z->awaits_fetch) &&
            debuginfod_fetch_arrived(z->fetch, z->build_id, z->build_id_len)) ||
           (atomic_load(&z->awaits_alt) &&
            debuginfod_fetch_arrived(z->fetch, z->alt_id, z->alt_id_len));
}

void sym_frame_free(struct sym_frame *f)
{
    for (size_t i = 0; i < f->n; i++) {
        free(f->lines[i].name);
        free(f->lines[i].system_name);
    }
    f->n = 0;
}

/* The udata attribute `name` of `die` (not integrated), or 0. */
static Dwarf_Word udata(Dwarf_Die *die, unsigned name)
{
    Dwarf_Attribute a;
    Dwarf_Word v;
    return dwarf_formudata(dwarf_attr(die, name, &a), &v) == 0 ? v : 0;
}

/*
 * Names the real (not inlined) C++ or Rust function at module address
 * `addr` from the symbol table when DWARF gives it no linkage name: static
 * functions and compiler-made ones (_GLOBAL__sub_I_...) are named there as
 * addr2line and pprof name them, with their parameters. C's DWARF names
 * are the functions' own (the symbol table may hold only an internal alias,
 * as glibc's __GI___libc_malloc). Also names a function whose DWARF name
 * cannot be read ("??"): a debug file shrunk by dwz keeps its names in the
 * supplementary file, which may be missing (or still being fetched). Keeps
 * the DWARF name otherwise.
 */
static int prefer_symbol(struct symbolizer *z, Dwarf_Die *die, int lang, GElf_Addr addr,
                         struct sym_line *l)
{
    GElf_Off off;
    GElf_Sym sym;
    bool unnamed = strcmp(l->system_name, "??") == 0;
    if (!unnamed && (!sym_lang_has_scopes(lang) || sym_has_linkage_name(die)))
        return 0;
    const char *name = dwfl_module_addrinfo(z->mod, addr, &off, &sym, NULL, NULL, NULL);
    if (!name || !name[0])
        return 0;
    struct sym_line from_symbol;
    int err = sym_names_of_symbol(name, &from_symbol);
    if (err)
        return err;
    free(l->name);
    free(l->system_name);
    l->name = from_symbol.name;
    l->system_name = from_symbol.system_name;
    return 0;
}

/* Scopes of a compile unit searched in depth, for the walk below: deeper
 * nesting is not searched. */
#define SCOPE_WALK_MAX_DEPTH 64

/* Whether a DIE's children are worth a look for code (not for types' members
 * only: a C++ lambda's code can sit in a class inside a function). */
static bool may_hold_code(int tag)
{
    return tag == DW_TAG_subprogram || tag == DW_TAG_namespace || tag == DW_TAG_class_type ||
           tag == DW_TAG_structure_type || tag == DW_TAG_union_type ||
           tag == DW_TAG_lexical_block || tag == DW_TAG_inlined_subroutine || tag == DW_TAG_module;
}

/*
 * The innermost scope holding `pc`, found by walking the whole unit: GCC
 * puts the code of a lambda inside the class it makes for it, inside the
 * function that defines it, whose own code range does not hold the
 * lambda's, and dwarf_getscopes only descends into ranges that hold pc.
 * Each scope found that holds pc is searched again for an inner one.
 * 0 and *out, or -ENOENT.
 */
static int walk_for_scope(Dwarf_Die *cu, Dwarf_Addr pc, Dwarf_Die *out)
{
    Dwarf_Die stack[SCOPE_WALK_MAX_DEPTH];
    Dwarf_Die within = *cu;
    bool found = false, deeper = true;
    while (deeper) {
        deeper = false;
        size_t depth = dwarf_child(&within, &stack[0]) == 0;
        while (depth > 0 && !deeper) {
            Dwarf_Die *d = &stack[depth - 1];
            int tag = dwarf_tag(d);
            if ((tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine ||
                 tag == DW_TAG_lexical_block) &&
                dwarf_haspc(d, pc) == 1) {
                *out = within = *d;
                found = deeper = true;
            } else if (may_hold_code(tag) && depth < SCOPE_WALK_MAX_DEPTH &&
                       dwarf_child(d, &stack[depth]) == 0) {
                depth++;
            } else {
                /* The next sibling, climbing out of scopes with no more. */
                while (depth > 0 && dwarf_siblingof(&stack[depth - 1], &stack[depth - 1]) != 0)
                    depth--;
            }
        }
    }
    return found ? 0 : -ENOENT;
}

/*
 * The lines of code address `pc` (a DWARF address; `addr` in the module)
 * in compile unit `cu`: the function scopes containing it from the
 * innermost inlined call out to the real function. The innermost line is
 * the line table's; each outer one is the call site of the inlined call
 * inside it. 0 with f->n == 0 when no function scope contains pc.
 */
static int dwarf_lines(struct symbolizer *z, Dwarf_Die *cu, Dwarf_Addr pc, GElf_Addr addr,
                       struct sym_frame *f)
{
    /* dwarf_getscopes follows an inlined call into its abstract definition
     * (for name lookup); the nesting of calls is the concrete tree above
     * the innermost scope, which dwarf_getscopes_die gives. */
    Dwarf_Die *inner = NULL, *scopes = NULL, walked;
    int n = dwarf_getscopes(cu, pc, &inner);
    if (n > 0 && dwarf_tag(&inner[0]) != DW_TAG_compile_unit)
        n = dwarf_getscopes_die(&inner[0], &scopes);
    else if (walk_for_scope(cu, pc, &walked) == 0)
        n = dwarf_getscopes_die(&walked, &scopes);
    else
        n = 0;
    free(inner);
    Dwarf_Line *dl = dwarf_getsrc_die(cu, pc);
    const char *file = dl ? dwarf_linesrc(dl, NULL, NULL) : NULL;
    int lineno = 0;
    if (dl)
        dwarf_lineno(dl, &lineno);
    Dwarf_Files *files = NULL;
    size_t nfiles = 0;
    int lang = dwarf_srclang(cu);
    int err = 0;
    for (int i = 0; i < n && f->n < SYM_MAX_LINES && err == 0; i++) {
        Dwarf_Die *s = &scopes[i];
        int tag = dwarf_tag(s);
        if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram &&
            tag != DW_TAG_entry_point)
            continue;
        struct sym_line *l = &f->lines[f->n];
        err = sym_names_of_die(s, lang, l);
        if (err)
            break;
        l->file = file ? file : "";
        l->line = lineno;
        f->n++;
        if (tag != DW_TAG_inlined_subroutine) {
            err = prefer_symbol(z, s, lang, addr, l);
            break;
        }
        /* The next line out is where this inlined call was made. */
        if (!files && dwarf_getsrcfiles(cu, &files, &nfiles) != 0)
            files = NULL;
        Dwarf_Word fi = udata(s, DW_AT_call_file);
        file = files && fi < nfiles ? dwarf_filesrc(files, fi, NULL, NULL) : NULL;
        lineno = (int)udata(s, DW_AT_call_line);
    }
    free(scopes);
    return err;
}

/* The symbol table's name for module address `addr` as one line, with the
 * line table's file and line when a compile unit covers it. */
static int symtab_line(struct symbolizer *z, Dwarf_Die *cu, Dwarf_Addr dwpc, GElf_Addr addr,
                       struct sym_frame *f)
{
    GElf_Off off;
    GElf_Sym sym;
    const char *name = dwfl_module_addrinfo(z->mod, addr, &off, &sym, NULL, NULL, NULL);
    if (!name || !name[0])
        return 0;
    struct sym_line *l = &f->lines[0];
    int err = sym_names_of_symbol(name, l);
    if (err)
        return err;
    Dwarf_Line *dl = cu ? dwarf_getsrc_die(cu, dwpc) : NULL;
    const char *file = dl ? dwarf_linesrc(dl, NULL, NULL) : NULL;
    int lineno = 0;
    if (dl)
        dwarf_lineno(dl, &lineno);
    l->file = file ? file : "";
    l->line = lineno;
    f->n = 1;
    return 0;
}

int symbolizer_lookup(struct symbolizer *z, uint64_t vaddr, struct sym_frame *out)
{
    int err = symbol_memo_get(z->memo, vaddr, out);
    if (err != -ENOENT)
        return err;
    err = 0;
    GElf_Addr addr = vaddr + z->bias;
    Dwarf_Addr dwbias = 0;
    Dwarf_Die *cu = dwfl_module_addrdie(z->mod, addr, &dwbias);
    if (cu) {
        err = dwarf_lines(z, cu, addr - dwbias, addr, out);
        out->from_dwarf = err == 0 && out->n > 0;
    }
    if (err == 0 && out->n == 0)
        err = symtab_line(z, cu, addr - dwbias, addr, out);
    if (err == 0)
        err = symbol_memo_put(z->memo, vaddr, out);
    if (err)
        sym_frame_free(out);
    return err;
}
