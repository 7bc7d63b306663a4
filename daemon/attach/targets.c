/*
 * targets.c - attaches the allocator probes to processes and detaches them
 * when the processes are gone (see targets.h).
 *
 * Each process gets one slot: the slot indexes the BPF `images` map, which
 * holds the code ranges of the probed functions so that the BPF side can
 * tell the allocator calling itself from a real call.
 */
#include "targets.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "allocator.h"
#include "proc_info.h"
#include "proc_maps.h"
#include "uprobe_link.h"

/* One profiled process. */
struct target {
    pid_t pid;
    uint64_t start_time;
    uint64_t attached_ns; /* CLOCK_MONOTONIC when this daemon attached or adopted it */
    char comm[17];
    char allocator[256];
    struct bpf_link *links[2 * HP_MAX_FUNCS]; /* classic layout: one per probe */
    size_t nlinks;
    int link_fds[2 * HP_MAX_FUNCS];           /* multi and session: per object */
    size_t nfds;
    int detaching; /* its slot stays taken until the probes are gone */
    size_t nfuncs;   /* functions probed */
    size_t emulated; /* of which on an instruction the kernel emulates */
    /* What tells an exec: the executable's file, and the file mapped where
     * malloc was (another program, or the same one placed elsewhere). */
    dev_t exe_dev;
    ino_t exe_ino;
    uint64_t malloc_addr;
    uint64_t malloc_inode;
    struct proc_maps last_maps; /* as of the last scan: what its exit snapshot names frames by */
    int exited;                 /* set when the reaper found it gone */
};

/* The identity of /proc/PID/exe; -errno if it cannot be read. */
static int exe_identity(pid_t pid, dev_t *dev, ino_t *ino)
{
    char path[64];
    struct stat st;
    snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
    if (stat(path, &st) != 0)
        return -errno;
    *dev = st.st_dev;
    *ino = st.st_ino;
    return 0;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void targets_init(struct targets *t, struct bpf_state *bpf, struct unwind_manager *unwind,
                  size_t max_targets)
{
    memset(t, 0, sizeof(*t));
    pthread_mutex_init(&t->lock, NULL);
    t->bpf = bpf;
    t->unwind = unwind;
    t->max_targets = max_targets ? max_targets : HP_MAX_TARGETS;
}

/* Whether the process in `tg` is no longer the program we attached to:
 * another executable, or malloc's code no longer where it was (exec).
 * Keeps the maps it reads as the target's last ones. */
static int has_exec_d(struct target *tg)
{
    dev_t dev = 0;
    ino_t ino = 0;
    if (exe_identity(tg->pid, &dev, &ino) == 0 && tg->exe_ino &&
        (dev != tg->exe_dev || ino != tg->exe_ino))
        return 1;
    struct proc_maps maps;
    if (proc_maps_read(tg->pid, &maps) != 0)
        return 0; /* gone: the reaper's start time check deals with it */
    if (maps.n == 0) {
        proc_maps_free(&maps);
        return 0; /* exiting: its memory is gone, the last maps stay */
    }
    const struct proc_mapping *m = proc_maps_find(&maps, tg->malloc_addr);
    int moved = !m || m->inode != tg->malloc_inode;
    proc_maps_free(&tg->last_maps);
    tg->last_maps = maps;
    return moved;
}

int targets_adopt(struct targets *t, char *err, size_t errlen)
{
    struct hp_persisted_target *old = calloc(HP_MAX_TARGETS, sizeof(*old));
    if (!old)
        return -ENOMEM;
    size_t n = bpf_state_persisted_targets(t->bpf, old, HP_MAX_TARGETS);
    for (uint32_t i = 0; i < HP_MAX_TARGETS; i++)
        bpf_state_persist_target(t->bpf, i, 0, 0, 0);
    int adopted = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t start_time;
        pid_t pid = (pid_t)old[i].pid;
        dev_t dev;
        ino_t ino = 0;
        /* Same start time but another executable: it exec'd while no daemon
         * ran, and its counts name the old program's code. */
        int exec_d = exe_identity(pid, &dev, &ino) == 0 && (uint32_t)ino != old[i].exe_ino;
        if (proc_start_time(pid, &start_time) != 0 || start_time != old[i].start_time ||
            exec_d || targets_ensure(t, pid, err, errlen) != 0) {
            bpf_state_forget_process(t->bpf, old[i].pid); /* gone, or not ours any more */
            continue;
        }
        adopted++;
    }
    free(old);
    return adopted;
}

/* Destroys the probes of a target and forgets its BPF state, but keeps `tg`
 * itself. Slow (each probe's removal waits for RCU), so callers do it
 * outside the lock. */
static uint64_t release_probes(struct targets *t, struct target *tg, int keep_state)
{
    struct bpf_state *bpf = t->bpf;
    uint64_t t0 = now_ns();
    for (size_t i = 0; i < tg->nlinks; i++)
        bpf_link__destroy(tg->links[i]);
    for (size_t i = 0; i < tg->nfds; i++)
        close(tg->link_fds[i]);
    uint64_t took = now_ns() - t0; /* the probes; forgetting the counts is not detaching */
    if (!keep_state)
        bpf_state_forget_process(bpf, (uint32_t)tg->pid);
    if (t->unwind)
        unwind_manager_forget(t->unwind, tg->pid);
    return took;
}

/* release_probes(), then frees `tg`: for targets no slot points to any more. */
/* Frees a target whose probes are gone. */
static void free_target(struct target *tg)
{
    proc_maps_free(&tg->last_maps);
    free(tg);
}

static uint64_t release(struct targets *t, struct target *tg, int keep_state)
{
    uint64_t took = release_probes(t, tg, keep_state);
    free_target(tg);
    return took;
}

/* Detaches the target in `slot` with the lock held (attach failures, pid reuse). */
static void detach(struct targets *t, size_t slot)
{
    t->last_detach_ns = release(t, t->slot[slot], 0);
    t->slot[slot] = NULL;
    t->detached_total++;
    bpf_state_persist_target(t->bpf, (uint32_t)slot, 0, 0, 0);
}

void targets_destroy(struct targets *t, int keep_state)
{
    pthread_mutex_lock(&t->lock);
    for (size_t i = 0; i < HP_MAX_TARGETS; i++) {
        if (!t->slot[i])
            continue;
        if (keep_state) {
            release(t, t->slot[i], 1);
            t->slot[i] = NULL;
        } else {
            detach(t, i);
        }
    }
    pthread_mutex_unlock(&t->lock);
    pthread_mutex_destroy(&t->lock);
}

/* Attaches one probe; returns the link or NULL with errno set. */
static struct bpf_link *attach_probe(struct bpf_program *prog, pid_t pid,
                                     const struct allocator_func *f, uint64_t cookie, int retprobe)
{
    LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = cookie, .retprobe = retprobe);
    struct bpf_link *link =
        bpf_program__attach_uprobe_opts(prog, pid, f->open_path, (size_t)f->file_offset, &opts);
    if (!link && errno == 0)
        errno = EINVAL;
    return link;
}

/* Classic layout: a perf-event uprobe per function, and a uretprobe per
 * allocating function. */
static int attach_classic(struct targets *t, struct target *tg, size_t slot,
                          const struct allocator_plan *plan, char *err, size_t errlen)
{
    for (size_t i = 0; i < plan->n; i++) {
        const struct allocator_func *f = &plan->funcs[i];
        uint64_t cookie = HP_COOKIE(slot, f->kind);
        struct bpf_link *l = attach_probe(bpf_state_entry_program(t->bpf), tg->pid, f, cookie, 0);
        if (l)
            tg->links[tg->nlinks++] = l;
        if (l && f->kind != HP_FREE) {
            l = attach_probe(bpf_state_return_program(t->bpf), tg->pid, f, cookie, 1);
            if (l)
                tg->links[tg->nlinks++] = l;
        }
        if (!l) {
            int e = errno;
            snprintf(err, errlen, "attach uprobe to %s:%s (offset 0x%llx) for pid %d: %s",
                     f->object_path, f->name, (unsigned long long)f->file_offset, (int)tg->pid,
                     strerror(e));
            return -e;
        }
    }
    return 0;
}

/* One link of `prog_fd` over the functions of object `obj` (all of them, or
 * only the allocating ones). */
static int attach_object_link(struct targets *t, struct target *tg, size_t slot,
                              const struct allocator_plan *plan, const char *obj, int prog_fd,
                              uint32_t attach_type, uint32_t flags, int alloc_only, char *err,
                              size_t errlen)
{
    uint64_t offsets[HP_MAX_FUNCS], cookies[HP_MAX_FUNCS];
    uint32_t cnt = 0;
    const char *path = NULL;
    (void)t;
    for (size_t i = 0; i < plan->n; i++) {
        const struct allocator_func *f = &plan->funcs[i];
        if (strcmp(f->object_path, obj) != 0 || (alloc_only && f->kind == HP_FREE))
            continue;
        path = path ? path : f->open_path;
        offsets[cnt] = f->file_offset;
        cookies[cnt] = HP_COOKIE(slot, f->kind);
        cnt++;
    }
    if (cnt == 0)
        return 0;
    int fd = uprobe_link_create(prog_fd, attach_type, path, offsets, cookies, cnt, flags, tg->pid);
    if (fd < 0) {
        snprintf(err, errlen, "attach %u uprobes to %s for pid %d: %s", cnt, obj, (int)tg->pid,
                 strerror(-fd));
        return fd;
    }
    tg->link_fds[tg->nfds++] = fd;
    return 0;
}

/* Session and multi layouts: links per object the allocator lives in. */
static int attach_links(struct targets *t, struct target *tg, size_t slot,
                        const struct allocator_plan *plan, char *err, size_t errlen)
{
    int e = 0;
    for (size_t i = 0; i < plan->n && e == 0; i++) {
        const char *obj = plan->funcs[i].object_path;
        int seen = 0;
        for (size_t j = 0; j < i; j++)
            seen |= strcmp(plan->funcs[j].object_path, obj) == 0;
        if (seen)
            continue;
        if (t->bpf->layout == LAYOUT_SESSION) {
            e = attach_object_link(t, tg, slot, plan, obj, bpf_state_session_fd(t->bpf),
                                   HP_BPF_TRACE_UPROBE_SESSION, 0, 0, err, errlen);
        } else {
            e = attach_object_link(t, tg, slot, plan, obj, bpf_state_entry_fd(t->bpf),
                                   HP_BPF_TRACE_UPROBE_MULTI, 0, 0, err, errlen);
            if (e == 0)
                e = attach_object_link(t, tg, slot, plan, obj, bpf_state_return_fd(t->bpf),
                                       HP_BPF_TRACE_UPROBE_MULTI, HP_BPF_F_UPROBE_MULTI_RETURN,
                                       1, err, errlen);
        }
    }
    return e;
}

/* Resolves the allocator and attaches every probe to process `pid` in `slot`. */
static int attach(struct targets *t, size_t slot, pid_t pid, uint64_t start_time, char *err,
                  size_t errlen)
{
    struct proc_maps maps;
    struct allocator_plan plan;
    int e = proc_maps_read(pid, &maps);
    if (e) {
        snprintf(err, errlen, "read /proc/%d/maps: %s", (int)pid, strerror(-e));
        return e;
    }
    e = allocator_resolve(pid, &maps, &plan, err, errlen);
    if (e) {
        proc_maps_free(&maps);
        return e;
    }

    struct target *tg = calloc(1, sizeof(*tg));
    if (!tg) {
        proc_maps_free(&maps);
        allocator_plan_free(&plan);
        return -ENOMEM;
    }
    /* Its last maps until the next scan: a process that exits within a
     * second still gets its last profile. */
    tg->last_maps = maps;
    tg->pid = pid;
    tg->start_time = start_time;
    tg->attached_ns = now_ns();
    tg->nfuncs = plan.n;
    if (exe_identity(pid, &tg->exe_dev, &tg->exe_ino) != 0)
        tg->exe_ino = 0;
    if (proc_comm(pid, tg->comm, sizeof(tg->comm)) != 0)
        tg->comm[0] = '\0';

    struct hp_image img = {.nfuncs = (uint32_t)plan.n, .lo = UINT64_MAX, .hi = 0};
    for (size_t i = 0; i < plan.n; i++) {
        img.start[i] = plan.funcs[i].runtime_start;
        img.end[i] = plan.funcs[i].runtime_end;
        img.lo = img.start[i] < img.lo ? img.start[i] : img.lo;
        img.hi = img.end[i] > img.hi ? img.end[i] : img.hi;
        tg->emulated += plan.funcs[i].emulated;
        if (plan.funcs[i].kind == HP_MALLOC) {
            snprintf(tg->allocator, sizeof(tg->allocator), "%s", plan.funcs[i].object_path);
            tg->malloc_addr = plan.funcs[i].runtime_start;
            tg->malloc_inode = plan.funcs[i].inode;
        }
    }
    /* Tables and ranges must be in place before the first probe fires; a
     * process whose tables cannot be made is unwound by frame pointers. */
    if (t->unwind)
        unwind_manager_update(t->unwind, pid);
    e = bpf_state_set_image(t->bpf, (uint32_t)slot, &img);
    if (e)
        snprintf(err, errlen, "set the code ranges of pid %d: %s", (int)pid, strerror(-e));
    else if (t->bpf->layout == LAYOUT_CLASSIC)
        e = attach_classic(t, tg, slot, &plan, err, errlen);
    else
        e = attach_links(t, tg, slot, &plan, err, errlen);
    allocator_plan_free(&plan);
    if (e) {
        release(t, tg, 0);
        return e;
    }
    t->slot[slot] = tg;
    t->attached_total++;
    bpf_state_persist_target(t->bpf, (uint32_t)slot, (uint32_t)pid, start_time,
                             (uint32_t)tg->exe_ino);
    return 0;
}

int targets_ensure(struct targets *t, pid_t pid, char *err, size_t errlen)
{
    uint64_t start_time;
    int e = proc_start_time(pid, &start_time);
    if (e) {
        snprintf(err, errlen, "process %d does not exist", (int)pid);
        return -ESRCH;
    }
    pthread_mutex_lock(&t->lock);
    ssize_t free_slot = -1;
    for (size_t i = 0; i < HP_MAX_TARGETS; i++) {
        struct target *tg = t->slot[i];
        if (!tg) {
            if (free_slot < 0)
                free_slot = (ssize_t)i;
            continue;
        }
        if (tg->pid != pid)
            continue;
        if (tg->detaching) {
            pthread_mutex_unlock(&t->lock);
            snprintf(err, errlen, "process %d is being detached; try again", (int)pid);
            return -EAGAIN;
        }
        if (tg->start_time == start_time) {
            pthread_mutex_unlock(&t->lock);
            return 0;
        }
        detach(t, i); /* the pid was reused by a new process */
        if (free_slot < 0 || (size_t)free_slot > i)
            free_slot = (ssize_t)i;
    }
    size_t active = 0;
    for (size_t i = 0; i < HP_MAX_TARGETS; i++)
        active += t->slot[i] != NULL;
    if (free_slot < 0 || active >= t->max_targets) {
        snprintf(err, errlen, "already profiling %zu processes, the most allowed (--max-targets)",
                 active);
        e = -ENOSPC;
    } else {
        uint64_t t0 = now_ns();
        e = attach(t, (size_t)free_slot, pid, start_time, err, errlen);
        if (e)
            t->attach_errors++;
        else
            t->last_attach_ns = now_ns() - t0;
    }
    pthread_mutex_unlock(&t->lock);
    if (e == -ENOENT && proc_start_time(pid, &start_time) != 0) {
        snprintf(err, errlen, "process %d does not exist", (int)pid);
        e = -ESRCH; /* it exited while we attached */
    }
    return e;
}

void targets_reap(struct targets *t)
{
    size_t gone[HP_MAX_TARGETS], n = 0;
    pthread_mutex_lock(&t->lock);
    pid_t exec_d[HP_MAX_TARGETS];
    size_t nexec = 0;
    for (size_t i = 0; i < HP_MAX_TARGETS; i++) {
        struct target *tg = t->slot[i];
        uint64_t start_time;
        if (!tg || tg->detaching)
            continue;
        int exited = proc_start_time(tg->pid, &start_time) != 0 || start_time != tg->start_time;
        int exec = !exited && has_exec_d(tg);
        if (exec)
            exec_d[nexec++] = tg->pid;
        tg->exited = exited;
        if (exited || exec) {
            tg->detaching = 1;
            gone[n++] = i;
        }
    }
    pthread_mutex_unlock(&t->lock);

    /* Requests go on meanwhile; the slots stay taken so no new target
     * reuses them (or the pid's BPF state) before the old one is gone. The
     * targets are freed only once their slots are cleared: until then
     * requests read them under the lock to see that they are detaching
     * (ASan found targets_list() reading a freed one). */
    uint64_t took = 0;
    struct target *dead[HP_MAX_TARGETS];
    for (size_t k = 0; k < n; k++) {
        dead[k] = t->slot[gone[k]];
        /* Its counts are still in the maps: keep its last profile first. */
        if (dead[k]->exited && t->on_exit && dead[k]->last_maps.n)
            t->on_exit(t->on_exit_arg, dead[k]->pid, dead[k]->comm, &dead[k]->last_maps);
        took = release_probes(t, dead[k], 0);
    }

    pthread_mutex_lock(&t->lock);
    for (size_t k = 0; k < n; k++) {
        free_target(dead[k]);
        t->slot[gone[k]] = NULL;
        t->detached_total++;
        t->last_detach_ns = took;
        bpf_state_persist_target(t->bpf, (uint32_t)gone[k], 0, 0, 0);
    }
    pid_t live[HP_MAX_TARGETS];
    size_t nlive = 0;
    for (size_t i = 0; i < HP_MAX_TARGETS; i++)
        if (t->slot[i] && !t->slot[i]->detaching)
            live[nlive++] = t->slot[i]->pid;
    pthread_mutex_unlock(&t->lock);

    /* Libraries loaded with dlopen, or a new program after exec, get their
     * tables here; unchanged processes cost one read of their maps. */
    for (size_t k = 0; t->unwind && k < nlive; k++)
        unwind_manager_update(t->unwind, live[k]);

    /* A process that exec'd is a new program: attach to it afresh. */
    for (size_t k = 0; k < nexec; k++) {
        char err[512];
        if (targets_ensure(t, exec_d[k], err, sizeof(err)) != 0)
            fprintf(stderr, "heapprofd: pid %d after exec: %s\n", (int)exec_d[k], err);
        else
            t->reattached_total++;
    }
}

size_t targets_list(struct targets *t, struct target_info *out, size_t cap)
{
    size_t n = 0;
    pthread_mutex_lock(&t->lock);
    for (size_t i = 0; i < HP_MAX_TARGETS; i++) {
        struct target *tg = t->slot[i];
        if (!tg || tg->detaching)
            continue;
        if (n < cap) {
            out[n].pid = tg->pid;
            memcpy(out[n].comm, tg->comm, sizeof(out[n].comm));
            memcpy(out[n].allocator, tg->allocator, sizeof(out[n].allocator));
            out[n].nfuncs = tg->nfuncs;
            out[n].emulated = tg->emulated;
            out[n].attached_ns = tg->attached_ns;
        }
        n++;
    }
    pthread_mutex_unlock(&t->lock);
    return n;
}
