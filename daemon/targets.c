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

#include <bpf/libbpf.h>

#include "allocator.h"
#include "proc_info.h"
#include "proc_maps.h"

/* One profiled process. */
struct target {
    pid_t pid;
    uint64_t start_time;
    char comm[17];
    char allocator[256];
    struct bpf_link *links[2 * HP_MAX_FUNCS];
    size_t nlinks;
    int detaching; /* its slot stays taken until the probes are gone */
};

void targets_init(struct targets *t, struct bpf_state *bpf)
{
    memset(t, 0, sizeof(*t));
    pthread_mutex_init(&t->lock, NULL);
    t->bpf = bpf;
}

/* Destroys the probes of a target and forgets its BPF state. Slow (each
 * probe's removal waits for RCU), so callers do it outside the lock. */
static void release(struct bpf_state *bpf, struct target *tg)
{
    for (size_t i = 0; i < tg->nlinks; i++)
        bpf_link__destroy(tg->links[i]);
    bpf_state_forget_process(bpf, (uint32_t)tg->pid);
    free(tg);
}

/* Detaches the target in `slot` with the lock held (attach failures, pid reuse). */
static void detach(struct targets *t, size_t slot)
{
    release(t->bpf, t->slot[slot]);
    t->slot[slot] = NULL;
    t->detached_total++;
}

void targets_destroy(struct targets *t)
{
    pthread_mutex_lock(&t->lock);
    for (size_t i = 0; i < HP_MAX_TARGETS; i++)
        if (t->slot[i])
            detach(t, i);
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
    proc_maps_free(&maps);
    if (e)
        return e;

    struct target *tg = calloc(1, sizeof(*tg));
    if (!tg) {
        allocator_plan_free(&plan);
        return -ENOMEM;
    }
    tg->pid = pid;
    tg->start_time = start_time;
    if (proc_comm(pid, tg->comm, sizeof(tg->comm)) != 0)
        tg->comm[0] = '\0';

    struct hp_image img = {.nfuncs = (uint32_t)plan.n};
    for (size_t i = 0; i < plan.n; i++) {
        img.start[i] = plan.funcs[i].runtime_start;
        img.end[i] = plan.funcs[i].runtime_end;
        if (plan.funcs[i].kind == HP_MALLOC)
            snprintf(tg->allocator, sizeof(tg->allocator), "%s", plan.funcs[i].object_path);
    }
    /* The ranges must be in place before the first probe fires. */
    e = bpf_state_set_image(t->bpf, (uint32_t)slot, &img);
    for (size_t i = 0; i < plan.n && e == 0; i++) {
        const struct allocator_func *f = &plan.funcs[i];
        uint64_t cookie = HP_COOKIE(slot, f->kind);
        struct bpf_link *l = attach_probe(bpf_state_entry_program(t->bpf, f->kind), pid, f,
                                          cookie, 0);
        if (l)
            tg->links[tg->nlinks++] = l;
        if (l && f->kind != HP_FREE) {
            l = attach_probe(bpf_state_return_program(t->bpf), pid, f, cookie, 1);
            if (l)
                tg->links[tg->nlinks++] = l;
        }
        if (!l) {
            e = -errno;
            snprintf(err, errlen, "attach uprobe to %s:%s (offset 0x%llx) for pid %d: %s",
                     f->object_path, f->name, (unsigned long long)f->file_offset, (int)pid,
                     strerror(errno));
        }
    }
    allocator_plan_free(&plan);
    if (e) {
        release(t->bpf, tg);
        return e;
    }
    t->slot[slot] = tg;
    t->attached_total++;
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
    if (free_slot < 0) {
        snprintf(err, errlen, "already profiling %d processes, the most we can", HP_MAX_TARGETS);
        e = -ENOSPC;
    } else {
        e = attach(t, (size_t)free_slot, pid, start_time, err, errlen);
        if (e)
            t->attach_errors++;
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
    for (size_t i = 0; i < HP_MAX_TARGETS; i++) {
        struct target *tg = t->slot[i];
        uint64_t start_time;
        if (tg && !tg->detaching &&
            (proc_start_time(tg->pid, &start_time) != 0 || start_time != tg->start_time)) {
            tg->detaching = 1;
            gone[n++] = i;
        }
    }
    pthread_mutex_unlock(&t->lock);

    /* Requests go on meanwhile; the slots stay taken so no new target
     * reuses them (or the pid's BPF state) before the old one is gone. */
    for (size_t k = 0; k < n; k++)
        release(t->bpf, t->slot[gone[k]]);

    pthread_mutex_lock(&t->lock);
    for (size_t k = 0; k < n; k++) {
        t->slot[gone[k]] = NULL;
        t->detached_total++;
    }
    pthread_mutex_unlock(&t->lock);
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
            out[n].nprobes = tg->nlinks;
        }
        n++;
    }
    pthread_mutex_unlock(&t->lock);
    return n;
}
