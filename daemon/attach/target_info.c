/*
 * target_info.c - what callers may read of the target table: copies of
 * live targets for the index, /metrics, the audit line and a kept last
 * profile, and what a probe hit costs each (see target_info.h).
 */
#include "target_info.h"

#include <stdlib.h>
#include <string.h>

#include "proc_info.h"
#include "target_slot.h"
#include "targets.h"

/* Under the lock: how many other live targets are probed through uprobes
 * on the same allocator as `tg` (the same file mapped where malloc is):
 * each of their links adds to the cost of a hit in `tg`. */
static size_t sharers_of(const struct targets *t, const struct target *tg)
{
    size_t n = 0;
    const struct target *o;
    for_each_live_target(t, i, o)
        n += o != tg && !o->inproc && o->malloc_inode == tg->malloc_inode;
    return n;
}

/* Under the lock: the CPU time one probe hit costs target `tg`. It belongs
 * to the sampler that probes it: the uprobe sampler's is calibrated at
 * start-up, plus what the links of the other targets of the same library
 * add to each hit; a sampler whose hits are only its sampled calls needs
 * its own (0: not known). */
static uint64_t ns_per_hit_of(const struct targets *t, const struct target *tg)
{
    assert_locked(t);
    if (tg->inproc || !t->cost.ns_per_hit)
        return 0;
    size_t sharers = sharers_of(t, tg);
    return t->cost.ns_per_hit + (sharers ? t->cost.ns_when_shared + t->cost.ns_per_sharer * sharers : 0);
}

void target_info_copy(const struct targets *t, const struct target *tg, struct target_info *out)
{
    assert_locked(t);
    out->pid = tg->pid;
    memcpy(out->comm, tg->facts.comm, sizeof(out->comm));
    memcpy(out->allocator, tg->allocator, sizeof(out->allocator));
    out->nfuncs = tg->nfuncs;
    out->emulated = tg->emulated;
    out->families = tg->families;
    out->attached_ns = tg->attached_ns;
    out->sampler = sampler_name(tg->inproc ? SAMPLER_INPROCESS : SAMPLER_UPROBE);
    memcpy(out->sampler_note, tg->sampler_note, sizeof(out->sampler_note));
    out->holders = tg->holders;
    out->attach_delay_ns = tg->attach_delay_ns;
    out->cpu_ns_at_attach = tg->cpu_ns_at_attach;
    out->cpu_ns = tg->cpu_ns_last - tg->cpu_ns_at_attach;
    out->forks_unprofiled = tg->forks_unprofiled;
    out->ns_per_hit = ns_per_hit_of(t, tg);
    out->probe_hits = 0;
}

void target_info_count(struct targets *t, size_t slot, struct target_info *out)
{
    uint64_t cpu;
    if (bpf_state_read_hits(t->bpf, (uint32_t)slot, &out->probe_hits) != 0)
        out->probe_hits = 0;
    if (proc_cpu_time_ns(out->pid, &cpu) == 0 && cpu >= out->cpu_ns_at_attach)
        out->cpu_ns = cpu - out->cpu_ns_at_attach;
}

bool targets_info(struct targets *t, pid_t pid, struct target_info *out)
{
    size_t slot;
    targets_lock(t);
    struct target *tg = target_find_live(t, pid, &slot);
    if (tg)
        target_info_copy(t, tg, out);
    targets_unlock(t);
    if (tg)
        target_info_count(t, slot, out);
    return tg != NULL;
}

void targets_set_cost(struct targets *t, const struct probe_cost *cost)
{
    targets_lock(t);
    t->cost = *cost;
    targets_unlock(t);
}

uint64_t targets_idle_ns(struct targets *t)
{
    targets_lock(t);
    uint64_t idle = t->settings.idle_ns;
    targets_unlock(t);
    return idle;
}

size_t targets_list(struct targets *t, struct target_info *out, size_t cap)
{
    size_t n = 0;
    uint32_t *slots = cap ? calloc(cap, sizeof(*slots)) : NULL;
    if (cap && !slots)
        return 0;
    targets_lock(t);
    struct target *tg;
    for_each_live_target(t, i, tg) {
        if (n < cap) {
            target_info_copy(t, tg, &out[n]);
            slots[n] = (uint32_t)i;
        }
        n++;
    }
    targets_unlock(t);
    /* The counters need system calls: read without the lock. A slot that
     * changed hands meanwhile reads its new target's, zeroed at attach. */
    for (size_t i = 0; slots && i < n && i < cap; i++)
        target_info_count(t, slots[i], &out[i]);
    free(slots);
    return n;
}

void targets_read_counters(struct targets *t, struct targets_counters *counters,
                           struct probe_cost *cost)
{
    targets_lock(t);
    *counters = t->counters;
    *cost = t->cost;
    targets_unlock(t);
    counters->last_restore_stop_ns =
        __atomic_load_n(&t->last_restore_stop_ns, __ATOMIC_RELAXED);
}
