/*
 * inject.c - puts the in-process sampler into a process and takes it out
 * again (see inject.h).
 *
 * Order of an attach, on a thread of our own (a ptrace relation ends with
 * its tracer thread, so whatever an error path forgets is let go when the
 * thread returns):
 *   1. stop one thread fit to run our calls (thread_stop.h), and check that
 *      the process is still the one approved;
 *   2. write the system call stub, map the sampler (or adopt one of this
 *      build already mapped) and write its configuration;
 *   3. let the caller attach its probes;
 *   4. call the installer in the stopped thread: it takes the slots;
 *   5. queue again the signals that arrived, restore the thread, erase the
 *      stub.
 */
#include "inject.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "load_lock.h"
#include "proc_info.h"
#include "proc_maps.h"
#include "remote_stub.h"
#include "sampler_image.h"
#include "sampler_map.h"
#include "sampling_tables.h"
#include "thread_stop.h"

#define PAGE 4096ULL

/* Whether `m` is segment `seg` of a sampler mapped at `base`, as mapped. */
static int is_segment(const struct proc_mapping *m, const struct sampler_segment *seg, uint64_t base)
{
    uint64_t start = base + (seg->vaddr & ~(PAGE - 1));
    uint64_t end = base + ((seg->vaddr + seg->memsz + PAGE - 1) & ~(PAGE - 1));
    return m->start == start && m->end == end && m->offset == (seg->offset & ~(PAGE - 1)) &&
           m->executable == !!(seg->prot & PROT_EXEC) && !m->writable;
}

/* Whether a mapping's path is a sampler's: a memfd of ours, or the
 * shared file (this one, or a deleted one of an earlier daemon of this
 * build: the same path). */
static int is_sampler_path(const char *path, const struct sampler_file *shared)
{
    return strcmp(path, "/memfd:" HP_SAMPLER_MEMFD_NAME) == 0 ||
           (shared && shared->fd >= 0 && strcmp(path, shared->path) == 0);
}

/*
 * A sampler already in the process, from its file's name: its base, if
 * every file-backed segment is mapped where and as it should be. One left
 * half-mapped by an injection that was interrupted (heapprofd killed) is
 * not used. Whose build it is, is checked by the caller.
 */
static int find_mapped(const struct sampler_image *img, const struct proc_maps *maps,
                       const struct sampler_file *shared, uint64_t *base)
{
    *base = 0;
    for (size_t i = 0; i < maps->n; i++) {
        const struct proc_mapping *m = &maps->v[i];
        if (!is_sampler_path(m->path, shared) || m->offset != 0)
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

int inject_find_sampler(pid_t pid, const struct sampler_file *shared, uint64_t *base)
{
    char err[128];
    struct proc_maps maps;
    const struct sampler_image *img = sampler_image_get(err, sizeof(err));
    if (!img || proc_maps_read(pid, &maps) != 0)
        return 0;
    int found = find_mapped(img, &maps, shared, base) == 0;
    proc_maps_free(&maps);
    return found;
}

static int write_mem(int mem_fd, uint64_t addr, const void *buf, size_t len)
{
    return pwrite(mem_fd, buf, len, (off_t)addr) == (ssize_t)len ? 0 : -EIO;
}

/* The executable segment's range, where the report functions are. */
static void text_range(const struct sampler_image *img, uint64_t base, uint64_t *lo, uint64_t *hi)
{
    for (size_t i = 0; i < img->nseg; i++)
        if (img->seg[i].prot & PROT_EXEC) {
            *lo = base + (img->seg[i].vaddr & ~(PAGE - 1));
            *hi = base + ((img->seg[i].vaddr + img->seg[i].memsz + PAGE - 1) & ~(PAGE - 1));
        }
}

/*
 * A sampler at `base` (an earlier daemon's, or a fork child's copy of its
 * parent's), adopted only if it is this build's: its mapped build ID and
 * the whole file it is mapped from are ours, byte for byte. The memfd is opened read-only through map_files and
 * then checked to be what is mapped, so a mapping swapped meanwhile is
 * refused too. Returns our descriptor of it, or -errno.
 */
static int adopt(pid_t pid, int mem_fd, const struct sampler_image *img, uint64_t base,
                 char *err, size_t errlen)
{
    uint8_t id[sizeof(img->build_id)];
    uint64_t lo = 0, hi = 0;
    char path[96];
    text_range(img, base, &lo, &hi);
    int fd = -1;
    if (pread(mem_fd, id, img->build_id_len, (off_t)(base + img->build_id_vaddr)) ==
            (ssize_t)img->build_id_len &&
        memcmp(id, img->build_id, img->build_id_len) == 0 &&
        proc_map_file_path(pid, lo, hi, path, sizeof(path)) == 0)
        fd = open(path, O_RDONLY | O_CLOEXEC);
    int same = fd >= 0 && sampler_map_is_ours(pid, img, base, fd);
    uint8_t *copy = same ? malloc(img->elf_len + 1) : NULL;
    same = copy && pread(fd, copy, img->elf_len + 1, 0) == (ssize_t)img->elf_len &&
           memcmp(copy, img->elf, img->elf_len) == 0;
    free(copy);
    if (!same) {
        if (fd >= 0)
            close(fd);
        snprintf(err, errlen, "process %d has a sampler of another heapprofd build", (int)pid);
        return -EEXIST;
    }
    return fd;
}

/* The configuration the wrappers and the installer read. The filter of an
 * adopted sampler is kept: its pointers may still be live samples of
 * pinned maps (a restart), and a stale one only costs a report that finds
 * nothing. */
static int configure(int mem_fd, const struct sampler_image *img, uint64_t base, uint64_t interval,
                     const struct inject_plan *plan, const struct load_lock_place *ll)
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
    c.nranges = (uint32_t)plan->nranges;
    for (size_t i = 0; i < plan->nranges && i < HP_MAX_FUNCS; i++) {
        c.range_lo[i] = plan->range_lo[i];
        c.range_hi[i] = plan->range_hi[i];
        c.alloc_lo = c.range_lo[i] < c.alloc_lo ? c.range_lo[i] : c.alloc_lo;
        c.alloc_hi = c.range_hi[i] > c.alloc_hi ? c.range_hi[i] : c.alloc_hi;
    }
    memcpy(c.orig, plan->orig, sizeof(c.orig));
    c.dl_iterate_phdr = plan->dl_iterate_phdr;
    c.r_debug = plan->r_debug;
    c.load_lock = ll->lock;
    c.exe_phdr = ll->exe_phdr;
    c.exe_phnum = ll->exe_phnum;
    c.free_ring = plan->free_ring;
    sampling_fill_log2_table(c.log2_table);
    uint64_t at = sampler_image_symbol(img, HP_SAMPLER_CONFIG_SYM);
    return at ? write_mem(mem_fd, base + at, &c, sizeof(c)) : -ENOENT;
}

/* Turns the wrappers into plain forwarders: no stop needed. */
static void disable(int mem_fd, const struct sampler_image *img, uint64_t base)
{
    uint32_t off = 0;
    uint64_t at = sampler_image_symbol(img, HP_SAMPLER_CONFIG_SYM) +
                  __builtin_offsetof(struct hp_sampler_config, enabled);
    write_mem(mem_fd, base + at, &off, sizeof(off));
}

/* Everything one attach or detach works with. */
struct job {
    /* in */
    pid_t pid;
    const struct inject_plan *plan; /* NULL: a detach */
    uint64_t interval;
    inject_check_fn check;
    inject_ready_fn ready;
    void *arg;
    struct load_lock_place ll; /* the loader's lock the installer walks under */
    /* state */
    struct inject_state *s;
    const struct sampler_image *img;
    int mem_fd;
    uint64_t stub;
    struct stopped_thread st;
    bool adopted, stopped, stub_written, abandoned;
    /* out */
    int e;
    char *err;
    size_t errlen;
};

/* A base for a new sampler in `maps`, near the allocator; fills s->base,
 * or says why there is none. */
static int choose_base(struct job *j, const struct proc_maps *maps)
{
    uint64_t near = j->plan->nranges ? j->plan->range_lo[0] : 0;
    j->s->base = sampler_map_choose_base(maps, j->img->span, near);
    if (j->s->base)
        return 0;
    snprintf(j->err, j->errlen, "process %d: no free address range for the sampler", (int)j->pid);
    return -ENOSPC;
}

/*
 * What can be done before the thread is stopped, to keep the stop short:
 * the place of the stub, and for an attach, the sampler already mapped
 * (adopted: checked and opened) or the base for a new one. The maps may
 * change meanwhile: the stub's place is checked to be zeros again when it
 * is written, and a new sampler is mapped with MAP_FIXED_NOREPLACE.
 */
static int prepare(struct job *j)
{
    struct inject_state *s = j->s;
    struct proc_maps maps;
    int e = proc_maps_read(j->pid, &maps);
    if (e) {
        snprintf(j->err, j->errlen, "read /proc/%d/maps: %s", (int)j->pid, strerror(-e));
        return e == -ENOENT ? -ESRCH : e;
    }
    j->stub = remote_stub_find_place(j->pid, j->mem_fd, &maps);
    if (!j->stub) {
        snprintf(j->err, j->errlen, "process %d: no unused code bytes to run system calls "
                 "through", (int)j->pid);
        e = -ENOSPC;
    } else if (j->plan && find_mapped(j->img, &maps, j->plan->shared, &s->base) == 0) {
        int fd = adopt(j->pid, j->mem_fd, j->img, s->base, j->err, j->errlen);
        e = fd < 0 ? fd : 0;
        j->adopted = fd >= 0;
        s->shared = fd >= 0 && sampler_file_is(j->plan->shared, fd);
        if (s->shared)
            close(fd); /* the probes made at start cover it */
        else
            s->memfd = fd;
    } else if (j->plan) {
        e = choose_base(j, &maps);
    }
    proc_maps_free(&maps);
    return e;
}

/* Writes the stub for the stopped thread, where prepare() found room. */
static int write_stub(struct job *j)
{
    uint8_t code[REMOTE_STUB_SIZE], now[REMOTE_STUB_SIZE], zero[REMOTE_STUB_SIZE] = {0};
    if (pread(j->mem_fd, now, sizeof(now), (off_t)j->stub) != (ssize_t)sizeof(now) ||
        memcmp(now, zero, sizeof(now)) != 0) {
        snprintf(j->err, j->errlen, "process %d: the bytes for the system call stub changed",
                 (int)j->pid);
        return -EAGAIN;
    }
    remote_stub_build(j->stub, &j->st.regs, j->st.sigmask, code);
    if (write_mem(j->mem_fd, j->stub, code, sizeof(code)) != 0) {
        snprintf(j->err, j->errlen, "write the system call stub into process %d", (int)j->pid);
        return -EIO;
    }
    j->stub_written = true;
    return 0;
}

static int report_offsets(struct job *j);

/* Maps the new sampler (unless one was adopted); fills the paths. */
static int place_sampler(struct job *j)
{
    struct inject_state *s = j->s;
    int e = j->adopted ? 0
                       : sampler_map_into(&j->st, j->stub, j->img, s->base, j->plan->shared,
                                          &s->memfd, j->err, j->errlen);
    /* The base was chosen before the stop, and the process's other threads
     * map memory meanwhile: a place taken since is chosen again. */
    for (int tries = 0; e == -EEXIST && tries < 3; tries++) {
        struct proc_maps maps;
        if (proc_maps_read(j->pid, &maps) != 0)
            break;
        e = choose_base(j, &maps);
        proc_maps_free(&maps);
        if (e == 0)
            e = sampler_map_into(&j->st, j->stub, j->img, s->base, j->plan->shared, &s->memfd,
                                 j->err, j->errlen);
    }
    if (e)
        return e;
    s->shared = s->memfd < 0;
    return report_offsets(j);
}

/* Where the report functions are in the file, for the probes. */
static int report_offsets(struct job *j)
{
    struct inject_state *s = j->s;
    if (!s->shared)
        snprintf(s->text_path, sizeof(s->text_path), "/proc/self/fd/%d", s->memfd);
    if (sampler_image_report_offsets(j->img, &s->report_alloc, &s->report_free,
                                     &s->report_alloc_opt) != 0) {
        snprintf(j->err, j->errlen, "the sampler has no report functions");
        return -ENOENT;
    }
    return 0;
}

/* What an installer's error means, for the fallback's reason. */
static const char *installer_why(int64_t result)
{
    switch (result) {
    case -EAGAIN: return " (the dynamic linker was loading a module)";
    case -EBUSY: return " (the dynamic linker's load lock stayed held: a dlopen running "
                        "long constructors?)";
    case -EOWNERDEAD: return " (the dynamic linker's load lock is held by a thread that is "
                             "not in this process: copied held by a fork)";
    default: return "";
    }
}

/* Runs the installer's operation `op` in the stopped thread and reads its
 * report. */
static int remote_install(struct job *j, long op)
{
    struct inject_state *s = j->s;
    uint64_t func = sampler_image_symbol(j->img, HP_REMOTE_CALL_SYM);
    uint64_t status = sampler_image_symbol(j->img, HP_INSTALL_STATUS_SYM);
    if (!func || !status)
        return -ENOENT;
    thread_crash_point(); /* configured, no slot taken yet */
    int e = thread_remote_call(&j->st, j->stub, s->base + func, (uint64_t)op,
                               s->base + status + offsetof(struct hp_install_status, done));
    if (e == -ETIMEDOUT) {
        /* It may finish later, with the stub still there to return
         * through; until then and after, the wrappers only forward. */
        disable(j->mem_fd, j->img, s->base);
        thread_abandon(&j->st);
        j->abandoned = true;
        snprintf(j->err, j->errlen, "process %d: the sampler's installer did not finish in %d ms "
                 "(the dynamic linker busy?)", (int)j->pid, THREAD_CALL_TIMEOUT_MS);
        return e;
    }
    if (e) {
        snprintf(j->err, j->errlen, "process %d: run the sampler's installer: %s", (int)j->pid,
                 strerror(-e));
        return e;
    }
    if (pread(j->mem_fd, &s->status, sizeof(s->status), (off_t)(s->base + status)) !=
        (ssize_t)sizeof(s->status))
        return -EIO;
    if (s->status.result < 0) {
        snprintf(j->err, j->errlen, "process %d: the sampler's installer: %s%s", (int)j->pid,
                 strerror((int)-s->status.result), installer_why(s->status.result));
        return (int)s->status.result;
    }
    return 0;
}

/* An attach, once the thread is stopped. */
static int attach_stopped(struct job *j)
{
    int e = j->check ? j->check(j->arg, j->pid, j->err, j->errlen) : 0;
    if (e == 0)
        e = write_stub(j);
    if (e == 0)
        e = place_sampler(j);
    if (e == 0 && (e = configure(j->mem_fd, j->img, j->s->base, j->interval, j->plan, &j->ll)) != 0)
        snprintf(j->err, j->errlen, "configure the sampler in process %d: %s", (int)j->pid,
                 strerror(-e));
    if (e == 0 && j->ready)
        e = j->ready(j->arg, j->s, j->err, j->errlen);
    if (e == 0)
        e = remote_install(j, HP_REMOTE_INSTALL);
    if (e == 0 && j->s->status.slots_taken == 0) {
        snprintf(j->err, j->errlen, "process %d: no relocation slot binds to its allocator "
                 "(%u modules, %u slots bound elsewhere)", (int)j->pid, j->s->status.modules,
                 j->s->status.slots_skipped);
        e = -ENOENT;
    }
    if (e && e != -ETIMEDOUT && j->s->base && (j->s->memfd >= 0 || j->s->shared)) {
        /* Whatever the installer took goes back; the wrappers forward. An
         * installer that could not have the loader's lock took nothing. */
        if (e != -ENOENT && e != -EBUSY && e != -EOWNERDEAD && !j->abandoned && remote_install(j, HP_REMOTE_UNINSTALL) != 0)
            fprintf(stderr, "heapprofd: pid %d: the slots taken could not be given back; the "
                    "sampler only forwards\n", (int)j->pid);
        disable(j->mem_fd, j->img, j->s->base);
    }
    return e;
}

/*
 * Whether an adopted sampler is a fork child's whole copy of its parent's
 * live one: configured by a daemon of this build for this interval,
 * enabled, its slots taken by an install that finished. Its wrappers are
 * running already; only the probes' side is missing.
 */
static bool inherited_live(struct job *j)
{
    struct hp_sampler_config c;
    struct hp_install_status st;
    uint64_t at_c = sampler_image_symbol(j->img, HP_SAMPLER_CONFIG_SYM);
    uint64_t at_s = sampler_image_symbol(j->img, HP_INSTALL_STATUS_SYM);
    if (!at_c || !at_s ||
        pread(j->mem_fd, &c, sizeof(c), (off_t)(j->s->base + at_c)) != (ssize_t)sizeof(c) ||
        pread(j->mem_fd, &st, sizeof(st), (off_t)(j->s->base + at_s)) != (ssize_t)sizeof(st))
        return false;
    if (c.magic != HP_SAMPLER_MAGIC || c.version != HP_SAMPLER_VERSION || c.enabled != 1 ||
        c.sample_interval != j->interval || c.self_lo != j->s->base || st.result < 0 ||
        st.slots_taken == 0 || st.done == 0)
        return false;
    j->s->status = st;
    return true;
}

/* A fork child with its parent's live sampler: taken over as it runs,
 * without a stop. A copy that is not whole (forked during its parent's
 * install) gets the install of any other attach. */
static int take_over(struct job *j)
{
    int e = j->check ? j->check(j->arg, j->pid, j->err, j->errlen) : 0;
    if (e == 0)
        e = report_offsets(j);
    if (e == 0 && j->ready)
        e = j->ready(j->arg, j->s, j->err, j->errlen);
    return e;
}

/* A detach, once the thread is stopped. */
static int detach_stopped(struct job *j)
{
    int e = write_stub(j);
    if (e == 0)
        e = remote_install(j, HP_REMOTE_UNINSTALL);
    disable(j->mem_fd, j->img, j->s->base);
    return e;
}

/* The body of an attach or detach, on its own thread. */
static void *run_job(void *arg)
{
    struct job *j = arg;
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/mem", (int)j->pid);
    j->mem_fd = open(path, O_RDWR | O_CLOEXEC);
    if (j->mem_fd < 0) {
        j->e = errno == ENOENT ? -ESRCH : -errno;
        snprintf(j->err, j->errlen, "open %s: %s", path, strerror(errno));
        return NULL;
    }
    j->e = prepare(j);
    if (j->e == 0 && j->plan && j->plan->fork_child && j->adopted && inherited_live(j)) {
        j->e = take_over(j);
        close(j->mem_fd);
        return NULL;
    }
    if (j->e == 0)
        j->e = thread_stop_one(j->pid, j->mem_fd, &j->st, j->err, j->errlen);
    if (j->e == 0) {
        j->stopped = true;
        j->e = j->plan ? attach_stopped(j) : detach_stopped(j);
    }
    j->s->stopped = j->stopped;
    if (j->stopped && !j->abandoned)
        j->s->stopped_ns = thread_release(&j->st, j->stub_written ? j->stub : 0);
    /* A thread that went back through the stub on its own (its daemon did
     * not stop it in time) may still return into it from a signal handler:
     * then the stub stays, in bytes no code reaches. */
    if (j->stub_written && !j->abandoned && !j->st.returned) {
        uint8_t zero[REMOTE_STUB_SIZE] = {0};
        uint64_t start_time;
        /* A process exiting meanwhile has no memory left to write: not news. */
        if (write_mem(j->mem_fd, j->stub, zero, sizeof(zero)) != 0 &&
            proc_start_time(j->pid, &start_time) == 0 && start_time == j->s->start_time &&
            !proc_is_exiting(j->pid))
            fprintf(stderr, "heapprofd: process %d: could not erase the system call stub at "
                    "0x%llx\n", (int)j->pid, (unsigned long long)j->stub);
    }
    /* Whatever stayed seized is let go as this thread ends. */
    close(j->mem_fd);
    return NULL;
}

static int run_on_own_thread(struct job *j)
{
    pthread_t t;
    int e = pthread_create(&t, NULL, run_job, j);
    if (e) {
        snprintf(j->err, j->errlen, "start a thread: %s", strerror(e));
        return -e;
    }
    pthread_join(t, NULL);
    return j->e;
}

/* Whether the process runs with a shadow stack: the installer's return
 * through the stub, and the dlopen wrapper's through the caller's page,
 * are returns no call made. */
static int has_shadow_stack(pid_t pid)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    int shstk = 0;
    while (f && fgets(line, sizeof(line), f))
        if (strncmp(line, "x86_Thread_features:", 20) == 0 && strstr(line, "shstk"))
            shstk = 1;
    if (f)
        fclose(f);
    return shstk;
}

int inject_attach(pid_t pid, uint64_t start_time, const struct inject_plan *plan,
                  uint64_t interval, inject_check_fn check, inject_ready_fn ready, void *arg,
                  struct inject_state *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    out->pid = pid;
    out->start_time = start_time;
    out->memfd = -1;
    out->file = plan->shared;
    struct job j = {.pid = pid, .plan = plan, .interval = interval, .check = check,
                    .ready = ready, .arg = arg, .s = out, .err = err, .errlen = errlen};
    j.img = sampler_image_get(err, errlen);
    if (!j.img)
        return -ENOEXEC;
    if (!plan->dl_iterate_phdr || !plan->r_debug || !plan->orig[HP_E_malloc] ||
        !plan->orig[HP_E_free]) {
        snprintf(err, errlen, "process %d: no dynamic linker list and walk to find its "
                 "relocation slots (a static executable?)", (int)pid);
        return -ENOENT;
    }
    if (has_shadow_stack(pid)) {
        snprintf(err, errlen, "process %d runs with a shadow stack", (int)pid);
        return -EPERM;
    }
    int e = load_lock_find(pid, &j.ll, err, errlen);
    if (e == 0)
        e = run_on_own_thread(&j);
    if (e)
        inject_state_close(out);
    return e;
}

int inject_detach(struct inject_state *s, char *err, size_t errlen)
{
    uint64_t start_time, base = 0;
    /* A reused pid, or an exec (the old addresses may hold the new
     * program's code or data): nothing of ours is left to restore. */
    if (proc_start_time(s->pid, &start_time) != 0 || start_time != s->start_time ||
        !inject_find_sampler(s->pid, s->file, &base) || base != s->base)
        return 0;
    struct job j = {.pid = s->pid, .s = s, .err = err, .errlen = errlen};
    j.img = sampler_image_get(err, errlen);
    if (!j.img)
        return -ENOEXEC;
    int e = run_on_own_thread(&j);
    if (e == -EAGAIN || e == -EBUSY) {
        /* No thread to run the installer on: the slots stay on the
         * wrappers, which from now on only forward. */
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/mem", (int)s->pid);
        int mem_fd = open(path, O_RDWR | O_CLOEXEC);
        if (mem_fd >= 0) {
            disable(mem_fd, j.img, s->base);
            close(mem_fd);
        }
    }
    return e == -ESRCH ? 0 : e;
}

void inject_state_close(struct inject_state *s)
{
    if (s->memfd >= 0)
        close(s->memfd);
    s->memfd = -1;
}
