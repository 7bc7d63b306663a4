/*
 * target_slot.h - one profiled process as the target table keeps it, its
 * lifecycle state, the table's lock with the check that it is held, and
 * the pieces the three files of the table share. Private to them.
 *
 * The files stack one way: target_slot.c (a slot's probes, facts and
 * freeing) and target_info.c (copies for callers) at the bottom, the
 * detaching side (targets_detach.c) above them, the attaching side
 * (targets.c) on top; nothing calls upwards.
 */
#ifndef HEAPPROF_TARGET_SLOT_H
#define HEAPPROF_TARGET_SLOT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/types.h>

#include "holders.h"
#include "probe_links.h"
#include "proc_maps.h"
#include "process_match.h"
#include "targets.h"

/*
 * The table's lock. Debug builds (no NDEBUG) and the sanitizer tree
 * (HEAPPROF_CHECKS, set by daemon/attach/CMakeLists.txt) record which
 * thread holds it, so that every function whose contract says "under the
 * lock" checks it with assert_locked() and aborts, naming itself, when
 * called without. Release builds compile the check out.
 */
#if !defined(NDEBUG) || defined(HEAPPROF_CHECKS)
#define TARGETS_CHECKS 1
#endif

/* Takes the table's lock. */
static inline void targets_lock(struct targets *t)
{
    pthread_mutex_lock(&t->lock);
#ifdef TARGETS_CHECKS
    __atomic_store_n(&t->lock_owner, pthread_self(), __ATOMIC_RELAXED);
#endif
}

/* Lets go of the table's lock. */
static inline void targets_unlock(struct targets *t)
{
#ifdef TARGETS_CHECKS
    __atomic_store_n(&t->lock_owner, (pthread_t)0, __ATOMIC_RELAXED);
#endif
    pthread_mutex_unlock(&t->lock);
}

/* Under the lock: waits for `changed` (an attach or a detach finished),
 * letting go of the lock meanwhile. */
static inline void targets_wait(struct targets *t)
{
#ifdef TARGETS_CHECKS
    __atomic_store_n(&t->lock_owner, (pthread_t)0, __ATOMIC_RELAXED);
#endif
    pthread_cond_wait(&t->changed, &t->lock);
#ifdef TARGETS_CHECKS
    __atomic_store_n(&t->lock_owner, pthread_self(), __ATOMIC_RELAXED);
#endif
}

#ifdef TARGETS_CHECKS
/* Aborts unless the calling thread holds the lock of table `t`. */
#define assert_locked(t)                                                                   \
    do {                                                                                   \
        if (!pthread_equal(__atomic_load_n(&(t)->lock_owner, __ATOMIC_RELAXED),            \
                           pthread_self())) {                                              \
            fprintf(stderr, "heapprofd: %s:%d: %s() runs without the targets lock\n",      \
                    __FILE__, __LINE__, __func__);                                         \
            abort();                                                                       \
        }                                                                                  \
    } while (0)
#else
#define assert_locked(t) ((void)(t))
#endif

/*
 * Where a target is in its life. Only the lock's holder changes it, and
 * only forwards: ATTACHING -> LIVE -> DETACHING -> ENDED; straight to ENDED
 * from ATTACHING when the attach fails, and from LIVE when it is detached
 * at once under the lock (its pid reused, the daemon stopping). The slow
 * steps run outside the lock, and
 * the state is what keeps everyone else off a slot meanwhile: a slot that
 * is ATTACHING or DETACHING stays taken, and its pid's requests wait on
 * `changed` until it is LIVE or gone.
 */
enum target_state {
    TARGET_ATTACHING, /* its attach runs outside the lock: not profiled yet */
    TARGET_LIVE,      /* profiled: what requests, the index and the reaper see */
    TARGET_DETACHING, /* its probes are being removed outside the lock; `end` says why */
    TARGET_ENDED,     /* out of its slot, about to be freed (target_free()) */
};

/* One profiled process. */
struct target {
    pid_t pid;
    uint64_t start_time;
    uint64_t attached_ns; /* CLOCK_MONOTONIC when this daemon attached or adopted it */
    struct process_facts facts; /* its comm, exe and cgroup, as last read */
    char allocator[256];
    struct probe_links probes;
    enum target_state state; /* under the lock */
    size_t nfuncs;   /* functions probed */
    size_t emulated; /* of which on an instruction the kernel emulates */
    uint32_t families; /* the entry families its sampler sees (entry_families.h) */
    /* What tells an exec: the executable's file, and the file mapped where
     * malloc was (another program, or the same one placed elsewhere). */
    dev_t exe_dev;
    ino_t exe_ino;
    uint64_t malloc_addr;
    uint64_t malloc_inode;
    struct proc_maps last_maps; /* as of the last scan: what its last profile names frames by */
    struct holders holders;     /* why it is profiled; under the lock */
    uint64_t attach_delay_ns;   /* from its exec or fork event to attached (0: no event) */
    uint64_t cpu_ns_at_attach;  /* the process's CPU time when attached */
    uint64_t cpu_ns_last;       /* and as last read (an exited process's is gone) */
    uint64_t forks_unprofiled;  /* children it forked that could not be attached */
    enum sampler_kind wanted;        /* the sampler asked for (kept across an exec) */
    struct inprocess_target *inproc; /* the in-process sampler's state, or NULL */
    int fell_back;                   /* inprocess was asked for, uprobes are used */
    char sampler_note[256];          /* why the in-process sampler was not used, or "" */
    int owned;                  /* attached for a caller with a per-owner cap */
    uid_t owner;                /* that caller's uid */
    enum target_end end;        /* set as it becomes DETACHING: why it goes */
    int keep_profile;           /* set as it becomes DETACHING: keep its last profile first */
};

/* Whether `tg` is profiled: attached, and not on its way out. */
static inline bool target_live(const struct target *tg)
{
    return tg && tg->state == TARGET_LIVE;
}

/* The first live target in a slot at or after *i, with *i set to its slot;
 * NULL when there is none. Under the lock. */
static inline struct target *target_next_live(const struct targets *t, size_t *i)
{
    assert_locked(t);
    for (; *i < HP_MAX_TARGETS; (*i)++)
        if (target_live(t->slot[*i]))
            return t->slot[*i];
    return NULL;
}

/* Runs the statement that follows for each live target `tg` (declared by
 * the caller), in slot `i` (declared here). Under the lock; `break` and
 * `continue` work as in any loop. */
#define for_each_live_target(t, i, tg) \
    for (size_t i = 0; ((tg) = target_next_live((t), &i)) != NULL; i++)

/* Under the lock: the live target of `pid`, with its slot in *slot; NULL
 * if `pid` is not one. */
static inline struct target *target_find_live(const struct targets *t, pid_t pid, size_t *slot)
{
    struct target *tg;
    for_each_live_target(t, i, tg)
        if (tg->pid == pid) {
            *slot = i;
            return tg;
        }
    return NULL;
}

/* target_slot.c */

/* Destroys the probes of `tg` and forgets its BPF state (unless
 * `keep_state`), keeping `tg` itself. Slow (each probe's removal waits for
 * RCU): call it without the lock. Returns how long the probes took. */
uint64_t target_release_probes(struct targets *t, struct target *tg, int keep_state);

/* Frees a target whose probes are gone, out of its slot (TARGET_ENDED). */
void target_free(struct target *tg);

/* Under the lock: detaches the target in `slot` at once, its pid now
 * naming another process (or the daemon stopping), probes removed with
 * the lock held. */
void targets_detach_reused(struct targets *t, size_t slot);

/* Reads the facts of tg's process afresh (its comm and cgroup may change),
 * keeping the old ones if it is gone or its pid names another process: its
 * last profile is kept under what it last was. */
void target_refresh_facts(struct target *tg);

/* Gives process `pid` its unwind tables, saying why when it cannot (its
 * stacks are then walked by frame pointers where there are no tables). */
void target_update_unwind_tables(struct targets *t, pid_t pid);

/* target_info.c */

/* Under the lock: a copy of `tg` for callers, all but the counters that
 * need a system call. */
void target_info_copy(const struct targets *t, const struct target *tg, struct target_info *out);

/* Without the lock: the probe hits of image slot `slot` and the CPU time
 * the process has used since attach, into `out` (filled by
 * target_info_copy()). */
void target_info_count(struct targets *t, size_t slot, struct target_info *out);

/* targets_detach.c, for targets.c */

/* A target that exec'd, to attach afresh to its new program, held as it
 * was and with the sampler it asked for. */
struct target_reattach {
    pid_t pid;
    struct holders holders;
    enum sampler_kind sampler;
};

/*
 * Lets go of the targets whose process exited or exec'd (keeping the last
 * profile of those that exited) and refreshes the unwind tables of the
 * rest (dlopen). Those that exec'd and are to be attached again go into
 * `again` (room for HP_MAX_TARGETS); returns how many.
 */
size_t targets_let_go_gone(struct targets *t, struct target_reattach *again);

#endif
