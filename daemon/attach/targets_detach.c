/*
 * targets_detach.c - the target table's detaching side: lets go of
 * processes that exited, exec'd, or that nothing holds any more, keeping
 * the last profile of those that exited or went idle first (see
 * targets.h). The probes' removal waits for RCU, tens of ms, so it runs
 * outside the lock with the slot kept taken (TARGET_DETACHING), and requests
 * for the pid wait on `changed` until it is done.
 */
#include "targets.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "clock.h"
#include "process_events.h"
#include "proc_info.h"
#include "release_pool.h"
#include "target_slot.h"

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

void targets_stop_soon(struct targets *t)
{
    __atomic_store_n(&t->stopping, 1, __ATOMIC_RELAXED);
}

/* Whether the daemon is stopping: work that only tidies the maps waits for
 * the next daemon (pinned maps) or goes with them (not pinned). */
static bool stopping(struct targets *t)
{
    return __atomic_load_n(&t->stopping, __ATOMIC_RELAXED);
}

void targets_destroy(struct targets *t, int keep_state)
{
    /* Every other thread is stopped: the slots are ours without the lock
     * while the probes go, all at once. */
    struct target *tgs[HP_MAX_TARGETS];
    size_t n = 0;
    for (size_t i = 0; i < HP_MAX_TARGETS; i++)
        if (t->slot[i])
            tgs[n++] = t->slot[i];
    release_pool_run(t, tgs, n);
    targets_lock(t);
    for (size_t i = 0; i < HP_MAX_TARGETS; i++) {
        struct target *tg = t->slot[i];
        if (!tg)
            continue;
        tg->state = TARGET_ENDED;
        target_free(tg);
        t->slot[i] = NULL;
        /* With pinned maps, the next daemon adopts these processes, or
         * forgets those gone by then. Without, the maps go with us: there
         * is nothing to forget in them. */
        if (!keep_state)
            t->counters.detached_total++;
    }
    targets_unlock(t);
    pthread_cond_destroy(&t->changed);
    pthread_mutex_destroy(&t->lock);
}

/* Under the lock: marks the target in `slot` as going, for `end`. */
static void mark(struct targets *t, size_t slot, enum target_end end, int keep_profile)
{
    assert_locked(t);
    struct target *tg = t->slot[slot];
    tg->state = TARGET_DETACHING;
    tg->end = end;
    tg->keep_profile = keep_profile && t->callbacks.on_farewell && tg->last_maps.n;
}

/* Keeps the last profile of `tg`, in `slot`, which is going (without the
 * lock: its slot is marked, no one else changes it). Its copy is made
 * under the lock all the same: its cost reads the other slots. */
static void say_farewell(struct targets *t, size_t slot, struct target *tg, uint64_t idle_ns)
{
    struct target_info info;
    targets_lock(t);
    target_info_copy(t, tg, &info);
    targets_unlock(t);
    target_info_count(t, slot, &info);
    struct target_farewell f = {
        .pid = tg->pid,
        .facts = &tg->facts,
        .maps = &tg->last_maps,
        .end = tg->end,
        .idle_ns = idle_ns,
        .info = &info,
    };
    t->callbacks.on_farewell(t->callbacks.on_farewell_arg, &f);
}

/*
 * Lets go of the `n` targets in `slots`, marked under the lock: keeps the
 * last profile of those marked so while their counts are still in the
 * maps, removes the probes, then frees the slots. Requests go on
 * meanwhile; the targets are freed only once their slots are cleared,
 * since until then requests read them under the lock to see that they
 * are detaching (ASan found targets_list() reading a freed one).
 */
static void let_go(struct targets *t, const size_t *slots, size_t n)
{
    if (n == 0)
        return;
    uint64_t took = 0, idle_ns;
    struct target *tgs[HP_MAX_TARGETS];
    uint32_t pids[HP_MAX_TARGETS];
    targets_lock(t);
    idle_ns = t->settings.idle_ns;
    targets_unlock(t);
    for (size_t k = 0; k < n; k++) {
        struct target *tg = t->slot[slots[k]];
        if (tg->keep_profile && !stopping(t))
            say_farewell(t, slots[k], tg, idle_ns);
        tgs[k] = tg;
        pids[k] = (uint32_t)tg->pid;
    }
    took = release_pool_run(t, tgs, n);
    /* One pass over the maps for the whole batch. Stopping, the rows stay:
     * the slots stay remembered in the pinned maps, so the next daemon
     * forgets the processes gone by then. */
    bool forgotten = !stopping(t);
    if (forgotten) {
        int e = bpf_state_forget_processes(t->bpf, pids, n, true);
        if (e)
            fprintf(stderr, "heapprofd: forgetting %zu processes' BPF entries: %s (some stay in "
                            "the maps)\n", n, strerror(-e));
    }
    targets_lock(t);
    for (size_t k = 0; k < n; k++) {
        struct target *tg = t->slot[slots[k]];
        t->counters.idle_detached_total += tg->end == END_IDLE;
        tg->state = TARGET_ENDED;
        target_free(tg);
        t->slot[slots[k]] = NULL;
        t->counters.detached_total++;
        t->counters.last_detach_ns = took;
        if (forgotten)
            bpf_state_persist_target(t->bpf, (uint32_t)slots[k], 0, 0, 0);
    }
    pthread_cond_broadcast(&t->changed);
    targets_unlock(t);
}

/* Under the lock: marks the targets that exited or exec'd as going, into
 * gone[] (their slots), and those that exec'd to be attached again, with
 * their holders and the samplers they asked for, into again[] (*nagain);
 * refreshes the CPU time of the rest. */
static size_t mark_gone(struct targets *t, size_t *gone, struct target_reattach *again,
                        size_t *nagain)
{
    size_t n = 0;
    struct target *tg;
    assert_locked(t);
    *nagain = 0;
    for_each_live_target(t, i, tg) {
        uint64_t start_time;
        int exited = proc_start_time(tg->pid, &start_time) != 0 || start_time != tg->start_time;
        int exec = !exited && has_exec_d(tg);
        if (!exited)
            target_refresh_facts(tg);
        /* An owner's process that exec'd may now run a program its owner
         * may not profile (setuid): it asks again, and is checked again. */
        if (exec && !tg->owned)
            again[(*nagain)++] = (struct target_reattach){
                .pid = tg->pid, .holders = tg->holders, .sampler = tg->wanted};
        if (exited || exec) {
            mark(t, i, exec ? END_EXEC : END_EXITED, exited);
            gone[n++] = i;
        } else {
            proc_cpu_time_ns(tg->pid, &tg->cpu_ns_last);
        }
    }
    return n;
}

size_t targets_let_go_gone(struct targets *t, struct target_reattach *again)
{
    size_t gone[HP_MAX_TARGETS], nagain;
    targets_lock(t);
    size_t n = mark_gone(t, gone, again, &nagain);
    targets_unlock(t);
    let_go(t, gone, n);

    pid_t live[HP_MAX_TARGETS];
    size_t nlive = 0;
    struct target *tg;
    targets_lock(t);
    for_each_live_target(t, i, tg)
        live[nlive++] = tg->pid;
    targets_unlock(t);

    /* Libraries loaded with dlopen, or a new program after exec, get their
     * tables here; unchanged processes cost one read of their maps. */
    for (size_t k = 0; k < nlive; k++)
        target_update_unwind_tables(t, live[k]);
    return nagain;
}

size_t targets_expire(struct targets *t, uint64_t now_ns)
{
    size_t gone[HP_MAX_TARGETS], n = 0;
    targets_lock(t);
    struct target *tg;
    for_each_live_target(t, i, tg)
        if (!holders_held(&tg->holders, now_ns)) {
            mark(t, i, END_IDLE, 1);
            gone[n++] = i;
        }
    targets_unlock(t);
    let_go(t, gone, n);
    return n;
}

void targets_release(struct targets *t, pid_t pid, enum hold_kind kind)
{
    size_t gone[1], n = 0;
    targets_lock(t);
    struct target *tg;
    for_each_live_target(t, i, tg) {
        if (tg->pid != pid)
            continue;
        holders_drop(&tg->holders, kind);
        /* The window's profile is what the caller kept: no other. */
        if (!holders_held(&tg->holders, monotonic_ns())) {
            mark(t, i, END_IDLE, 0);
            gone[n++] = i;
        }
        break;
    }
    targets_unlock(t);
    let_go(t, gone, n);
}

void targets_exited(struct targets *t, pid_t pid)
{
    targets_exited_many(t, &pid, 1);
}

/* Whether `slot` is among the first `n` of `slots`. */
static bool has_slot(const size_t *slots, size_t n, size_t slot)
{
    for (size_t k = 0; k < n; k++)
        if (slots[k] == slot)
            return true;
    return false;
}

void targets_exited_many(struct targets *t, const pid_t *pids, size_t npids)
{
    size_t gone[HP_MAX_TARGETS], n = 0;
    targets_lock(t);
restart:
    for (size_t i = 0; i < HP_MAX_TARGETS; i++) {
        struct target *tg = t->slot[i];
        uint64_t start_time;
        if (!tg || has_slot(gone, n, i))
            continue;
        bool named = false;
        for (size_t k = 0; k < npids && !named; k++)
            named = tg->pid == pids[k];
        if (!named)
            continue;
        if (!target_live(tg)) {
            /* Its attach fails on its own; its farewell is under way: wait
             * for it, so a request after the exit finds the kept profile.
             * Those this call marked stay marked meanwhile. */
            targets_wait(t);
            goto restart;
        }
        if (proc_start_time(tg->pid, &start_time) == 0 && start_time == tg->start_time)
            continue; /* still running: an exit event of a pid since reused */
        mark(t, i, END_EXITED, 1);
        gone[n++] = i;
    }
    targets_unlock(t);
    let_go(t, gone, n);
}

void targets_settle_exits(struct targets *t)
{
    pid_t gone[HP_MAX_TARGETS];
    size_t n = 0;
    targets_lock(t);
    struct target *tg;
    for_each_live_target(t, i, tg) {
        uint64_t start_time;
        if (proc_start_time(tg->pid, &start_time) != 0 || start_time != tg->start_time)
            gone[n++] = tg->pid;
    }
    targets_unlock(t);
    for (size_t k = 0; k < n; k++)
        targets_exited(t, gone[k]);
}

bool targets_exec_d(struct targets *t, pid_t pid, uint64_t event_ns, struct holders *kept,
                    enum sampler_kind *sampler)
{
    size_t gone[1], n = 0;
    targets_lock(t);
    struct target *tg;
    for_each_live_target(t, i, tg) {
        if (tg->pid != pid)
            continue;
        if (tg->attached_ns < event_ns) { /* else attached to the new program already */
            /* An owner's process is not attached again (see mark_gone). */
            *kept = tg->owned ? (struct holders){{0}, {0}} : tg->holders;
            *sampler = tg->wanted;
            mark(t, i, END_EXEC, 0);
            gone[n++] = i;
        }
        break;
    }
    targets_unlock(t);
    let_go(t, gone, n);
    return n > 0;
}
