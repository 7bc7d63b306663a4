/*
 * allocator.c - resolves the allocator functions of a process in the dynamic
 * linker's search order (see allocator.h).
 */
#include "allocator.h"

#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "allocator_names.h"
#include "debug_link.h"
#include "elf_cache.h"
#include "elf_file.h"
#include "load_order.h"
#include "probe_site.h"
#include "proc_info.h"
#include "safe_open.h"

/* An object of the process, opened once per resolution. */
struct candidate {
    const struct loaded_object *lo;
    struct elf_file *ef;
    struct elf_file *debug; /* a stripped static executable's debug file, or NULL */
    int tried;
    int is_static_exe;
};

/* The first object that could not be opened, and why: when no object
 * defines malloc and free, that is the reason to give. */
struct open_failure {
    int err; /* 0: none */
    char path[512];
};

/* Opens the object as the process maps it, even in another mount
 * namespace or after the file was deleted: its map_files link, else its
 * path in the process's root. -errno of the first failure. */
static int open_object(pid_t pid, const struct loaded_object *lo, struct elf_file **ef,
                       struct open_failure *fail)
{
    char path[sizeof(fail->path)];
    int first = -ENOENT;
    if (lo->first_mapping) {
        first = proc_map_file_path(pid, lo->first_mapping->start, lo->first_mapping->end, path,
                                   sizeof(path));
        if (first == 0 && (first = elf_cache_open(path, ef)) == 0)
            return 0;
    }
    int n = snprintf(path, sizeof(path), "/proc/%d/root%s", (int)pid, lo->path);
    int e = n < 0 || (size_t)n >= sizeof(path) ? -ENAMETOOLONG : elf_cache_open(path, ef);
    if (e == 0)
        return 0;
    if (!lo->first_mapping)
        first = e; /* the root path was the only way tried */
    if (fail->err == 0) {
        fail->err = first;
        snprintf(fail->path, sizeof(fail->path), "%s", lo->path);
    }
    return first;
}

/* GNU build ID hex into bytes; their count, 0 if the text is not hex. */
static size_t build_id_bytes(const char *hex, unsigned char *out, size_t cap)
{
    size_t n = 0;
    for (; hex[0] && hex[1] && n < cap; hex += 2) {
        unsigned v;
        if (sscanf(hex, "%2x", &v) != 1)
            return 0;
        out[n++] = (unsigned char)v;
    }
    return hex[0] ? 0 : n;
}

/*
 * The debug file of the process's executable, a static one stripped of its
 * symbols, found by its build ID only (in the process's root, then ours;
 * see debug_link.h): a matching build ID makes its symbol addresses the
 * executable's own. A .gnu_debuglink name alone is not enough here: it
 * says which file, not which build. NULL if there is none.
 */
static struct elf_file *open_debug_file(pid_t pid, const struct candidate *c)
{
    char hex[129], root[64];
    unsigned char id[64];
    struct elf_file *dbg = NULL;
    dev_t dev;
    ino_t ino;
    size_t len;
    if (elf_file_build_id(c->ef, hex, sizeof(hex)) != 0 ||
        !(len = build_id_bytes(hex, id, sizeof(id))) || proc_exe_identity(pid, &dev, &ino) != 0)
        return NULL;
    snprintf(root, sizeof(root), "/proc/%d/root", (int)pid);
    struct debug_target t = {.root = root,
                             .path = c->lo->path,
                             .build_id = id,
                             .build_id_len = len,
                             .dev = dev,
                             .ino = ino,
                             .reader = {.max_bytes = SAFE_OPEN_MAX_DEBUG_BYTES}};
    char *found = NULL;
    if (safe_open_reader_of(pid, &t.reader) != 0)
        return NULL;
    int fd = debug_link_open(&t, &found);
    if (fd < 0)
        return NULL;
    /* The descriptor checked, not its path again: the process may swap it. */
    if (elf_file_open_fd(fd, &dbg) != 0)
        dbg = NULL;
    free(found);
    return dbg;
}

/* Opens candidate `c` (the i-th object in load order) on first use; a
 * static executable without a symbol for malloc gets its debug file too. */
static void open_candidate(pid_t pid, struct candidate *c, size_t i, struct open_failure *fail)
{
    struct elf_symbol sym;
    if (c->tried)
        return;
    c->tried = 1;
    if (open_object(pid, c->lo, &c->ef, fail) != 0) {
        c->ef = NULL;
        return;
    }
    /* A static executable binds to its own symbol table. */
    c->is_static_exe = i == 0 && !elf_file_is_dynamic(c->ef);
    if (c->is_static_exe && elf_file_find_function(c->ef, "malloc", false, &sym) != 0)
        c->debug = open_debug_file(pid, c);
}

/* The mapping of `object_path` holding file offset `off`, to place code in memory. */
static const struct proc_mapping *mapping_of_offset(const struct proc_maps *maps,
                                                    const char *object_path, uint64_t off)
{
    for (size_t i = 0; i < maps->n; i++) {
        const struct proc_mapping *m = &maps->v[i];
        if (strcmp(m->path, object_path) == 0 && off >= m->offset &&
            off < m->offset + (m->end - m->start))
            return m;
    }
    return NULL;
}

static int already_planned(const struct allocator_plan *plan, const char *obj, uint64_t off)
{
    for (size_t i = 0; i < plan->n; i++)
        if (plan->funcs[i].symbol_offset == off && strcmp(plan->funcs[i].object_path, obj) == 0)
            return 1;
    return 0;
}

/* Adds function `k` from candidate `c` to the plan; 0 if it was added or is an alias. */
static int plan_function(pid_t pid, const struct proc_maps *maps, struct candidate *c, size_t k,
                         const struct elf_symbol *sym, struct allocator_plan *plan)
{
    uint64_t off;
    if (elf_file_vaddr_to_offset(c->ef, sym->vaddr, &off) != 0)
        return -ENOENT;
    if (already_planned(plan, c->lo->path, off))
        return 0;
    const struct proc_mapping *m = mapping_of_offset(maps, c->lo->path, off);
    if (!m || plan->n == HP_MAX_FUNCS)
        return -ENOENT;
    struct allocator_func *f = &plan->funcs[plan->n];
    char open_path[256];
    if (proc_map_file_path(pid, m->start, m->end, open_path, sizeof(open_path)) != 0)
        return -ENAMETOOLONG;
    f->name = allocator_names[k].name;
    f->kind = allocator_names[k].kind;
    f->object_path = strdup(c->lo->path);
    f->open_path = strdup(open_path);
    /* Code beyond this is not needed: fast paths branch early (probe_site.h). */
    uint8_t code[4096];
    size_t len = !sym->size ? 64 : sym->size < sizeof(code) ? sym->size : sizeof(code);
    struct probe_site site = {.offset = 0, .emulated = 0, .reason = "code not readable"};
    if (elf_file_read(c->ef, sym->vaddr, code, len) == 0)
        probe_site_choose(code, len, allocator_names[k].kind, sym->size && sym->size <= len,
                          &site);
    f->symbol_offset = off;
    f->file_offset = off + site.offset;
    f->emulated = site.emulated;
    f->site_reason = site.reason;
    f->inode = m->inode;
    f->runtime_start = m->start + (off - m->offset);
    f->runtime_end = f->runtime_start + (sym->size ? sym->size : 1);
    if (!f->object_path || !f->open_path) {
        free(f->object_path);
        free(f->open_path);
        return -ENOMEM;
    }
    plan->n++;
    return 0;
}

/* Records where calls to `name` bind: symbol `sym` of candidate `c`, as mapped. */
static void bind(const struct proc_maps *maps, const struct candidate *c, const char *name,
                 const struct elf_symbol *sym, struct allocator_plan *plan)
{
    uint64_t off;
    const struct proc_mapping *m;
    if (plan->nbound == ALLOCATOR_MAX_BINDINGS ||
        elf_file_vaddr_to_offset(c->ef, sym->vaddr, &off) != 0 ||
        !(m = mapping_of_offset(maps, c->lo->path, off)))
        return;
    plan->bound[plan->nbound++] = (struct allocator_binding){
        .name = name, .addr = m->start + (off - m->offset)};
}

uint64_t allocator_bound(const struct allocator_plan *plan, const char *name)
{
    for (size_t i = 0; i < plan->nbound; i++)
        if (strcmp(plan->bound[i].name, name) == 0)
            return plan->bound[i].addr;
    return 0;
}

/* Where the dynamic linker's functions that the in-process sampler calls
 * bind: the first object exporting each. */
static void bind_loader_functions(pid_t pid, const struct proc_maps *maps,
                                  struct candidate *cands, size_t ncands,
                                  struct allocator_plan *plan, struct open_failure *fail)
{
    static const char *const names[] = ALLOCATOR_LOADER_NAMES;
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++)
        for (size_t i = 0; i < ncands; i++) {
            struct elf_symbol sym;
            open_candidate(pid, &cands[i], i, fail);
            if (cands[i].ef && !cands[i].is_static_exe &&
                elf_file_find_function(cands[i].ef, names[k], true, &sym) == 0) {
                bind(maps, &cands[i], names[k], &sym, plan);
                break;
            }
        }
}

/* Plans each entry point from the first object of the search order that
 * defines it; the objects are opened as they are first needed. */
static int plan_entry_points(pid_t pid, const struct proc_maps *maps, struct candidate *cands,
                             size_t ncands, struct allocator_plan *plan, struct open_failure *fail)
{
    int e = 0;
    for (size_t k = 0; k < allocator_names_count && e == 0; k++) {
        if (allocator_names[k].role != ALLOCATOR_ENTRY)
            continue;
        for (size_t i = 0; i < ncands; i++) {
            struct candidate *c = &cands[i];
            open_candidate(pid, c, i, fail);
            if (!c->ef)
                continue;
            /* Symbols from the debug file name code in the executable: same build. */
            struct elf_symbol sym;
            if (elf_file_find_function(c->debug ? c->debug : c->ef, allocator_names[k].name,
                                       !c->is_static_exe, &sym) != 0)
                continue;
            if (elf_file_machine(c->ef) != EM_X86_64)
                return -EXDEV;
            if (allocator_runtime_calls(&allocator_names[k], c->lo->path))
                break; /* counted at its malloc, with its frame dropped */
            bind(maps, c, allocator_names[k].name, &sym, plan);
            if (i == 0 && allocator_names[k].kind == HP_MALLOC)
                plan->malloc_in_executable = 1;
            e = plan_function(pid, maps, c, k, &sym, plan);
            if (e == -ENOENT)
                e = 0; /* calls bind here even so; unmapped code cannot be probed */
            break;
        }
    }
    return e;
}

/* Whether the plan has malloc, and free. */
static void plan_has(const struct allocator_plan *plan, int *have_malloc, int *have_free)
{
    *have_malloc = *have_free = 0;
    for (size_t i = 0; i < plan->n; i++) {
        *have_malloc |= plan->funcs[i].kind == HP_MALLOC;
        *have_free |= plan->funcs[i].kind == HP_FREE;
    }
}

/* Says why a static executable without a symbol for malloc cannot be profiled. */
static int refuse_stripped(pid_t pid, const struct candidate *exe, char *err, size_t errlen)
{
    char hex[129] = "";
    if (exe->ef)
        elf_file_build_id(exe->ef, hex, sizeof(hex));
    snprintf(err, errlen,
             "process %d cannot be profiled: %s is statically linked and has no symbol for "
             "malloc (stripped), and no debug file with its build ID %s was found "
             "(/usr/lib/debug/.build-id/)",
             (int)pid, exe->lo->path, hex[0] ? hex : "(none)");
    return -ENOEXEC;
}

int allocator_resolve(pid_t pid, const struct proc_maps *maps, struct allocator_plan *plan,
                      char *err, size_t errlen)
{
    struct load_order lo;
    struct open_failure fail = {.err = 0};
    memset(plan, 0, sizeof(*plan));
    int e = load_order_read(pid, maps, &lo);
    if (e) {
        snprintf(err, errlen, "read the loaded objects of process %d: %s", (int)pid,
                 strerror(-e));
        return e;
    }
    struct candidate *cands = calloc(lo.n ? lo.n : 1, sizeof(*cands));
    if (!cands) {
        load_order_free(&lo);
        return -ENOMEM;
    }
    for (size_t i = 0; i < lo.n; i++)
        cands[i].lo = &lo.v[i];
    e = plan_entry_points(pid, maps, cands, lo.n, plan, &fail);
    int is_static = lo.n > 0 && cands[0].is_static_exe;
    plan->settled = lo.settled || is_static;
    plan->r_debug = lo.r_debug;
    if (e == 0 && !is_static)
        bind_loader_functions(pid, maps, cands, lo.n, plan, &fail);
    int have_malloc, have_free;
    plan_has(plan, &have_malloc, &have_free);
    /* A static executable that defines no free (musl links its simple
     * malloc then) has nothing that frees: malloc alone is enough. */
    int complete = have_malloc && (have_free || is_static);
    if (e == -EXDEV) {
        snprintf(err, errlen, "process %d: its allocator is not x86-64 code (an emulated "
                 "process?)", (int)pid);
        e = -ENOEXEC;
    } else if (e == 0 && is_static && !have_malloc) {
        e = refuse_stripped(pid, &cands[0], err, errlen);
    } else if (e) {
        snprintf(err, errlen, "process %d: resolve allocator functions: %s", (int)pid,
                 strerror(-e));
    } else if (!complete && fail.err) {
        /* An object we could not read may be the one that defines them. */
        snprintf(err, errlen, "process %d: open %s to find its allocator: %s", (int)pid,
                 fail.path, strerror(-fail.err));
        e = fail.err;
    } else if (!complete) {
        snprintf(err, errlen, "process %d: no loaded object defines malloc and free", (int)pid);
        e = -ENOENT;
    }
    for (size_t i = 0; i < lo.n; i++) {
        elf_cache_put(cands[i].ef);
        elf_file_close(cands[i].debug);
    }
    free(cands);
    load_order_free(&lo);
    if (e)
        allocator_plan_free(plan);
    return e;
}

void allocator_plan_free(struct allocator_plan *plan)
{
    for (size_t i = 0; i < plan->n; i++) {
        free(plan->funcs[i].object_path);
        free(plan->funcs[i].open_path);
    }
    plan->n = 0;
}
