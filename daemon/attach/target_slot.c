/*
 * target_slot.c - what is done to one slot of the target table, whichever
 * side attaches or detaches it: its probes removed, its process's facts
 * and unwind tables refreshed, its memory freed (see target_slot.h).
 */
#include "target_slot.h"

#include <errno.h>
#include <string.h>

#include "clock.h"
#include "process_events.h"

void target_update_unwind_tables(struct targets *t, pid_t pid)
{
    char why[256];
    int e = t->unwind ? unwind_manager_update(t->unwind, pid, why, sizeof(why)) : 0;
    if (e && e != -ESRCH)
        fprintf(stderr, "heapprofd: pid %d: unwind tables: %s\n", (int)pid, why);
}

uint64_t target_release_probes(struct targets *t, struct target *tg, int keep_state)
{
    uint64_t t0 = monotonic_ns();
    if (tg->inproc) {
        /* Set again only by a stop that happens: a process gone already
         * leaves nothing to restore, and its attach's figure stays its. */
        tg->inproc->inj.stopped_ns = 0;
        uint64_t stopped = inprocess_detach(tg->inproc);
        /* Callers may or may not hold the lock: a plain atomic store. */
        if (stopped)
            __atomic_store_n(&t->last_restore_stop_ns, stopped, __ATOMIC_RELAXED);
        free(tg->inproc);
        tg->inproc = NULL;
    }
    probe_links_release(&tg->probes);
    uint64_t took = monotonic_ns() - t0; /* the probes; forgetting the counts is not detaching */
    if (t->events)
        process_events_unwatch(t->events, tg->pid);
    int e = keep_state ? 0 : bpf_state_forget_process(t->bpf, (uint32_t)tg->pid);
    if (e)
        fprintf(stderr, "heapprofd: pid %d: deleting its BPF entries: %s (some stay in the maps)\n",
                (int)tg->pid, strerror(-e));
    if (t->unwind)
        unwind_manager_forget(t->unwind, tg->pid);
    return took;
}

void target_refresh_facts(struct target *tg)
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

void target_free(struct target *tg)
{
#ifdef TARGETS_CHECKS
    /* Freed only once out of its slot: a request could still read it. */
    if (tg->state != TARGET_ENDED) {
        fprintf(stderr, "heapprofd: pid %d: target freed in state %d, not ended\n",
                (int)tg->pid, (int)tg->state);
        abort();
    }
#endif
    proc_maps_free(&tg->last_maps);
    process_facts_free(&tg->facts);
    free(tg);
}

void targets_detach_reused(struct targets *t, size_t slot)
{
    assert_locked(t);
    struct target *tg = t->slot[slot];
    t->counters.last_detach_ns = target_release_probes(t, tg, 0);
    tg->state = TARGET_ENDED;
    target_free(tg);
    t->slot[slot] = NULL;
    t->counters.detached_total++;
    bpf_state_persist_target(t->bpf, (uint32_t)slot, 0, 0, 0);
}
