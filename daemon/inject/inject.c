/*
 * inject.c - puts the in-process sampler into a process and takes its
 * patches out again (see inject.h).
 *
 * Order of an attach, every thread stopped throughout:
 *   1. plan every relocation (before stopping anything: a refusal costs
 *      the process nothing);
 *   2. check each entry's bytes in memory against its file (a debugger's
 *      breakpoint, another tool's patch: refuse), or find our own jump
 *      there (a previous daemon's patch: adopt it);
 *   3. map the sampler (or reuse the one mapped), write its configuration
 *      and trampolines;
 *   4. make sure no thread is inside bytes about to change (step it out);
 *   5. let the caller attach its probes, then write the jumps.
 */
#include "inject.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "hp_sampler.h"
#include "proc_info.h"
#include "proc_maps.h"
#include "remote_stub.h"
#include "sampler_image.h"
#include "sampler_map.h"
#include "sampling_tables.h"
#include "thread_stop.h"

#define PAGE 4096ULL
/* Stops in which a thread was found inside bytes about to be written
 * before we give up (each lets it run on for 0.2 ms). */
#define MAX_TRIES_CLEAR 50

/* What one function needs: its relocation and its sampler symbols. */
struct planned {
    struct relocation rel;
    uint64_t wrap, tramp; /* relative to the sampler's base */
};

/* Refuses processes we must not stop: already traced, or under seccomp
 * (a filter could kill the process for our system calls). */
static int preflight(pid_t pid, char *err, size_t errlen)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f) {
        snprintf(err, errlen, "process %d does not exist", (int)pid);
        return -ESRCH;
    }
    int e = 0;
    while (e == 0 && fgets(line, sizeof(line), f)) {
        int v;
        if (sscanf(line, "TracerPid: %d", &v) == 1 && v != 0) {
            snprintf(err, errlen, "process %d is traced by process %d", (int)pid, v);
            e = -EBUSY;
        } else if (sscanf(line, "Seccomp: %d", &v) == 1 && v != 0) {
            snprintf(err, errlen, "process %d runs under seccomp (mode %d)", (int)pid, v);
            e = -EPERM;
        }
    }
    fclose(f);
    return e;
}

static int plan_all(const struct sampler_image *img, const struct inject_func *f, size_t n,
                    struct planned *pl, char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof(name), HP_WRAP_PREFIX "%s", f[i].name);
        pl[i].wrap = sampler_image_symbol(img, name);
        snprintf(name, sizeof(name), HP_TRAMP_PREFIX "%s", f[i].name);
        pl[i].tramp = sampler_image_symbol(img, name);
        if (!pl[i].wrap || !pl[i].tramp) {
            snprintf(err, errlen, "the sampler has no wrapper for %s", f[i].name);
            return -ENOENT;
        }
        const char *why;
        size_t at;
        if (relocate_plan(f[i].code, f[i].len, f[i].addr, &pl[i].rel, &why, &at) != 0) {
            snprintf(err, errlen, "cannot relocate the entry of %s at 0x%llx: %s (at +%zu)",
                     f[i].name, (unsigned long long)f[i].addr, why, at);
            return -EINVAL;
        }
    }
    return 0;
}

/* Whether `m` is segment `seg` of a sampler mapped at `base`, as mapped. */
static int is_segment(const struct proc_mapping *m, const struct sampler_segment *seg, uint64_t base)
{
    uint64_t start = base + (seg->vaddr & ~(PAGE - 1));
    uint64_t end = base + ((seg->vaddr + seg->memsz + PAGE - 1) & ~(PAGE - 1));
    return m->start == start && m->end == end && m->offset == (seg->offset & ~(PAGE - 1)) &&
           m->executable == !!(seg->prot & PROT_EXEC) && !m->writable;
}

/*
 * A sampler already in the process, from its memfd's name: its base, if
 * every file-backed segment is mapped where and as it should be. One left
 * half-mapped by an injection that was interrupted (heapprofd killed) is
 * not used: patching entries into it could jump into memory that is not
 * code. It stays, unused; a new one is mapped elsewhere.
 */
static int find_mapped(const struct sampler_image *img, const struct proc_maps *maps,
                       uint64_t *base)
{
    *base = 0;
    for (size_t i = 0; i < maps->n; i++) {
        const struct proc_mapping *m = &maps->v[i];
        if (strcmp(m->path, "/memfd:" HP_SAMPLER_MEMFD_NAME) != 0 || m->offset != 0)
            continue;
        size_t whole = 0, k = i;
        for (size_t s = 0; s < img->nseg; s++) {
            if (img->seg[s].prot & PROT_WRITE) {
                whole++; /* anonymous: not told apart in the maps */
                continue;
            }
            while (k < maps->n && maps->v[k].start < m->start + (img->seg[s].vaddr & ~(PAGE - 1)))
                k++;
            whole += k < maps->n && strcmp(maps->v[k].path, m->path) == 0 &&
                     is_segment(&maps->v[k], &img->seg[s], m->start);
        }
        if (whole == img->nseg) {
            *base = m->start;
            return 0;
        }
    }
    return -ENOENT;
}

int inject_find_sampler(pid_t pid, uint64_t *base)
{
    char err[128];
    struct proc_maps maps;
    const struct sampler_image *img = sampler_image_get(err, sizeof(err));
    if (!img || proc_maps_read(pid, &maps) != 0)
        return 0;
    int found = find_mapped(img, &maps, base) == 0;
    proc_maps_free(&maps);
    return found;
}

static int open_mem(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    return fd < 0 ? -errno : fd;
}

static int write_mem(int memfd, uint64_t addr, const void *buf, size_t len)
{
    return pwrite(memfd, buf, len, (off_t)addr) == (ssize_t)len ? 0 : -EIO;
}

/* The configuration the wrappers read. The filter of a reused sampler is
 * kept: its pointers may still be live samples of pinned maps (a restart),
 * and a stale one only costs a report that finds nothing. */
static int configure(int memfd, const struct sampler_image *img, uint64_t base, uint64_t interval,
                     const struct inject_func *f, size_t n)
{
    struct hp_sampler_config c;
    memset(&c, 0, sizeof(c));
    c.magic = HP_SAMPLER_MAGIC;
    c.version = HP_SAMPLER_VERSION;
    c.enabled = 1;
    c.sample_interval = interval;
    c.self_lo = base;
    c.self_hi = base + img->span;
    c.alloc_lo = UINT64_MAX;
    c.nranges = (uint32_t)n;
    for (size_t i = 0; i < n; i++) {
        c.range_lo[i] = f[i].addr;
        c.range_hi[i] = f[i].addr + f[i].len;
        c.alloc_lo = c.range_lo[i] < c.alloc_lo ? c.range_lo[i] : c.alloc_lo;
        c.alloc_hi = c.range_hi[i] > c.alloc_hi ? c.range_hi[i] : c.alloc_hi;
    }
    sampling_fill_log2_table(c.log2_table);
    uint64_t at = sampler_image_symbol(img, HP_SAMPLER_CONFIG_SYM);
    if (!at)
        return -ENOENT;
    return write_mem(memfd, base + at, &c, sizeof(c));
}

/* Whether `pc` is inside bytes we are about to write: past the entry of a
 * patched function (the entry itself is fine: it will run the jump). */
static int pc_in_the_way(uint64_t pc, const struct planned *pl, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (pc > pl[i].rel.func && pc < pl[i].rel.func + pl[i].rel.displaced)
            return 1;
    return 0;
}

/* Whether every stopped thread is clear of the bytes about to change:
 * 0, -EAGAIN (one is inside: let it run on and try again), or -errno. */
static int threads_clear(struct stopped_process *sp, const struct planned *pl, size_t n,
                         char *err, size_t errlen)
{
    for (size_t t = 0; t < sp->n; t++) {
        struct user_regs_struct r;
        int e = thread_get_regs(sp->v[t].tid, &r);
        if (e) {
            snprintf(err, errlen, "read the registers of thread %d: %s", (int)sp->v[t].tid,
                     strerror(-e));
            return e;
        }
        if (pc_in_the_way(r.rip, pl, n)) {
            snprintf(err, errlen, "thread %d stays inside code to be patched (pc 0x%llx)",
                     (int)sp->v[t].tid, (unsigned long long)r.rip);
            return -EAGAIN;
        }
    }
    return 0;
}

/* Checks each entry: its file's bytes (to patch), or our jump (to adopt). */
static int check_entries(int memfd, const struct planned *pl, size_t n, struct inject_state *s,
                         char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t now[RELOCATE_MAX_DISPLACED];
        const struct relocation *r = &pl[i].rel;
        if (pread(memfd, now, r->displaced, (off_t)r->func) != r->displaced) {
            snprintf(err, errlen, "read the entry at 0x%llx: %s", (unsigned long long)r->func,
                     strerror(errno));
            return -EIO;
        }
        struct inject_patch *p = &s->p[i];
        p->addr = r->func;
        memcpy(p->orig, r->code, r->displaced);
        if (relocate_jump(r->func, s->base + pl[i].wrap, p->jump) != 0) {
            snprintf(err, errlen, "the sampler is out of jump range of 0x%llx",
                     (unsigned long long)r->func);
            return -ERANGE;
        }
        bool as_in_file = memcmp(now, r->code, r->displaced) == 0;
        bool our_jump = memcmp(now, p->jump, RELOCATE_PATCH_LEN) == 0 &&
                        memcmp(now + RELOCATE_PATCH_LEN, r->code + RELOCATE_PATCH_LEN,
                               r->displaced - RELOCATE_PATCH_LEN) == 0;
        if (!as_in_file && !our_jump) {
            snprintf(err, errlen, "the code at 0x%llx differs from its file (a breakpoint or "
                     "another tool's patch?)", (unsigned long long)r->func);
            return -EINVAL;
        }
    }
    s->n = n;
    return 0;
}

static int write_trampolines(int memfd, const struct planned *pl, size_t n, uint64_t base)
{
    for (size_t i = 0; i < n; i++) {
        uint8_t code[HP_TRAMP_SIZE];
        memset(code, 0xcc, sizeof(code));
        int len = relocate_emit(&pl[i].rel, base + pl[i].tramp, code, sizeof(code));
        if (len < 0)
            return len;
        int e = write_mem(memfd, base + pl[i].tramp, code, sizeof(code));
        if (e)
            return e;
    }
    return 0;
}

/* Maps a new sampler into the process: the first stop, for the system
 * calls only. Its place is chosen from the maps read while stopped: the
 * process's threads (a malloc arena growing, a thread starting) could
 * otherwise map something there first (seen under load). */
static int map_new(pid_t pid, int memfd, const struct sampler_image *img,
                   const struct proc_maps *maps, const struct inject_func *f, size_t n,
                   struct inject_state *s, char *err, size_t errlen)
{
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t i = 0; i < n; i++) {
        lo = f[i].addr < lo ? f[i].addr : lo;
        hi = f[i].addr + f[i].len > hi ? f[i].addr + f[i].len : hi;
    }
    uint64_t stub = remote_stub_find_place(pid, memfd, maps);
    if (!stub) {
        snprintf(err, errlen, "process %d: no unused code bytes to run system calls through",
                 (int)pid);
        return -ENOSPC;
    }
    struct stopped_process sp;
    int e = thread_stop_all(pid, &sp, err, errlen);
    if (e)
        return e;
    struct proc_maps now;
    e = proc_maps_read(pid, &now);
    if (e)
        snprintf(err, errlen, "read /proc/%d/maps: %s", (int)pid, strerror(-e));
    if (e == 0) {
        s->base = sampler_map_choose_base(&now, img->span, lo, hi);
        proc_maps_free(&now);
        if (!s->base) {
            snprintf(err, errlen, "process %d: no free address range within a jump of its "
                     "allocator", (int)pid);
            e = -ENOSPC;
        }
    }
    if (e == 0)
        e = sampler_map_into(&sp, memfd, stub, img, s->base, err, errlen);
    s->stopped_ns += thread_resume_all(&sp);
    return e;
}

/* Finds the sampler in the process, or maps one; fills s->base, the path
 * uprobes open and the report functions' offsets. */
static int locate_sampler(pid_t pid, int memfd, const struct sampler_image *img,
                          const struct inject_func *f, size_t n, struct inject_state *s,
                          char *err, size_t errlen)
{
    struct proc_maps maps;
    int e = proc_maps_read(pid, &maps);
    if (e) {
        snprintf(err, errlen, "read /proc/%d/maps: %s", (int)pid, strerror(-e));
        return e;
    }
    if (find_mapped(img, &maps, &s->base) == 0) {
        struct hp_sampler_config c;
        uint64_t at = s->base + sampler_image_symbol(img, HP_SAMPLER_CONFIG_SYM);
        if (pread(memfd, &c, 16, (off_t)at) != 16 ||
            (c.magic && (c.magic != HP_SAMPLER_MAGIC || c.version != HP_SAMPLER_VERSION))) {
            snprintf(err, errlen, "process %d has a sampler of another heapprofd version",
                     (int)pid);
            e = -EEXIST;
        }
    } else {
        e = map_new(pid, memfd, img, &maps, f, n, s, err, errlen);
    }
    proc_maps_free(&maps);
    if (e)
        return e;
    /* The executable segment: where uprobes go, named as the kernel can open it. */
    for (size_t i = 0; i < img->nseg; i++) {
        if (!(img->seg[i].prot & PROT_EXEC))
            continue;
        uint64_t start = s->base + (img->seg[i].vaddr & ~(PAGE - 1));
        uint64_t end = s->base + ((img->seg[i].vaddr + img->seg[i].memsz + PAGE - 1) & ~(PAGE - 1));
        e = proc_map_file_path(pid, start, end, s->text_path, sizeof(s->text_path));
        if (e) {
            snprintf(err, errlen, "the sampler's code in process %d: %s", (int)pid, strerror(-e));
            return e;
        }
    }
    if (sampler_image_file_offset(img, sampler_image_symbol(img, HP_REPORT_ALLOC_SYM),
                                  &s->report_alloc) != 0 ||
        sampler_image_file_offset(img, sampler_image_symbol(img, HP_REPORT_FREE_SYM),
                                  &s->report_free) != 0) {
        snprintf(err, errlen, "the sampler has no report functions");
        return -ENOENT;
    }
    return 0;
}

/* The second stop: no thread inside bytes about to change, the entries
 * still as checked, then the jumps. */
static int patch_entries(pid_t pid, int memfd, const struct inject_func *f,
                         const struct planned *pl, size_t n, struct inject_state *s, char *err,
                         size_t errlen)
{
    struct stopped_process sp;
    int e = -EAGAIN;
    /* A thread inside a prologue is let run on a little, not stepped out
     * (see thread_stop.c: a step's stop is not safe if we die). */
    for (int tries = 0; e == -EAGAIN && tries < MAX_TRIES_CLEAR; tries++) {
        if (tries) {
            struct timespec pause = {0, 200000};
            nanosleep(&pause, NULL);
        }
        e = thread_stop_all(pid, &sp, err, errlen);
        if (e)
            return e;
        e = threads_clear(&sp, pl, n, err, errlen);
        if (e)
            s->stopped_ns += thread_resume_all(&sp);
    }
    if (e)
        return e;
    e = check_entries(memfd, pl, n, s, err, errlen);
    for (size_t i = 0; e == 0 && i < n; i++) {
        thread_crash_point(); /* some entries patched, some not */
        e = write_mem(memfd, s->p[i].addr, s->p[i].jump, RELOCATE_PATCH_LEN);
        if (e) {
            snprintf(err, errlen, "patch the entry of %s at 0x%llx: %s", f[i].name,
                     (unsigned long long)s->p[i].addr, strerror(-e));
            for (size_t k = 0; k < i; k++)
                write_mem(memfd, s->p[k].addr, s->p[k].orig, RELOCATE_PATCH_LEN);
        }
    }
    s->stopped_ns += thread_resume_all(&sp);
    return e;
}

/*
 * The sampler is found or mapped (first stop), then configured, given its
 * trampolines and its probes while the process runs: no entry jumps into
 * it yet, and a reused one gets the bytes it already holds. Then the
 * entries are patched (second stop).
 */
int inject_attach(pid_t pid, const struct inject_func *f, size_t n, uint64_t interval,
                  inject_ready_fn ready, void *arg, struct inject_state *out, char *err,
                  size_t errlen)
{
    memset(out, 0, sizeof(*out));
    out->pid = pid;
    const struct sampler_image *img = sampler_image_get(err, errlen);
    if (!img)
        return -ENOEXEC;
    if (n > HP_MAX_FUNCS)
        return -E2BIG;
    struct planned pl[HP_MAX_FUNCS];
    int e = plan_all(img, f, n, pl, err, errlen);
    if (e == 0)
        e = preflight(pid, err, errlen);
    if (e)
        return e;
    int memfd = open_mem(pid);
    if (memfd < 0) {
        snprintf(err, errlen, "open /proc/%d/mem: %s", (int)pid, strerror(-memfd));
        return memfd == -ENOENT ? -ESRCH : memfd;
    }
    e = locate_sampler(pid, memfd, img, f, n, out, err, errlen);
    if (e == 0)
        e = check_entries(memfd, pl, n, out, err, errlen);
    if (e == 0 && (e = configure(memfd, img, out->base, interval, f, n)) != 0)
        snprintf(err, errlen, "configure the sampler in process %d: %s", (int)pid, strerror(-e));
    thread_crash_point(); /* configured, no trampoline written yet */
    if (e == 0 && (e = write_trampolines(memfd, pl, n, out->base)) != 0)
        snprintf(err, errlen, "write the trampolines in process %d: %s", (int)pid, strerror(-e));
    if (e == 0 && ready)
        e = ready(arg, out, err, errlen);
    if (e == 0)
        e = patch_entries(pid, memfd, f, pl, n, out, err, errlen);
    close(memfd);
    return e;
}

int inject_detach(struct inject_state *s, char *err, size_t errlen)
{
    int memfd = open_mem(s->pid);
    if (memfd < 0)
        return 0; /* gone: nothing left to restore */
    /* After an exec the old addresses may hold the new program's code or
     * data: nothing is written unless our sampler is still where it was. */
    uint64_t base = 0;
    if (!inject_find_sampler(s->pid, &base) || base != s->base) {
        close(memfd);
        return 0;
    }
    struct stopped_process sp;
    int e = thread_stop_all(s->pid, &sp, err, errlen);
    if (e) {
        close(memfd);
        return e == -ESRCH ? 0 : e;
    }
    /* Again now that no thread runs: none can exec any more. */
    if (!inject_find_sampler(s->pid, &base) || base != s->base) {
        s->stopped_ns = thread_resume_all(&sp);
        close(memfd);
        return 0;
    }
    for (size_t i = 0; i < s->n && e == 0; i++) {
        thread_crash_point(); /* some entries restored, some not */
        uint8_t now[RELOCATE_PATCH_LEN];
        if (pread(memfd, now, sizeof(now), (off_t)s->p[i].addr) != (ssize_t)sizeof(now))
            continue; /* unmapped (exec): nothing of ours is left there */
        if (memcmp(now, s->p[i].jump, sizeof(now)) != 0)
            continue;
        e = write_mem(memfd, s->p[i].addr, s->p[i].orig, RELOCATE_PATCH_LEN);
        if (e)
            snprintf(err, errlen, "restore the entry at 0x%llx in process %d: %s",
                     (unsigned long long)s->p[i].addr, (int)s->pid, strerror(-e));
    }
    /* Threads still inside a wrapper only forward from now on. */
    const struct sampler_image *img = sampler_image_get(err, errlen);
    if (e == 0 && img) {
        uint32_t off = 0;
        uint64_t at = s->base + sampler_image_symbol(img, HP_SAMPLER_CONFIG_SYM) +
                      __builtin_offsetof(struct hp_sampler_config, enabled);
        write_mem(memfd, at, &off, sizeof(off));
    }
    s->stopped_ns = thread_resume_all(&sp);
    close(memfd);
    return e;
}
