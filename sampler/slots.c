/*
 * slots.c - the sampler's installer: points the relocation slots that bind
 * a process's modules to its allocator at the wrappers of sampler.c, and
 * back again. It runs inside the process: once at an attach or a detach,
 * called by the daemon through hp_remote_call (report.S) on one stopped
 * thread, and after every dlopen or dlmopen, so that a module loaded later
 * gets its slots before the call that loaded it returns.
 *
 * Why slots and never code: a uprobe another tool places on a function
 * whose first bytes were rewritten makes the kernel emulate the file's
 * instruction and resume inside the rewrite, and the process dies. Slots
 * are data; the kernel, debuggers and live patchers never look at them.
 *
 * Which slots: in each module of the base namespace (the dynamic linker's
 * r_debug list; another dlmopen namespace has an allocator of its own), the
 * R_X86_64_JUMP_SLOT, R_X86_64_GLOB_DAT and R_X86_64_64 relocations against
 * an entry's name whose slot holds the function the daemon resolved for
 * it (hp_sampler_config.orig), or, for a lazily bound JUMP_SLOT, the PLT
 * stub that pushes that slot's own index: the first call would bind it to
 * the same function. A slot bound elsewhere (a module's own malloc, another
 * namespace's) is left alone. Every store is one atomic 8-byte exchange, so
 * a thread calling through a slot sees the old or the new pointer; the
 * slots in a module's RELRO pages are written with those pages made
 * writable for the stores only.
 *
 * Which lock, and never waiting on it for long (loader_lock.c): the
 * modules are walked under the dynamic linker's load lock, which every
 * dlopen and dlclose holds while they change the list or unmap a module,
 * and which glibc gives back free in a fork child. The walk goes down
 * the list itself rather than through dl_iterate_phdr: that takes
 * another lock, the list's write lock, which a fork child inherits held
 * by a thread it does not have (a parent thread inside dl_iterate_phdr at
 * the fork, or our own walk), and waiting on it hangs the child for ever.
 * Where the load lock is unknown (not glibc), the walk goes through
 * dl_iterate_phdr as before.
 */
#include <elf.h>

#include "hp_sampler.h"

typedef __u64 u64;
typedef __u32 u32;
typedef unsigned long size_t;
#define HIDDEN __attribute__((visibility("hidden")))

extern struct hp_sampler_config hp_sampler_config HIDDEN;
extern struct hp_fork_page hp_fork_page HIDDEN;
HIDDEN struct hp_install_status hp_install_status;

/* loader_lock.c */
int hp_loader_lock_known(void) HIDDEN;
int hp_loader_lock(void) HIDDEN;
void hp_loader_unlock(void) HIDDEN;

/* The wrappers (sampler.c, report.S), by address only: one per row of
 * alloc_entries.h. */
#define EXTERN_ROW(sym, kind, family) extern char hp_wrap_##sym[] HIDDEN;
HP_ALLOC_ENTRIES(EXTERN_ROW)
#undef EXTERN_ROW

/* report.S reaches these by offset. */
_Static_assert(__builtin_offsetof(struct hp_sampler_config, orig[HP_E_dlopen]) == 1088, "report.S");
_Static_assert(__builtin_offsetof(struct hp_sampler_config, orig[HP_E_dlmopen]) == 1096, "report.S");
_Static_assert(HP_REMOTE_DONE_SYSCALL == 39, "report.S");
_Static_assert(__builtin_offsetof(struct hp_install_status, done) == 32, "report.S");

/* The names, as a fixed array: a table of pointers would need dynamic
 * relocations, which nobody applies to the injected object. */
#define ENTRY_NAME_MAX 40
#define NAME_ROW(sym, kind, family) #sym,
static const char entry_names[HP_ENTRY_COUNT][ENTRY_NAME_MAX] = {HP_ALLOC_ENTRIES(NAME_ROW)};
#undef NAME_ROW
#define NAME_FITS(sym, kind, family) \
    _Static_assert(sizeof(#sym) <= ENTRY_NAME_MAX, "entry name too long: " #sym);
HP_ALLOC_ENTRIES(NAME_FITS)
#undef NAME_FITS

/* A switch, not an array of addresses, for the same reason. */
static u64 wrapper_of(u32 e)
{
    switch (e) {
#define WRAPPER_ROW(sym, kind, family) \
    case HP_E_##sym:                   \
        return (u64)hp_wrap_##sym;
        HP_ALLOC_ENTRIES(WRAPPER_ROW)
#undef WRAPPER_ROW
    default:
        return 0;
    }
}

/* The value each slot held before we took it, so that a detach puts back
 * exactly that (a lazy slot its PLT stub). Open addressing by slot
 * address; a slot that finds the table full is restored to orig, which
 * binds the same function. Written only under the loader's load lock (or inside
 * dl_iterate_phdr where that lock is unknown). */
#define SAVED_SLOTS 4096
static struct {
    u64 slot, old;
} saved[SAVED_SLOTS];

static u32 saved_index(u64 slot)
{
    return (u32)(((slot >> 3) * 0x9e3779b97f4a7c15ULL) >> 52) & (SAVED_SLOTS - 1);
}

static void save_old(u64 slot, u64 old)
{
    u32 i = saved_index(slot);
    for (u32 n = 0; n < SAVED_SLOTS; n++, i = (i + 1) & (SAVED_SLOTS - 1))
        if (saved[i].slot == 0 || saved[i].slot == slot) {
            saved[i].slot = slot;
            saved[i].old = old;
            return;
        }
}

static u64 saved_old(u64 slot, u64 otherwise)
{
    u32 i = saved_index(slot);
    for (u32 n = 0; n < SAVED_SLOTS && saved[i].slot; n++, i = (i + 1) & (SAVED_SLOTS - 1))
        if (saved[i].slot == slot)
            return saved[i].old;
    return otherwise;
}

static long sys_mprotect(u64 addr, u64 len, long prot)
{
    long r;
    __asm__ volatile("syscall"
                     : "=a"(r)
                     : "a"(10L), "D"(addr), "S"(len), "d"(prot)
                     : "rcx", "r11", "memory");
    return r;
}

static long sys_madvise(u64 addr, u64 len, long advice)
{
    long r;
    __asm__ volatile("syscall"
                     : "=a"(r)
                     : "a"(28L), "D"(addr), "S"(len), "d"(advice)
                     : "rcx", "r11", "memory");
    return r;
}

/* The loader's ABI (link.h), which is stable: the prefix of each struct. */
struct phdr_info {
    u64 addr;
    const char *name;
    const Elf64_Phdr *phdr;
    Elf64_Half phnum;
};
struct link_map_abi {
    u64 l_addr;
    const char *l_name;
    const Elf64_Dyn *l_ld;
    const struct link_map_abi *l_next, *l_prev;
};
struct r_debug_abi {
    int r_version;
    const struct link_map_abi *r_map;
    u64 r_brk;
    int r_state; /* 0: RT_CONSISTENT */
};
typedef int (*phdr_callback)(struct phdr_info *info, size_t size, void *data);
typedef int (*iterate_fn)(phdr_callback cb, void *data);

/* Bounds on what the walk trusts of the loader's lists. */
#define MAX_MODULES 65536
#define MAX_DYNAMIC 1024
#define MAX_PHDRS 256

/* One walk's operation and its tallies. */
struct walk {
    int op; /* HP_REMOTE_INSTALL or HP_REMOTE_UNINSTALL */
    u32 modules, changed, taken, skipped, failed, unread;
    u32 taken_by[HP_ENTRY_COUNT]; /* of taken, each entry's */
};

/* Whether `dyn` is the dynamic section of a module in the base namespace. */
static int in_base_namespace(const Elf64_Dyn *dyn)
{
    const struct r_debug_abi *r = (const struct r_debug_abi *)hp_sampler_config.r_debug;
    const struct link_map_abi *m = r ? r->r_map : 0;
    for (u32 n = 0; m && n < MAX_MODULES; m = m->l_next, n++)
        if (m->l_ld == dyn)
            return 1;
    return 0;
}

static int name_is(const char *a, const char *b)
{
    while (*a && *a == *b)
        a++, b++;
    return *a == *b;
}

/* The entry named `name` whose slots we take, or HP_ENTRY_COUNT. */
static u32 entry_named(const char *name)
{
    for (u32 e = 0; e < HP_ENTRY_COUNT; e++)
        if (name[0] == entry_names[e][0] && hp_sampler_config.orig[e] &&
            name_is(name, entry_names[e]))
            return e;
    return HP_ENTRY_COUNT;
}

/* Whether `v` is the lazy PLT stub of JMPREL entry `index`: `push index`,
 * after an endbr64 where the PLT has one. */
static int lazy_stub_of(u64 v, u64 index)
{
    const unsigned char *c = (const unsigned char *)v;
    if (c[0] == 0xf3 && c[1] == 0x0f && c[2] == 0x1e && c[3] == 0xfa)
        c += 4;
    if (c[0] != 0x68)
        return 0;
    u32 imm = (u32)c[1] | (u32)c[2] << 8 | (u32)c[3] << 16 | (u32)c[4] << 24;
    return imm == index;
}

/* One module's layout, as far as writing its slots goes. */
struct module {
    u64 base;
    const Elf64_Phdr *phdr;
    u32 phnum;
    u64 relro_lo, relro_hi; /* pages the loader made read-only */
    const Elf64_Sym *symtab;
    const char *strtab;
    u64 strsz;
    int relro_open; /* 0: as the loader left it, 1: writable now, -1: mprotect refused */
};

/* Whether `slot` lies in a writable segment (after the loader's RELRO). */
static int writable(const struct module *m, u64 slot)
{
    for (u32 i = 0; i < m->phnum; i++) {
        const Elf64_Phdr *p = &m->phdr[i];
        if (p->p_type == PT_LOAD && (p->p_flags & PF_W) && slot >= m->base + p->p_vaddr &&
            slot + 8 <= m->base + p->p_vaddr + p->p_memsz)
            return 1;
    }
    return 0;
}

/* Makes the module's RELRO pages writable, once per module and walk: one
 * system call for all its slots there, not two per slot (each system call
 * is a stop of the thread the daemon runs this on). */
static int open_relro(struct module *m)
{
    if (!m->relro_open)
        m->relro_open = sys_mprotect(m->relro_lo, m->relro_hi - m->relro_lo,
                                     3 /* PROT_READ | PROT_WRITE */) == 0 ? 1 : -1;
    return m->relro_open > 0;
}

/* Puts the loader's protection back on the RELRO pages. */
static void close_relro(struct module *m)
{
    if (m->relro_open > 0)
        sys_mprotect(m->relro_lo, m->relro_hi - m->relro_lo, 1 /* PROT_READ */);
    m->relro_open = 0;
}

/* Exchanges `from` for `to` in `slot`; 1 if it did. */
static int store(struct module *m, u64 slot, u64 from, u64 to)
{
    u64 *p = (u64 *)slot;
    if (slot >= m->relro_lo && slot < m->relro_hi) {
        if (!open_relro(m))
            return 0;
    } else if (!writable(m, slot)) {
        return 0;
    }
    return __atomic_compare_exchange_n(p, &from, to, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

/* One relocation: takes or gives back its slot as the walk says. */
static void one_slot(struct walk *w, struct module *m, const Elf64_Rela *r, u64 index,
                     int in_jmprel)
{
    u32 type = (u32)ELF64_R_TYPE(r->r_info), sym = (u32)ELF64_R_SYM(r->r_info);
    if (!sym || (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT && type != R_X86_64_64))
        return;
    u64 st_name = m->symtab[sym].st_name;
    if (st_name >= m->strsz)
        return;
    u32 e = entry_named(m->strtab + st_name);
    if (e == HP_ENTRY_COUNT)
        return;
    u64 slot = m->base + r->r_offset, wrap = wrapper_of(e), orig = hp_sampler_config.orig[e];
    u64 v = __atomic_load_n((u64 *)slot, __ATOMIC_ACQUIRE);
    if (w->op == HP_REMOTE_UNINSTALL) {
        if (v == wrap)
            w->changed += store(m, slot, v, saved_old(slot, orig));
        return;
    }
    if (v == wrap) {
        w->taken++;
        w->taken_by[e]++;
        return;
    }
    int bound_here = v == orig && (type != R_X86_64_64 || r->r_addend == 0);
    int lazy = !bound_here && in_jmprel && type == R_X86_64_JUMP_SLOT && v && lazy_stub_of(v, index);
    if (!bound_here && !lazy) {
        w->skipped++;
        return;
    }
    if (store(m, slot, v, wrap)) {
        save_old(slot, v);
        w->changed++;
        w->taken++;
        w->taken_by[e]++;
    } else {
        w->failed++;
    }
}

static void relocations(struct walk *w, struct module *m, u64 table, u64 size,
                        int in_jmprel)
{
    const Elf64_Rela *r = (const Elf64_Rela *)table;
    for (u64 i = 0; table && i < size / sizeof(Elf64_Rela); i++)
        one_slot(w, m, &r[i], i, in_jmprel);
}

/* A d_ptr as a runtime address: the loader rewrites them in place where
 * the dynamic section is writable, and leaves them as link-time addresses
 * where it is not. */
static u64 dyn_ptr(u64 base, u64 v)
{
    return v < base ? v + base : v;
}

/* Takes or gives back the slots of the module at `base` whose program
 * headers are `phdr`; `listed` says it is known to be in the base
 * namespace already. */
static void one_module(struct walk *w, u64 base, const Elf64_Phdr *phdr, u32 phnum, int listed)
{
    struct module m = {.base = base, .phdr = phdr, .phnum = phnum};
    const Elf64_Dyn *dyn = 0;
    for (u32 i = 0; i < m.phnum; i++) {
        const Elf64_Phdr *p = &m.phdr[i];
        if (p->p_type == PT_DYNAMIC)
            dyn = (const Elf64_Dyn *)(m.base + p->p_vaddr);
        if (p->p_type == PT_GNU_RELRO) {
            m.relro_lo = (m.base + p->p_vaddr) & ~4095ULL;
            m.relro_hi = (m.base + p->p_vaddr + p->p_memsz) & ~4095ULL;
        }
    }
    if (!dyn || (!listed && !in_base_namespace(dyn)))
        return;
    w->modules++;
    u64 jmprel = 0, jmprelsz = 0, rela = 0, relasz = 0;
    for (u32 i = 0; i < MAX_DYNAMIC && dyn[i].d_tag != DT_NULL; i++) {
        u64 v = dyn[i].d_un.d_val;
        switch (dyn[i].d_tag) {
        case DT_SYMTAB: m.symtab = (const Elf64_Sym *)dyn_ptr(m.base, v); break;
        case DT_STRTAB: m.strtab = (const char *)dyn_ptr(m.base, v); break;
        case DT_STRSZ: m.strsz = v; break;
        case DT_JMPREL: jmprel = dyn_ptr(m.base, v); break;
        case DT_PLTRELSZ: jmprelsz = v; break;
        case DT_RELA: rela = dyn_ptr(m.base, v); break;
        case DT_RELASZ: relasz = v; break;
        default: break;
        }
    }
    if (!m.symtab || !m.strtab)
        return;
    relocations(w, &m, jmprel, jmprelsz, 1);
    relocations(w, &m, rela, relasz, 0);
    close_relro(&m);
}

static int each_module(struct phdr_info *info, size_t size, void *data)
{
    (void)size;
    one_module(data, info->addr, info->phdr, info->phnum, 0);
    return 0;
}

/* The program headers of the listed module `m`, or 0. The executable's
 * are the kernel's AT_PHDR; any other module's are found through its ELF
 * header at its load address (the first PT_LOAD of a shared object maps
 * it from offset 0), and are believed only if their PT_DYNAMIC is the
 * dynamic section the list names. */
static const Elf64_Phdr *phdrs_of(const struct link_map_abi *m, int first, u32 *phnum)
{
    const Elf64_Phdr *ph;
    u32 n;
    if (first && hp_sampler_config.exe_phdr) {
        ph = (const Elf64_Phdr *)hp_sampler_config.exe_phdr;
        n = (u32)hp_sampler_config.exe_phnum;
    } else {
        const Elf64_Ehdr *eh = (const Elf64_Ehdr *)m->l_addr;
        if (!m->l_addr || eh->e_ident[0] != 0x7f || eh->e_ident[1] != 'E' ||
            eh->e_ident[2] != 'L' || eh->e_ident[3] != 'F' ||
            eh->e_phentsize != sizeof(Elf64_Phdr))
            return 0;
        ph = (const Elf64_Phdr *)(m->l_addr + eh->e_phoff);
        n = eh->e_phnum;
    }
    if (n == 0 || n > MAX_PHDRS)
        return 0;
    for (u32 i = 0; i < n; i++)
        if (ph[i].p_type == PT_DYNAMIC && m->l_addr + ph[i].p_vaddr == (u64)m->l_ld) {
            *phnum = n;
            return ph;
        }
    return 0;
}

/* Walks the base namespace's list itself, under the load lock. */
static void walk_list(struct walk *w, const struct r_debug_abi *r)
{
    const struct link_map_abi *m = r->r_map;
    for (u32 n = 0; m && n < MAX_MODULES; m = m->l_next, n++) {
        u32 phnum = 0;
        const Elf64_Phdr *ph = phdrs_of(m, n == 0, &phnum);
        if (ph)
            one_module(w, m->l_addr, ph, phnum, 1);
        else if (m->l_ld)
            w->unread++;
    }
}

/* Walks the modules for `op`; the slots changed, or -errno: -EAGAIN while
 * the list is being changed, -EBUSY or -EOWNERDEAD where the load lock
 * could not be had (loader_lock.c). */
static long walk_modules(int op, struct walk *w)
{
    const struct r_debug_abi *r = (const struct r_debug_abi *)hp_sampler_config.r_debug;
    iterate_fn iterate = (iterate_fn)hp_sampler_config.dl_iterate_phdr;
    if (hp_sampler_config.magic != HP_SAMPLER_MAGIC || !r ||
        (!iterate && !hp_loader_lock_known()))
        return -22; /* EINVAL: not configured */
    w->op = op;
    if (!hp_loader_lock_known()) {
        if (__atomic_load_n(&r->r_state, __ATOMIC_ACQUIRE) != 0)
            return -11; /* EAGAIN */
        iterate(each_module, w);
        return w->changed;
    }
    int e = hp_loader_lock();
    if (e)
        return e;
    /* Under the lock the list changes only where this very thread was
     * stopped inside the loader (the lock is recursive): r_state says so. */
    long result = -11; /* EAGAIN */
    if (__atomic_load_n(&r->r_state, __ATOMIC_ACQUIRE) == 0) {
        walk_list(w, r);
        result = w->changed;
    }
    hp_loader_unlock();
    return result;
}

static void report(long result, const struct walk *w)
{
    hp_install_status.result = result;
    hp_install_status.modules = w->modules;
    hp_install_status.slots_taken = w->taken;
    hp_install_status.slots_skipped = w->skipped;
    hp_install_status.slots_failed = w->failed;
    hp_install_status.modules_unread = w->unread;
    for (u32 e = 0; e < HP_ENTRY_COUNT; e++)
        hp_install_status.taken_by_entry[e] = w->taken_by[e];
}

/* The daemon's remote call (report.S: hp_remote_call). A module list in
 * the middle of a change (the stopped thread was inside the loader) is
 * not walked: -EAGAIN, and the daemon tries again. A load lock that
 * cannot be had is an error the daemon falls back on, with its reason. */
HIDDEN void hp_remote_dispatch(long op)
{
    struct walk w = {0};
    long result;
    if (op != HP_REMOTE_INSTALL && op != HP_REMOTE_UNINSTALL)
        result = -22;
    else
        result = walk_modules((int)op, &w);
    /* The flag of the optimized report function is wiped in a forked
     * child (report.S); it is set again by the daemon after each install,
     * and cleared at an uninstall. MADV_WIPEONFORK (18) needs Linux 4.14;
     * where it fails the daemon never sets the flag. */
    if (op == HP_REMOTE_INSTALL)
        hp_install_status.wipeonfork = sys_madvise((u64)&hp_fork_page, sizeof(hp_fork_page), 18);
    else {
        __atomic_store_n(&hp_fork_page.opt_report, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&hp_fork_page.ring_on, 0, __ATOMIC_RELAXED);
    }
    report(result, &w);
}

/* After a dlopen or dlmopen returned `handle` (report.S): the slots of what
 * it loaded. */
HIDDEN void hp_after_dlopen(u64 handle)
{
    if (!handle || !__atomic_load_n(&hp_sampler_config.enabled, __ATOMIC_ACQUIRE))
        return;
    struct walk w = {0};
    if (walk_modules(HP_REMOTE_INSTALL, &w) >= 0)
        __atomic_fetch_add(&hp_install_status.dlopens, 1, __ATOMIC_RELAXED);
    else
        __atomic_fetch_add(&hp_install_status.dlopen_untaken, 1, __ATOMIC_RELAXED);
}

/*
 * A `ret` byte in the page of `ret_addr`, the return address of a dlopen
 * call: dlopen is called with it as its own return address, so that it
 * sees its caller's module (which decides the namespace and the RUNPATH
 * searched), and the `ret` there returns to the wrapper. 0 if the page has
 * none; the wrapper then only forwards, and counts it.
 */
HIDDEN u64 hp_ret_gadget(u64 ret_addr)
{
    const unsigned char *page = (const unsigned char *)(ret_addr & ~4095ULL);
    for (u64 i = ret_addr & 4095; i < 4096; i++)
        if (page[i] == 0xc3)
            return (u64)&page[i];
    for (u64 i = 0; i < (ret_addr & 4095); i++)
        if (page[i] == 0xc3)
            return (u64)&page[i];
    __atomic_fetch_add(&hp_install_status.dlopen_untaken, 1, __ATOMIC_RELAXED);
    return 0;
}
