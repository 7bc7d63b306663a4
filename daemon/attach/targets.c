/*
 * targets.c - the table of profiled processes: attaches the allocator
 * probes to processes and detaches them when the processes are gone (see
 * targets.h). The links themselves are made in probe_links.c.
 *
 * Each process gets one slot: the slot indexes the BPF `images` map, which
 * holds the code ranges of the probed functions so that the BPF side can
 * tell the allocator calling itself from a real call. A slot is reserved
 * (`attaching`) while its attach runs outside the lock, and kept
 * (`detaching`) while its probes are removed outside the lock, so neither
 * the slot nor the pid's BPF state is reused before the old one is gone.
 */
#include "targets.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "allocator.h"
#include "clock.h"
#include "probe_links.h"
#include "proc_info.h"
#include "proc_maps.h"
#include "process_match.h"

/* One profiled process. */
struct target {
    pid_t pid;
    uint64_t start_time;
    uint64_t attached_ns; /* CLOCK_MONOTONIC when this daemon attached or adopted it */
    struct process_facts facts; /* its comm, exe and cgroup, as of the last scan */
    char allocator[256];
    struct probe_links probes;
    enum sampler_kind wanted;        /* the sampler asked for (kept across an exec) */
    struct inprocess_target *inproc; /* the in-process sampler's state, or NULL */
    int fell_back;                   /* inprocess was asked for, uprobes are used */
    char sampler_note[256];          /* why the in-process sampler was not used, or "" */
    int attaching; /* its attach runs outside the lock: not profiled yet */
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
    int owned;                  /* attached for a caller with a per-owner cap */
    uid_t owner;                /* that caller's uid */
};

void targets_init(struct targets *t, struct bpf_state *bpf, struct unwind_manager *unwind,
                  size_t max_targets)
{
    memset(t, 0, sizeof(*t));
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->attached, NULL);
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
    if (proc_exe_identity(tg->pid, &dev, &ino) == 0 && tg->exe_ino &&
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

/* Reads the facts of tg's process afresh (its comm and cgroup may change),
 * keeping the old ones if it is gone or its pid names another process: its
 * exit keeps its last profile under what it last was. */
static void refresh_facts(struct target *tg)
{
    struct process_facts now;
    if (process_facts_read(tg->pid, &now) != 0)
        return;
    if (now.start_time != tg->start_time) {
        process_facts_free(&now);
        return;
    }
    process_facts_free(&tg->facts);
    tg->facts = now;
}

/* Forgets the BPF state of process `pid`, saying so if some could not be found. */
static void forget_process(struct targets *t, pid_t pid)
{
    int e = bpf_state_forget_process(t->bpf, (uint32_t)pid);
    if (e)
        fprintf(stderr, "heapprofd: pid %d: deleting its BPF entries: %s (some stay in the maps)\n",
                (int)pid, strerror(-e));
}

/* Appends "pid N: why" to the list in `err`. */
static void note_failure(char *err, size_t errlen, pid_t pid, const char *why)
{
    size_t used = strlen(err);
    if (used + 1 < errlen)
        snprintf(err + used, errlen - used, "%spid %d: %s", used ? "; " : "", (int)pid, why);
}

int targets_adopt(struct targets *t, char *err, size_t errlen)
{
    struct hp_persisted_target *old = calloc(HP_MAX_TARGETS, sizeof(*old));
    err[0] = '\0';
    if (!old) {
        snprintf(err, errlen, "read the pinned targets: %s", strerror(ENOMEM));
        return 0;
    }
    size_t n = bpf_state_persisted_targets(t->bpf, old, HP_MAX_TARGETS);
    for (uint32_t i = 0; i < HP_MAX_TARGETS; i++)
        bpf_state_persist_target(t->bpf, i, 0, 0, 0);
    int adopted = 0;
    for (size_t i = 0; i < n; i++) {
        pid_t pid = (pid_t)old[i].pid;
        char why[512];
        /* Same start time but another executable: it exec'd while no daemon
         * ran, and its counts name the old program's code. */
        if (!proc_is_same_process(pid, old[i].start_time, old[i].exe_ino)) {
            forget_process(t, pid); /* gone, or not ours any more */
            continue;
        }
        if (targets_ensure(t, pid, why, sizeof(why)) != 0) {
            note_failure(err, errlen, pid, why);
            forget_process(t, pid);
            continue;
        }
        adopted++;
    }
    free(old);
    return adopted;
}

/* Destroys the probes of a target and forgets its BPF state, but keeps `tg`
 * itself. Slow (each probe's removal waits for RCU), so callers do it
 * outside the lock where they can. Returns how long the probes took. */
static uint64_t release_probes(struct targets *t, struct target *tg, int keep_state)
{
    uint64_t t0 = monotonic_ns();
    if (tg->inproc) {
        /* Callers may or may not hold the lock: a plain atomic store. */
        __atomic_store_n(&t->last_restore_stop_ns, inprocess_detach(tg->inproc),
                         __ATOMIC_RELAXED);
        free(tg->inproc);
        tg->inproc = NULL;
    }
    probe_links_release(&tg->probes);
    uint64_t took = monotonic_ns() - t0; /* the probes; forgetting the counts is not detaching */
    if (!keep_state)
        forget_process(t, tg->pid);
    if (t->unwind)
        unwind_manager_forget(t->unwind, tg->pid);
    return took;
}

/* Frees a target whose probes are gone. */
static void free_target(struct target *tg)
{
    proc_maps_free(&tg->last_maps);
    process_facts_free(&tg->facts);
    free(tg);
}

/* release_probes(), then frees `tg`: for targets no slot points to any more. */
static uint64_t release(struct targets *t, struct target *tg, int keep_state)
{
    uint64_t took = release_probes(t, tg, keep_state);
    free_target(tg);
    return took;
}

/* Detaches the target in `slot` with the lock held (pid reuse). */
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
    pthread_cond_destroy(&t->attached);
    pthread_mutex_destroy(&t->lock);
}

/* Takes what the target keeps from the plan: the code ranges of the probed
 * functions (for the BPF image), and where malloc is (to tell an exec). */
static void take_plan(struct target *tg, const struct allocator_plan *plan, struct hp_image *img)
{
    *img = (struct hp_image){.nfuncs = (uint32_t)plan->n, .lo = UINT64_MAX, .hi = 0};
    tg->nfuncs = plan->n;
    for (size_t i = 0; i < plan->n; i++) {
        img->start[i] = plan->funcs[i].runtime_start;
        img->end[i] = plan->funcs[i].runtime_end;
        img->lo = img->start[i] < img->lo ? img->start[i] : img->lo;
        img->hi = img->end[i] > img->hi ? img->end[i] : img->hi;
        tg->emulated += plan->funcs[i].emulated;
        if (plan->funcs[i].kind == HP_MALLOC) {
            snprintf(tg->allocator, sizeof(tg->allocator), "%s", plan->funcs[i].object_path);
            tg->malloc_addr = plan->funcs[i].runtime_start;
            tg->malloc_inode = plan->funcs[i].inode;
        }
    }
}

/* Gives process `pid` its unwind tables, saying why when it cannot (its
 * stacks are then walked by frame pointers where there are no tables). */
static void update_unwind_tables(struct targets *t, pid_t pid)
{
    char why[256];
    int e = t->unwind ? unwind_manager_update(t->unwind, pid, why, sizeof(why)) : 0;
    if (e && e != -ESRCH)
        fprintf(stderr, "heapprofd: pid %d: unwind tables: %s\n", (int)pid, why);
}

/* Puts the in-process sampler into `tg`; on failure says why (the log, the
 * index and /metrics) and returns non-zero: the caller attaches uprobes.
 * Called without the lock, like attach(). */
static int try_inprocess(struct targets *t, struct target *tg, const struct allocator_plan *plan)
{
    tg->inproc = calloc(1, sizeof(*tg->inproc));
    int e = tg->inproc ? inprocess_attach(t->bpf, tg->pid, plan, tg->inproc, tg->sampler_note,
                                          sizeof(tg->sampler_note))
                       : -ENOMEM;
    if (e == 0)
        return 0;
    if (e == -ENOMEM && !tg->sampler_note[0])
        snprintf(tg->sampler_note, sizeof(tg->sampler_note), "out of memory");
    uint64_t start_time;
    /* A process that exited meanwhile is no fallback: the uprobes fail too. */
    if (proc_start_time(tg->pid, &start_time) == 0 && start_time == tg->start_time)
        fprintf(stderr, "heapprofd: pid %d: in-process sampler not used, uprobes instead: %s\n",
                (int)tg->pid, tg->sampler_note);
    free(tg->inproc);
    tg->inproc = NULL;
    tg->fell_back = 1;
    return e;
}

/* Resolves the allocator and attaches every probe to process tg->pid in
 * `slot`. Called without the lock: the slot is reserved for it. */
static int attach(struct targets *t, size_t slot, struct target *tg, char *err, size_t errlen)
{
    struct allocator_plan plan;
    struct hp_image img;
    pid_t pid = tg->pid;
    int e = proc_maps_read(pid, &tg->last_maps);
    if (e) {
        snprintf(err, errlen, "read /proc/%d/maps: %s", (int)pid, strerror(-e));
        return e;
    }
    /* Its last maps until the next scan: a process that exits within a
     * second still gets its last profile. */
    e = allocator_resolve(pid, &tg->last_maps, &plan, err, errlen);
    if (e)
        return e;
    tg->attached_ns = monotonic_ns();
    if (proc_exe_identity(pid, &tg->exe_dev, &tg->exe_ino) != 0)
        tg->exe_ino = 0;
    refresh_facts(tg);
    take_plan(tg, &plan, &img);
    /* Tables and ranges must be in place before the first probe fires. */
    update_unwind_tables(t, pid);
    e = bpf_state_set_image(t->bpf, (uint32_t)slot, &img);
    if (e)
        snprintf(err, errlen, "set the code ranges of pid %d: %s", (int)pid, strerror(-e));
    else if (tg->wanted == SAMPLER_INPROCESS && try_inprocess(t, tg, &plan) == 0)
        ; /* the report probes are attached */
    else
        e = probe_links_attach(t->bpf, pid, slot, &plan, &tg->probes, err, errlen);
    allocator_plan_free(&plan);
    return e;
}

/* Under the lock: whether `owner` holds as many targets as one owner may
 * (attaching ones count: their slots are taken). */
static int owner_is_full(struct targets *t, uid_t owner, size_t *held)
{
    *held = 0;
    for (size_t i = 0; i < HP_MAX_TARGETS; i++)
        *held += t->slot[i] && !t->slot[i]->detaching && t->slot[i]->owned &&
                 t->slot[i]->owner == owner;
    return t->max_per_owner && *held >= t->max_per_owner;
}

/*
 * Under the lock: whether `pid` (started at `start_time`) is profiled
 * already (1), or else a slot to attach it in for `owner` (NULL: none)
 * (0 and *slot), or -errno (-EDQUOT: the owner holds its share). Waits
 * while another request attaches the same pid; detaches a target whose pid
 * now names another process.
 */
static int find_slot(struct targets *t, pid_t pid, uint64_t start_time, const uid_t *owner,
                     size_t *slot, char *err, size_t errlen)
{
    ssize_t free_slot;
    size_t active;
restart:
    free_slot = -1;
    active = 0;
    for (size_t i = 0; i < HP_MAX_TARGETS; i++) {
        struct target *tg = t->slot[i];
        if (tg && tg->pid == pid && tg->attaching) {
            pthread_cond_wait(&t->attached, &t->lock);
            goto restart; /* the table may have changed meanwhile */
        }
        if (tg && tg->pid == pid && tg->detaching) {
            snprintf(err, errlen, "process %d is being detached; try again", (int)pid);
            return -EAGAIN;
        }
        if (tg && tg->pid == pid && tg->start_time == start_time)
            return 1;
        if (tg && tg->pid == pid)
            detach(t, i); /* the pid was reused by a new process */
        if (!t->slot[i] && free_slot < 0)
            free_slot = (ssize_t)i;
        active += t->slot[i] != NULL;
    }
    if (free_slot < 0 || active >= t->max_targets) {
        snprintf(err, errlen, "already profiling %zu processes, the most allowed (--max-targets)",
                 active);
        return -ENOSPC;
    }
    size_t held;
    if (owner && owner_is_full(t, *owner, &held)) {
        snprintf(err, errlen, "uid %u already has %zu processes attached, the most one caller "
                 "may (--max-targets-per-uid)", (unsigned)*owner, held);
        return -EDQUOT;
    }
    *slot = (size_t)free_slot;
    return 0;
}

/* Copies what a caller may know about `tg`. */
static void copy_info(const struct target *tg, struct target_info *out)
{
    out->pid = tg->pid;
    memcpy(out->comm, tg->facts.comm, sizeof(out->comm));
    memcpy(out->allocator, tg->allocator, sizeof(out->allocator));
    out->nfuncs = tg->nfuncs;
    out->emulated = tg->emulated;
    out->attached_ns = tg->attached_ns;
    out->sampler = sampler_name(tg->inproc ? SAMPLER_INPROCESS : SAMPLER_UPROBE);
    memcpy(out->sampler_note, tg->sampler_note, sizeof(out->sampler_note));
}

int targets_ensure(struct targets *t, pid_t pid, char *err, size_t errlen)
{
    return targets_ensure_for(t, pid, NULL, -1, NULL, err, errlen);
}

int targets_ensure_for(struct targets *t, pid_t pid, const uid_t *owner, int sampler,
                       struct target_info *attached, char *err, size_t errlen)
{
    return targets_ensure_started(t, pid, 0, owner, sampler, attached, err, errlen);
}

int targets_ensure_started(struct targets *t, pid_t pid, uint64_t started, const uid_t *owner,
                           int sampler, struct target_info *attached, char *err, size_t errlen)
{
    uint64_t start_time;
    size_t slot;
    if (attached)
        attached->pid = 0;
    if (proc_start_time(pid, &start_time) != 0) {
        snprintf(err, errlen, "process %d does not exist", (int)pid);
        return -ESRCH;
    }
    if (started && start_time != started) {
        snprintf(err, errlen, "process %d has exited: its pid names another process now",
                 (int)pid);
        return -ESRCH;
    }
    struct target *tg = calloc(1, sizeof(*tg));
    if (!tg)
        return -ENOMEM;
    *tg = (struct target){.pid = pid, .start_time = start_time, .attaching = 1,
                          .owned = owner != NULL, .owner = owner ? *owner : 0};
    pthread_mutex_lock(&t->lock);
    int e = find_slot(t, pid, start_time, owner, &slot, err, errlen);
    if (e == 0)
        t->slot[slot] = tg; /* reserved: no one else takes it meanwhile */
    tg->wanted = sampler < 0 ? t->sampler : (enum sampler_kind)sampler;
    pthread_mutex_unlock(&t->lock);
    if (e) {
        free(tg);
        return e > 0 ? 0 : e;
    }

    uint64_t t0 = monotonic_ns();
    e = attach(t, slot, tg, err, errlen);
    /* A failed attach is undone while the slot is still reserved, so that
     * no new attach of the pid starts before its state is gone. */
    if (e)
        release_probes(t, tg, 0);
    pthread_mutex_lock(&t->lock);
    if (e) {
        t->slot[slot] = NULL;
        t->attach_errors++;
    } else {
        tg->attaching = 0;
        t->attached_total++;
        t->last_attach_ns = monotonic_ns() - t0;
        t->inprocess_fallbacks += (uint64_t)tg->fell_back;
        if (tg->inproc)
            t->last_inject_stop_ns = tg->inproc->inj.stopped_ns;
        if (attached)
            copy_info(tg, attached);
        bpf_state_persist_target(t->bpf, (uint32_t)slot, (uint32_t)pid, start_time,
                                 (uint32_t)tg->exe_ino);
    }
    pthread_cond_broadcast(&t->attached);
    pthread_mutex_unlock(&t->lock);
    if (e) {
        free_target(tg);
        if (e == -ENOENT && proc_start_time(pid, &start_time) != 0) {
            snprintf(err, errlen, "process %d does not exist", (int)pid);
            e = -ESRCH; /* it exited while we attached */
        }
    }
    return e;
}

/* Under the lock: marks the targets that exited or exec'd as detaching,
 * into gone[] (their slots) and exec_d[] (their pids, and the samplers they
 * asked for in exec_sampler[]); returns how many. */
static size_t mark_gone(struct targets *t, size_t *gone, pid_t *exec_d, int *exec_sampler,
                        size_t *nexec)
{
    size_t n = 0;
    *nexec = 0;
    for (size_t i = 0; i < HP_MAX_TARGETS; i++) {
        struct target *tg = t->slot[i];
        uint64_t start_time;
        if (!tg || tg->detaching || tg->attaching)
            continue;
        int exited = proc_start_time(tg->pid, &start_time) != 0 || start_time != tg->start_time;
        int exec = !exited && has_exec_d(tg);
        if (!exited)
            refresh_facts(tg);
        /* An owner's process that exec'd may now run a program its owner
         * may not profile (setuid): it asks again, and is checked again. */
        if (exec && !tg->owned) {
            exec_sampler[*nexec] = (int)tg->wanted;
            exec_d[(*nexec)++] = tg->pid;
        }
        tg->exited = exited;
        if (exited || exec) {
            tg->detaching = 1;
            gone[n++] = i;
        }
    }
    return n;
}

void targets_reap(struct targets *t)
{
    size_t gone[HP_MAX_TARGETS], nexec;
    pid_t exec_d[HP_MAX_TARGETS];
    int exec_sampler[HP_MAX_TARGETS];
    pthread_mutex_lock(&t->lock);
    size_t n = mark_gone(t, gone, exec_d, exec_sampler, &nexec);
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
            t->on_exit(t->on_exit_arg, dead[k]->pid, &dead[k]->facts, &dead[k]->last_maps);
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
        if (t->slot[i] && !t->slot[i]->detaching && !t->slot[i]->attaching)
            live[nlive++] = t->slot[i]->pid;
    pthread_mutex_unlock(&t->lock);

    /* Libraries loaded with dlopen, or a new program after exec, get their
     * tables here; unchanged processes cost one read of their maps. */
    for (size_t k = 0; k < nlive; k++)
        update_unwind_tables(t, live[k]);

    /* A process that exec'd is a new program: attach to it afresh. */
    for (size_t k = 0; k < nexec; k++) {
        char err[512];
        if (targets_ensure_for(t, exec_d[k], NULL, exec_sampler[k], NULL, err, sizeof(err)) != 0) {
            fprintf(stderr, "heapprofd: pid %d after exec: %s\n", (int)exec_d[k], err);
            continue;
        }
        pthread_mutex_lock(&t->lock);
        t->reattached_total++;
        pthread_mutex_unlock(&t->lock);
    }
}

size_t targets_list(struct targets *t, struct target_info *out, size_t cap)
{
    size_t n = 0;
    pthread_mutex_lock(&t->lock);
    for (size_t i = 0; i < HP_MAX_TARGETS; i++) {
        struct target *tg = t->slot[i];
        if (!tg || tg->detaching || tg->attaching)
            continue;
        if (n < cap)
            copy_info(tg, &out[n]);
        n++;
    }
    pthread_mutex_unlock(&t->lock);
    return n;
}
