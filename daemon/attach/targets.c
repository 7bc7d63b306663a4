/*
 * targets.c - the table of profiled processes, its attaching side: a
 * process is attached for a reason and held by it (see targets.h); the
 * links themselves are made in probe_links.c, and targets are let go in
 * targets_detach.c.
 *
 * Each process gets one slot: the slot indexes the BPF `images` map, which
 * holds the code ranges of the probed functions so that the BPF side can
 * tell the allocator calling itself from a real call, and the per-target
 * probe hit counter. A slot is reserved (TARGET_ATTACHING) while its
 * attach runs outside the lock, and kept (TARGET_DETACHING) while its
 * probes are removed outside the lock, so neither the slot nor the pid's
 * BPF state is reused before the old one is gone (target_slot.h).
 */
#include "targets.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "allocator.h"
#include "clock.h"
#include "entry_families.h"
#include "probe_links.h"
#include "process_events.h"
#include "proc_info.h"
#include "proc_maps.h"
#include "target_slot.h"
#include "targets_race.h"

void targets_init(struct targets *t, struct bpf_state *bpf, struct unwind_manager *unwind,
                  size_t max_targets)
{
    memset(t, 0, sizeof(*t));
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->changed, NULL);
    t->bpf = bpf;
    t->unwind = unwind;
    t->settings.max_targets = max_targets ? max_targets : HP_MAX_TARGETS;
}

void targets_set_settings(struct targets *t, const struct targets_settings *settings)
{
    targets_lock(t);
    t->settings = *settings;
    targets_unlock(t);
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
    targets_lock(t);
    uint64_t idle = t->settings.idle_ns;
    targets_unlock(t);
    int adopted = 0;
    for (size_t i = 0; i < n; i++) {
        pid_t pid = (pid_t)old[i].pid;
        char why[512];
        /* Same start time but another executable: it exec'd while no daemon
         * ran, and its counts name the old program's code. */
        if (!proc_is_same_process(pid, old[i].start_time, old[i].exe_ino)) {
            int e = bpf_state_forget_process(t->bpf, (uint32_t)pid); /* gone, or not ours */
            if (e)
                note_failure(err, errlen, pid, "its BPF entries stay in the maps");
            continue;
        }
        /* Why the last daemon held it is not remembered: as by a request now. */
        struct hold_request how = {.kind = HOLD_REQUEST,
                                   .until_ns = idle ? monotonic_ns() + idle : HOLD_FOREVER};
        if (targets_hold(t, pid, &how, why, sizeof(why)) != 0) {
            note_failure(err, errlen, pid, why);
            bpf_state_forget_process(t->bpf, (uint32_t)pid);
            continue;
        }
        adopted++;
    }
    free(old);
    return adopted;
}

/* Takes what the target keeps from the plan: the code ranges of the probed
 * functions (for the BPF image), and where malloc is (to tell an exec). */
static void take_plan(struct target *tg, const struct allocator_plan *plan, struct hp_image *img)
{
    *img = (struct hp_image){.nfuncs = (uint32_t)plan->n, .lo = UINT64_MAX, .hi = 0};
    tg->nfuncs = plan->n;
    tg->families = 0;
    for (size_t i = 0; i < plan->n; i++) {
        int f = entry_family_of(plan->funcs[i].name);
        if (f >= 0)
            tg->families |= 1u << f;
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

/* Puts the in-process sampler into `tg`; on failure says why (the log, the
 * index and /metrics) and returns 0: the caller attaches uprobes; or, for
 * a process that exited or exec'd meanwhile, the error, quietly (the
 * caller counts the race). Called without the lock, like attach(). */
static int try_inprocess(struct targets *t, struct target *tg, const struct allocator_plan *plan,
                         const struct hold_request *how)
{
    struct process_identity who = {.start_time = tg->start_time, .exe_dev = tg->exe_dev,
                                   .exe_ino = tg->exe_ino, .owned = tg->owned,
                                   .owner = tg->owner};
    tg->inproc = calloc(1, sizeof(*tg->inproc));
    int e = tg->inproc ? inprocess_attach(t->bpf, tg->pid, &who, plan, t->shared,
                                          how->fork_child, tg->inproc, tg->sampler_note,
                                          sizeof(tg->sampler_note))
                       : -ENOMEM;
    if (e == 0)
        return 0;
    if (e == -ENOMEM && !tg->sampler_note[0])
        snprintf(tg->sampler_note, sizeof(tg->sampler_note), "out of memory");
    free(tg->inproc);
    tg->inproc = NULL;
    /* A process that exited or exec'd meanwhile is no fallback: the uprobes
     * would fail too, or probe what is no longer its program. The caller
     * tells which (attach_race() again); inject's -EAGAIN ("no thread can
     * be stopped now") must not read as the linker's. */
    if (attach_race(tg) != RACE_NONE)
        return -ESRCH;
    fprintf(stderr, "heapprofd: pid %d: in-process sampler not used, uprobes instead: %s\n",
            (int)tg->pid, tg->sampler_note);
    tg->fell_back = 1;
    return 0;
}

/* The allocator of process tg->pid, into `plan`: -EAGAIN for a process
 * that has just exec'd while its dynamic linker is still loading (calls
 * may bind elsewhere once it is done). */
static int resolve(const struct target *tg, const struct hold_request *how,
                   struct allocator_plan *plan, char *err, size_t errlen)
{
    int e = allocator_resolve(tg->pid, &tg->last_maps, plan, err, errlen);
    if (!how->just_exec_d || (e == 0 && plan->settled))
        return e;
    if (e == 0)
        allocator_plan_free(plan);
    if (e == 0 || e == -ENOENT) {
        snprintf(err, errlen, "process %d: its dynamic linker is still loading", (int)tg->pid);
        return -EAGAIN;
    }
    return e;
}

/* Resolves the allocator and attaches every probe to process tg->pid in
 * `slot`. Called without the lock: the slot is reserved for it. */
static int attach(struct targets *t, size_t slot, struct target *tg, const struct hold_request *how,
                  char *err, size_t errlen)
{
    struct allocator_plan plan;
    struct hp_image img;
    pid_t pid = tg->pid;
    tg->attached_ns = monotonic_ns(); /* before the maps: an exec after this is news */
    /* The program it runs as we start: an exec during the attach is told
     * from a failure by it (attach_race()). */
    if (proc_exe_identity(pid, &tg->exe_dev, &tg->exe_ino) != 0)
        tg->exe_ino = 0;
    int e = proc_maps_read(pid, &tg->last_maps);
    if (e) {
        snprintf(err, errlen, "read /proc/%d/maps: %s", (int)pid, strerror(-e));
        return e;
    }
    /* Its last maps until the next scan: a process that exits within a
     * second still gets its last profile. */
    e = resolve(tg, how, &plan, err, errlen);
    if (e)
        return e;
    target_refresh_facts(tg);
    take_plan(tg, &plan, &img);
    /* Tables, ranges and a zeroed hit counter before the first probe fires. */
    target_update_unwind_tables(t, pid);

    /* Its forks from now on are news: a child forked while the sampler is
     * put in carries it too, and is attached once its parent is live. */
    if (t->events)
        process_events_watch(t->events, pid);
    e = bpf_state_set_image(t->bpf, (uint32_t)slot, &img);
    if (e == 0)
        e = bpf_state_zero_hits(t->bpf, (uint32_t)slot);
    if (e)
        snprintf(err, errlen, "set the code ranges of pid %d: %s", (int)pid, strerror(-e));
    else if (tg->wanted == SAMPLER_INPROCESS && (e = try_inprocess(t, tg, &plan, how)) == 0 &&
             tg->inproc)
        tg->families = inprocess_families(tg->inproc); /* the report probes are attached */
    else if (e == 0)
        e = probe_links_attach(t->bpf, pid, slot, &plan, &tg->probes, err, errlen);
    else
        snprintf(err, errlen, "%s", tg->sampler_note); /* it exited or exec'd meanwhile */
    allocator_plan_free(&plan);
    if (e == 0 && proc_cpu_time_ns(pid, &tg->cpu_ns_at_attach) == 0)
        tg->cpu_ns_last = tg->cpu_ns_at_attach;
    if (e && t->events)
        process_events_unwatch(t->events, pid);
    return e;
}

/* Under the lock: whether `owner` holds as many targets as one owner may
 * (attaching ones count: their slots are taken). */
static int owner_is_full(struct targets *t, uid_t owner, size_t *held)
{
    assert_locked(t);
    *held = 0;
    for (size_t i = 0; i < HP_MAX_TARGETS; i++)
        *held += t->slot[i] && t->slot[i]->state != TARGET_DETACHING && t->slot[i]->owned &&
                 t->slot[i]->owner == owner;
    return t->settings.max_per_owner && *held >= t->settings.max_per_owner;
}

/*
 * Under the lock: whether `pid` (started at `start_time`) is profiled
 * already (1 and *slot), or else a slot to attach it in for `owner` (NULL:
 * none) (0 and *slot), or -errno (-EDQUOT: the owner holds its share).
 * Waits while the pid is being attached or detached; detaches a target
 * whose pid now names another process.
 */
static int find_slot(struct targets *t, pid_t pid, uint64_t start_time, const uid_t *owner,
                     size_t *slot, char *err, size_t errlen)
{
    ssize_t free_slot;
    size_t active;
    assert_locked(t);
restart:
    free_slot = -1;
    active = 0;
    for (size_t i = 0; i < HP_MAX_TARGETS; i++) {
        struct target *tg = t->slot[i];
        if (tg && tg->pid == pid && !target_live(tg)) {
            targets_wait(t);
            goto restart; /* the table may have changed meanwhile */
        }
        if (tg && tg->pid == pid && tg->start_time == start_time) {
            *slot = i;
            return 1;
        }
        if (tg && tg->pid == pid)
            targets_detach_reused(t, i); /* the pid was reused by a new process */
        if (!t->slot[i] && free_slot < 0)
            free_slot = (ssize_t)i;
        active += t->slot[i] != NULL;
    }
    if (free_slot < 0 || active >= t->settings.max_targets) {
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

/* Under the lock: ends the attach of `tg` in `slot`, which took since `t0`;
 * one that failed because its process outran it is counted as that `race`. */
static void finish_attach(struct targets *t, size_t slot, struct target *tg, int e, uint64_t t0,
                          enum attach_race race)
{
    assert_locked(t);
    if (e) {
        tg->state = TARGET_ENDED;
        t->slot[slot] = NULL;
        if (race != RACE_NONE)
            t->counters.attach_raced[race]++;
        else if (e != -EAGAIN)
            t->counters.attach_errors++;
    } else {
        tg->state = TARGET_LIVE;
        t->counters.attached_total++;
        t->counters.last_attach_ns = monotonic_ns() - t0;
        bpf_state_persist_target(t->bpf, (uint32_t)slot, (uint32_t)tg->pid, tg->start_time,
                                 (uint32_t)tg->exe_ino);
    }
    pthread_cond_broadcast(&t->changed);
}

/* Tells of an attach that just finished, as `info` shows it: the caller
 * (how->attached), and for the daemon's own holds the audit hook. */
static void tell_attached(struct targets *t, const struct target_info *info,
                          const struct holders *holders, const struct hold_request *how)
{
    if (how->attached)
        *how->attached = *info;
    static const enum hold_kind own[] = {HOLD_PID, HOLD_RULE, HOLD_FORK};
    for (size_t k = 0; k < sizeof(own) / sizeof(own[0]) && t->callbacks.on_attached; k++)
        if (holders->count[own[k]]) {
            t->callbacks.on_attached(t->callbacks.on_attached_arg, info, own[k]);
            break;
        }
}

int targets_hold_set(struct targets *t, pid_t pid, const struct holders *holders,
                     const struct hold_request *how, char *err, size_t errlen)
{
    uint64_t start_time;
    size_t slot;
    if (proc_start_time(pid, &start_time) != 0) {
        targets_exited(t, pid); /* a target that has just exited: keep its last profile */
        snprintf(err, errlen, "process %d does not exist", (int)pid);
        return -ESRCH;
    }
    if (how->started && start_time != how->started) {
        snprintf(err, errlen, "process %d has exited: its pid names another process now",
                 (int)pid);
        return -ESRCH;
    }
    struct target *tg = calloc(1, sizeof(*tg));
    if (!tg)
        return -ENOMEM;
    *tg = (struct target){.pid = pid, .start_time = start_time, .state = TARGET_ATTACHING,
                          .owned = how->owner != NULL, .owner = how->owner ? *how->owner : 0};
    if (how->attached)
        how->attached->pid = 0;
    targets_lock(t);
    int e = find_slot(t, pid, start_time, how->owner, &slot, err, errlen);
    if (e == 0) {
        t->slot[slot] = tg; /* reserved: no one else takes it meanwhile */
        tg->wanted = how->sampler ? *how->sampler : t->settings.sampler;
    }
    if (e >= 0)
        holders_merge(&t->slot[slot]->holders, holders);
    targets_unlock(t);
    if (e) {
        free(tg);
        return e > 0 ? 0 : e;
    }

    uint64_t t0 = monotonic_ns();
    e = attach(t, slot, tg, how, err, errlen);
    if (e == 0 && how->event_ns && t0 > how->event_ns)
        tg->attach_delay_ns = monotonic_ns() - how->event_ns;
    /* A failed attach is undone while the slot is still reserved, so that
     * no new attach of the pid starts before its state is gone. One told
     * to wait for the linker made nothing yet (and is tried every ms). */
    if (e && e != -EAGAIN)
        target_release_probes(t, tg, 0);
    enum attach_race race = e && e != -EAGAIN ? attach_race(tg) : RACE_NONE;
    attach_race_log(pid, race, err);
    struct target_info info;
    targets_lock(t);
    finish_attach(t, slot, tg, e, t0, race);
    t->counters.reattached_total += e == 0 && how->reattach;
    t->counters.inprocess_fallbacks += (uint64_t)(e == 0 && tg->fell_back);
    if (e == 0 && tg->inproc && tg->inproc->inj.stopped) /* a fork child is taken over unstopped */
        t->counters.last_inject_stop_ns = tg->inproc->inj.stopped_ns;
    if (e == 0)
        target_info_copy(t, tg, &info); /* once unlocked, it may go at any time */
    targets_unlock(t);
    if (e) {
        target_free(tg);
        if (race == RACE_EXITED || (e == -ENOENT && proc_start_time(pid, &start_time) != 0)) {
            snprintf(err, errlen, "process %d does not exist", (int)pid);
            e = -ESRCH; /* it exited while we attached */
        } else if (race == RACE_EXEC) {
            snprintf(err, errlen, "process %d exec'd during its attach: ask again", (int)pid);
            e = -EAGAIN;
        }
        return e;
    }
    tell_attached(t, &info, holders, how);
    return 0;
}

int targets_hold(struct targets *t, pid_t pid, const struct hold_request *why, char *err,
                 size_t errlen)
{
    struct holders h = {{0}, {0}};
    holders_add(&h, why->kind, why->until_ns);
    return targets_hold_set(t, pid, &h, why, err, errlen);
}

int targets_fork_parent(struct targets *t, pid_t pid, struct holders *holders,
                        enum sampler_kind *sampler, bool *owned, uid_t *owner)
{
    int r = -1;
    targets_lock(t);
    for (size_t i = 0; i < HP_MAX_TARGETS && r < 0; i++) {
        struct target *tg = t->slot[i];
        if (!tg || tg->pid != pid)
            continue;
        if (tg->state == TARGET_ATTACHING) {
            r = 0;
        } else if (target_live(tg)) {
            *holders = tg->holders;
            *sampler = tg->inproc ? SAMPLER_INPROCESS : SAMPLER_UPROBE;
            *owned = tg->owned;
            *owner = tg->owner;
            r = 1;
        }
    }
    targets_unlock(t);
    return r;
}

bool targets_holders_of(struct targets *t, pid_t pid, struct holders *out,
                        enum sampler_kind *sampler)
{
    size_t slot;
    targets_lock(t);
    struct target *tg = target_find_live(t, pid, &slot);
    if (tg)
        *out = tg->holders;
    if (tg && sampler)
        *sampler = tg->inproc ? SAMPLER_INPROCESS : SAMPLER_UPROBE;
    targets_unlock(t);
    return tg != NULL;
}

void targets_note_unprofiled_fork(struct targets *t, pid_t parent)
{
    size_t slot;
    targets_lock(t);
    struct target *tg = target_find_live(t, parent, &slot);
    if (tg)
        tg->forks_unprofiled++;
    targets_unlock(t);
}

int targets_scrub_inherited(struct targets *t, pid_t pid, char *err, size_t errlen)
{
    struct proc_maps maps;
    struct allocator_plan plan;
    struct probe_links links = {0};
    int e = proc_maps_read(pid, &maps);
    if (e) {
        snprintf(err, errlen, "read /proc/%d/maps: %s", (int)pid, strerror(-e));
        return e;
    }
    e = allocator_resolve(pid, &maps, &plan, err, errlen);
    if (e == 0) {
        e = probe_links_attach(t->bpf, pid, HP_SPARE_SLOT, &plan, &links, err, errlen);
        probe_links_release(&links);
        allocator_plan_free(&plan);
        bpf_state_forget_process(t->bpf, (uint32_t)pid); /* what the moment counted */
    }
    proc_maps_free(&maps);
    return e;
}

void targets_reap(struct targets *t)
{
    struct target_reattach *again = calloc(HP_MAX_TARGETS, sizeof(*again));
    if (!again)
        return; /* the next scan tries again */
    size_t n = targets_let_go_gone(t, again);
    /* A process that exec'd is a new program: attach to it afresh, held
     * as it was, a second after its exec (loaded by then). */
    for (size_t k = 0; k < n; k++) {
        char err[512];
        struct hold_request how = {.reattach = true, .sampler = &again[k].sampler};
        if (targets_hold_set(t, again[k].pid, &again[k].holders, &how, err, sizeof(err)) != 0)
            fprintf(stderr, "heapprofd: pid %d after exec: %s\n", (int)again[k].pid, err);
    }
    free(again);
}
