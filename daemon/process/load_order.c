/*
 * load_order.c - a live process's ELF objects in symbol search order, read
 * from the dynamic linker's own list (r_debug.r_map) in the process's memory.
 *
 * The walk: executable's mapping in /proc/PID/maps -> its ELF and program
 * headers (read from memory, where the first PT_LOAD holds them) -> PT_DYNAMIC
 * at load bias + p_vaddr -> DT_DEBUG -> struct r_debug -> the link_map chain.
 * Each link_map is tied to its mapping through l_ld (the object's dynamic
 * section, inside one of its mappings), not through l_name: l_name is the
 * path the linker opened ("/lib/..."), which on a merged-/usr system differs
 * from the path the kernel prints ("/usr/lib/...").
 *
 * The target is assumed to have the daemon's ABI (x86-64, 64-bit glibc
 * layouts from <link.h>); other targets get the maps-order fallback.
 */
#include "load_order.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include "array_grow.h"
#include "proc_info.h"

/* Bound on the link_map walk, so a corrupt or cyclic chain ends; real
 * processes load at most a few hundred objects. */
#define LOAD_ORDER_MAX_OBJECTS 4096

/* Bound on the dynamic array we read: 4096 entries, far more than ld emits. */
#define DYNAMIC_MAX_BYTES (4096 * sizeof(Elf64_Dyn))

/* Bound on program headers we accept; ld emits about a dozen. */
#define PHDR_MAX 256

/* A process whose memory we read; /proc/PID/mem is opened only if needed. */
struct target {
    pid_t pid;
    int mem_fd; /* -1 until process_vm_readv has been refused */
};

/* Where an object's PT_LOADs start and where its dynamic section is (ELF vaddrs). */
struct elf_layout {
    uint64_t min_vaddr; /* lowest PT_LOAD p_vaddr, rounded down to a page */
    uint64_t dyn_vaddr; /* PT_DYNAMIC p_vaddr */
    uint64_t dyn_size;  /* PT_DYNAMIC p_memsz, 0 if there is none */
};

/* Reads `len` bytes at `addr` of the target; -ESRCH if it is gone, -EFAULT if not mapped. */
static int mem_read(struct target *t, uint64_t addr, void *buf, size_t len)
{
    if (t->mem_fd < 0) {
        struct iovec local = {buf, len}, remote = {(void *)(uintptr_t)addr, len};
        ssize_t r = process_vm_readv(t->pid, &local, 1, &remote, 1, 0);
        if (r == (ssize_t)len)
            return 0;
        if (r >= 0)
            return -EFAULT;
        if (errno != ENOSYS && errno != EPERM)
            return -errno;
        /* Kernels without the syscall, or seccomp filters that deny it: use procfs. */
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/mem", (int)t->pid);
        t->mem_fd = open(path, O_RDONLY | O_CLOEXEC);
        if (t->mem_fd < 0)
            return errno == ENOENT ? -ESRCH : -errno;
    }
    ssize_t r = pread(t->mem_fd, buf, len, (off_t)addr);
    if (r == (ssize_t)len)
        return 0;
    return r < 0 && errno != EIO ? -errno : -EFAULT;
}

/* Reads a NUL-terminated string at `addr`, a page at most at a time so that
 * the end of a mapping is not crossed before the NUL is seen. */
static int mem_read_str(struct target *t, uint64_t addr, char *buf, size_t cap)
{
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    size_t len = 0;

    while (len < cap) {
        size_t chunk = (size_t)(page - (addr + len) % page);
        if (chunk > cap - len)
            chunk = cap - len;
        int err = mem_read(t, addr + len, buf + len, chunk);
        if (err)
            return err;
        if (memchr(buf + len, '\0', chunk))
            return 0;
        len += chunk;
    }
    return -ENAMETOOLONG;
}

/* Whether an error ends the read: the process is gone, or we may not read it, or memory ran out.
 * Other errors (unmapped or garbled memory) only mean the linker's list is unusable. */
static bool is_fatal(int err)
{
    return err == -ESRCH || err == -EPERM || err == -EACCES || err == -ENOMEM;
}

/* Whether two mappings are of the same file. */
static bool same_file(const struct proc_mapping *a, const struct proc_mapping *b)
{
    return a->inode == b->inode && a->dev_major == b->dev_major && a->dev_minor == b->dev_minor &&
           strcmp(a->path, b->path) == 0;
}

/* The lowest mapping of the file behind `pm`. */
static const struct proc_mapping *first_of(const struct proc_maps *maps,
                                           const struct proc_mapping *pm)
{
    for (size_t i = 0; i < maps->n; i++)
        if (same_file(&maps->v[i], pm))
            return &maps->v[i];
    return pm;
}

/* The lowest mapping at file offset 0 of the file behind `pm`, or NULL. */
static const struct proc_mapping *base_of(const struct proc_maps *maps,
                                          const struct proc_mapping *pm)
{
    for (size_t i = 0; i < maps->n; i++)
        if (maps->v[i].offset == 0 && same_file(&maps->v[i], pm))
            return &maps->v[i];
    return NULL;
}

/* Finds the executable's lowest mapping: by inode and device, else by path. */
static int find_exe(pid_t pid, const struct proc_maps *maps, const struct proc_mapping **out)
{
    char path[PATH_MAX];
    dev_t dev;
    ino_t ino;
    int err = proc_exe_path(pid, path, sizeof(path));
    if (err == 0)
        err = proc_exe_identity(pid, &dev, &ino);
    if (err) {
        char dir[64];
        snprintf(dir, sizeof(dir), "/proc/%d", (int)pid);
        /* Kernel threads have a /proc entry but no executable. */
        return access(dir, F_OK) != 0 ? -ESRCH : err;
    }

    for (size_t i = 0; i < maps->n; i++) {
        const struct proc_mapping *pm = &maps->v[i];
        if (proc_mapping_is_file(pm) && pm->inode == ino &&
            makedev(pm->dev_major, pm->dev_minor) == dev) {
            *out = pm;
            return 0;
        }
    }
    /* Overlay filesystems may print another device in maps than stat() gives. */
    for (size_t i = 0; i < maps->n; i++) {
        if (strcmp(maps->v[i].path, path) == 0) {
            *out = &maps->v[i];
            return 0;
        }
    }
    return -ENOENT;
}

/* Reads the ELF and program headers at `base` (an offset-0 mapping) from memory. */
static int read_layout(struct target *t, uint64_t base, struct elf_layout *out)
{
    Elf64_Ehdr eh;
    Elf64_Phdr ph[PHDR_MAX];
    const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    int err;

    if ((err = mem_read(t, base, &eh, sizeof(eh))))
        return err;
    if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 || eh.e_phnum > PHDR_MAX)
        return -ENOEXEC;
    if ((err = mem_read(t, base + eh.e_phoff, ph, eh.e_phnum * sizeof(ph[0]))))
        return err;

    memset(out, 0, sizeof(*out));
    out->min_vaddr = UINT64_MAX;
    for (size_t i = 0; i < eh.e_phnum; i++) {
        if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr < out->min_vaddr)
            out->min_vaddr = ph[i].p_vaddr;
        if (ph[i].p_type == PT_DYNAMIC) {
            out->dyn_vaddr = ph[i].p_vaddr;
            out->dyn_size = ph[i].p_memsz;
        }
    }
    if (out->min_vaddr == UINT64_MAX)
        return -ENOEXEC;
    out->min_vaddr &= ~(page - 1);
    return 0;
}

/* Appends an object unless one with the same first mapping is already listed. */
static int push(struct load_order *lo, size_t *cap, const struct proc_mapping *first, uint64_t bias)
{
    for (size_t i = 0; i < lo->n; i++)
        if (lo->v[i].first_mapping == first)
            return 0;
    struct loaded_object *nv = array_grow(lo->v, cap, lo->n + 1, sizeof(*nv), 32);
    if (!nv)
        return -ENOMEM;
    lo->v = nv;
    char *path = strdup(first->path);
    if (!path)
        return -ENOMEM;
    lo->v[lo->n++] = (struct loaded_object){path, first, bias};
    return 0;
}

/* Finds r_debug through the DT_DEBUG entry of the dynamic array at `dyn_addr`; -ENOENT if unset. */
static int find_r_debug(struct target *t, uint64_t dyn_addr, uint64_t dyn_size, uint64_t *out)
{
    size_t len = dyn_size < DYNAMIC_MAX_BYTES ? (size_t)dyn_size : DYNAMIC_MAX_BYTES;
    Elf64_Dyn *dyn = malloc(len ? len : 1);
    int err;

    if (!dyn)
        return -ENOMEM;
    err = mem_read(t, dyn_addr, dyn, len);
    if (err)
        goto out;
    err = -ENOENT;
    for (size_t i = 0; i < len / sizeof(*dyn) && dyn[i].d_tag != DT_NULL; i++) {
        if (dyn[i].d_tag == DT_DEBUG && dyn[i].d_un.d_ptr != 0) {
            *out = dyn[i].d_un.d_ptr;
            err = 0;
            break;
        }
    }
out:
    free(dyn);
    return err;
}

/*
 * Appends the objects of the link_map chain to `lo` (which holds the
 * executable). -ENOENT if the linker has not published r_debug (static
 * executables never do), -EFAULT if the chain points at unmapped memory.
 */
static int walk_link_maps(struct target *t, const struct proc_maps *maps, uint64_t dyn_addr,
                          uint64_t dyn_size, struct load_order *lo, size_t *cap)
{
    struct r_debug rd;
    char name[PATH_MAX];
    uint64_t r_debug_addr;
    int err;

    if ((err = find_r_debug(t, dyn_addr, dyn_size, &r_debug_addr)))
        return err;
    if ((err = mem_read(t, r_debug_addr, &rd, sizeof(rd))))
        return err;
    if (rd.r_version == 0 || rd.r_map == NULL)
        return -ENOENT;
    lo->settled = rd.r_state == RT_CONSISTENT;
    lo->r_debug = r_debug_addr;

    /* r_state may say RT_ADD during a dlopen; the chain is still linked, new objects at its end. */
    uint64_t addr = (uint64_t)(uintptr_t)rd.r_map;
    for (size_t i = 0; addr != 0 && i < LOAD_ORDER_MAX_OBJECTS; i++) {
        struct link_map lm;
        if ((err = mem_read(t, addr, &lm, sizeof(lm))))
            return err;
        name[0] = '\0';
        if (lm.l_name &&
            (err = mem_read_str(t, (uint64_t)(uintptr_t)lm.l_name, name, sizeof(name))) &&
            err != -ENAMETOOLONG)
            return err;
        addr = (uint64_t)(uintptr_t)lm.l_next;

        /* The executable is listed first with an empty name; it is already in lo. */
        if (name[0] == '\0')
            continue;
        const struct proc_mapping *pm = proc_maps_find(maps, (uint64_t)(uintptr_t)lm.l_ld);
        if (!pm || !proc_mapping_is_file(pm)) {
            /* The vdso's l_ld is in [vdso]; other misses are found by name, if at all. */
            pm = NULL;
            for (size_t j = 0; j < maps->n && !pm; j++)
                if (proc_mapping_is_file(&maps->v[j]) && strcmp(maps->v[j].path, name) == 0)
                    pm = &maps->v[j];
            if (!pm)
                continue;
        }
        if ((err = push(lo, cap, first_of(maps, pm), lm.l_addr)))
            return err;
    }
    return 0;
}

/* Appends every ELF file mapping in maps order: the order when the linker cannot tell us. */
static int add_in_maps_order(struct target *t, const struct proc_maps *maps, struct load_order *lo,
                             size_t *cap)
{
    for (size_t i = 0; i < maps->n; i++) {
        const struct proc_mapping *pm = &maps->v[i];
        struct elf_layout el;
        if (!proc_mapping_is_file(pm) || first_of(maps, pm) != pm)
            continue;
        /* Only ELF objects count: skip data files such as locale-archive. */
        const struct proc_mapping *base = base_of(maps, pm);
        if (!base)
            continue;
        int err = read_layout(t, base->start, &el);
        if (is_fatal(err))
            return err;
        if (err)
            continue;
        if ((err = push(lo, cap, pm, base->start - el.min_vaddr)))
            return err;
    }
    return 0;
}

int load_order_read(pid_t pid, const struct proc_maps *maps, struct load_order *out)
{
    struct target t = {pid, -1};
    struct load_order lo = {0};
    const struct proc_mapping *exe = NULL, *base;
    struct elf_layout el = {0};
    size_t cap = 0;
    uint64_t bias = 0;
    int err, layout_err = -ENOENT;

    memset(out, 0, sizeof(*out));
    if (pid <= 0)
        return -EINVAL;
    if ((err = find_exe(pid, maps, &exe)))
        return err;
    exe = first_of(maps, exe);
    base = base_of(maps, exe);
    if (base) {
        layout_err = read_layout(&t, base->start, &el);
        if (is_fatal(layout_err)) {
            err = layout_err;
            goto out;
        }
        /* For a PIE this is where it was placed; for ET_EXEC it comes out 0. */
        if (!layout_err)
            bias = base->start - el.min_vaddr;
    }
    if ((err = push(&lo, &cap, exe, bias)))
        goto out;

    if (!layout_err && el.dyn_size) {
        err = walk_link_maps(&t, maps, bias + el.dyn_vaddr, el.dyn_size, &lo, &cap);
        if (err == 0) {
            lo.from_linker = 1;
            goto done;
        }
        if (is_fatal(err))
            goto out;
        /* Anything else means no usable r_debug: keep the executable, use maps order. */
        for (size_t i = 1; i < lo.n; i++)
            free(lo.v[i].path);
        lo.n = 1;
        lo.settled = 0;
    }
    if ((err = add_in_maps_order(&t, maps, &lo, &cap)))
        goto out;
done:
    /* Hand the list over; the cleanup below then frees nothing of it. */
    *out = lo;
    lo = (struct load_order){0};
    err = 0;
out:
    if (t.mem_fd >= 0)
        close(t.mem_fd);
    load_order_free(&lo);
    return err;
}

void load_order_free(struct load_order *lo)
{
    if (!lo)
        return;
    for (size_t i = 0; i < lo->n; i++)
        free(lo->v[i].path);
    free(lo->v);
    memset(lo, 0, sizeof(*lo));
}
