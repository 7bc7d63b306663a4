/*
 * targets.h - the processes being profiled: attaching the allocator probes
 * to a process (synchronously, so that every later allocation is seen)
 * for a reason (holders.h), detaching it when no reason is left or it
 * exited, and telling a reused pid from the process we attached to.
 *
 * All functions take the table's lock; they may be called from any thread.
 * Nothing outside daemon/attach takes it: it is taken through
 * targets_lock() (target_slot.h), which lets debug builds check it.
 * The slow part of an attach (reading the process's ELF files, building
 * its unwind tables, making the links) and of a detach (removing the
 * links, keeping a last profile) runs outside it, with the slot reserved,
 * so that requests for the index and /metrics and other attaches go on
 * meanwhile. The attaching and the detaching side are in targets.c and
 * targets_detach.c, what callers may read of the table in target_info.c;
 * target_slot.h is what the three share.
 */
#ifndef HEAPPROF_TARGETS_H
#define HEAPPROF_TARGETS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bpf_state.h"
#include "holders.h"
#include "hp_limits.h"
#include "probe_cost.h"
#include "proc_maps.h"
#include "process_match.h"
#include "sampler_choice.h"
#include "target_info.h"
#include "unwind_manager.h"

struct target;
struct process_events;

/* Why a target's probes go. */
enum target_end {
    END_EXITED = 0, /* the process exited */
    END_IDLE,       /* nothing holds it any more (--idle-detach, the end of a window) */
    END_EXEC,       /* it exec'd: attached afresh to the new program */
    END_REUSED,     /* its pid now names another process */
};

/* What is left of a target whose probes go, for keeping its last profile. */
struct target_farewell {
    pid_t pid;
    /* Its comm, exe, cgroup and start time, as last read: a selector picks
     * its kept profile by these, and /proc may have none of them left. */
    const struct process_facts *facts;
    const struct proc_maps *maps; /* its last memory map */
    enum target_end end;
    uint64_t idle_ns;             /* END_IDLE after a request hold: --idle-detach */
    const struct target_info *info; /* as it was (cost, holders) */
};

/* Called as a target exits or is let go, before its BPF state goes. */
typedef void (*targets_farewell_fn)(void *arg, const struct target_farewell *f);

/* What the daemon's options set: read under the lock, since SIGHUP and
 * tests may change them while requests run. */
struct targets_settings {
    size_t max_targets;        /* processes profiled at once */
    size_t max_per_owner;      /* targets one owner may hold (0: no limit) */
    enum sampler_kind sampler; /* the sampler new targets get (--sampler) */
    uint64_t idle_ns;          /* --idle-detach (0: a request holds for ever) */
};

/* What the table has done since start, for /metrics. */
/* Why an attach that failed was no failure: the process exited or exec'd
 * while it ran (counted apart from attach_errors, logged at debug level). */
enum attach_race { RACE_NONE = 0, RACE_EXITED, RACE_EXEC, RACE_KINDS };

struct targets_counters {
    uint64_t attach_errors;        /* failures of a process still there, as it was */
    uint64_t attach_raced[RACE_KINDS]; /* attaches its process outran (enum attach_race) */
    uint64_t attached_total;
    uint64_t detached_total;
    uint64_t idle_detached_total;  /* let go with nothing holding them */
    uint64_t reattached_total;     /* processes attached again after exec */
    uint64_t last_attach_ns;       /* how long the last attach took */
    uint64_t last_detach_ns;       /* how long removing the last target's probes took */
    uint64_t inprocess_fallbacks;  /* in-process asked, uprobes used */
    uint64_t last_inject_stop_ns;  /* target stopped at the last injection */
    /* Target stopped at the last restore, as targets_read_counters() gives
     * it: the table keeps it apart (targets.last_restore_stop_ns). */
    uint64_t last_restore_stop_ns;
};

/* Who is told of what the table does; set before the first attach. */
struct targets_callbacks {
    targets_farewell_fn on_farewell; /* NULL: nothing kept of targets that go */
    void *on_farewell_arg;
    /* Told of each attach that one of the daemon's own holds (pid, rule,
     * fork: `why`) made, for the audit line; the request that made an
     * attach tells of it itself. NULL: none. */
    void (*on_attached)(void *arg, const struct target_info *t, enum hold_kind why);
    void *on_attached_arg;
};

/* The table of profiled processes; its slot index is the BPF image slot. */
struct targets {
    pthread_mutex_t lock;
    pthread_cond_t changed; /* broadcast when an attach or a detach finishes */
    /* In checks builds, the thread that holds `lock` (0: none), for
     * assert_locked() (target_slot.h): set by the thread that takes the
     * lock, cleared by it as it lets go. */
    pthread_t lock_owner;
    struct bpf_state *bpf;
    struct unwind_manager *unwind; /* NULL: frame pointers only */
    /* The sampler file every in-process target maps, with its probes; NULL
     * or without a file: a memfd and probes per process. Set before the
     * first attach, read-only after. */
    const struct inprocess_shared *shared;
    struct process_events *events;    /* NULL: no exit and fork events (their watch list) */
    struct target *slot[HP_MAX_TARGETS]; /* under lock */
    struct targets_settings settings;    /* under lock */
    struct targets_counters counters;    /* under lock; its last_restore_stop_ns unused */
    /* Target stopped at the last restore: atomic loads and stores, not
     * the lock, since a detach may restore with or without it. Out of
     * `counters`, whose copy under the lock would read it plainly while
     * a detach without the lock stores it (a data race TSan reported). */
    uint64_t last_restore_stop_ns;
    /* The calibrated cost of a uprobe sampler's hit, and what each other
     * target of the same library adds (probe_cost.h); zero until
     * calibrated. Under lock. */
    struct probe_cost cost;
    struct targets_callbacks callbacks;
    int stopping; /* atomic: targets_stop_soon() was called */
};

/* `max_targets`: processes profiled at once (0: HP_MAX_TARGETS). */
void targets_init(struct targets *t, struct bpf_state *bpf, struct unwind_manager *unwind,
                  size_t max_targets);
/* Takes new settings (SIGHUP); targets attached already keep their sampler. */
void targets_set_settings(struct targets *t, const struct targets_settings *settings);
/* Detaches everything; with `keep_state`, the BPF counts of the processes
 * stay (pinned) for the next daemon to adopt. */
void targets_destroy(struct targets *t, int keep_state);
/* Says that the daemon is stopping (SIGTERM), before the threads that
 * detach are stopped: a detach under way skips what only tidies the maps
 * and the kept profiles, so that the stop is not held up by it. */
void targets_stop_soon(struct targets *t);

/*
 * Attaches again to the processes a previous daemon profiled (remembered in
 * the pinned maps) that still run, keeping their counts; forgets the rest.
 * Each is held as if a request had just named it (a --pid or a rule adds
 * its own hold). Returns how many were adopted; each running process that
 * could not be adopted is named with its reason in `err` ("" if none).
 */
int targets_adopt(struct targets *t, char *err, size_t errlen);

/* Why to hold a process, for targets_hold(). */
struct hold_request {
    enum hold_kind kind;
    uint64_t until_ns; /* HOLD_FOREVER: no end */
    uint64_t event_ns; /* the exec or fork that asked (CLOCK_MONOTONIC; 0: none) */
    bool just_exec_d;  /* it has just exec'd: -EAGAIN until its dynamic linker has loaded
                        * every library, so the allocator found is the one it binds to */
    bool reattach;     /* a target that exec'd: counted in reattached_total */
    bool fork_child;   /* forked by a target: it runs its parent's sampler already */
    /* The sampler a target rule asks for (NULL: the default, t->sampler);
     * a process already profiled keeps the sampler it has, and one that
     * exec'd the one it asked for. */
    const enum sampler_kind *sampler;
    /* A caller who may hold at most t->max_per_owner targets at once: its
     * uid (NULL: no cap, and no owner); over the cap, -EDQUOT. A target
     * with an owner is detached, not attached again, when it execs: the
     * new program may not be its owner's to profile. */
    const uid_t *owner;
    /* The process's start time (clock ticks since boot, as process_facts
     * has it) when the caller found it (a selector): -ESRCH if `pid` names
     * another process by then, which is never attached in its place. 0:
     * whichever process has the pid. */
    uint64_t started;
    /* If not NULL: what this call attached (->pid 0 if it attached nothing). */
    struct target_info *attached;
};

/*
 * Makes sure process `pid` is profiled, attaching if it is not, and adds
 * the hold `why`. Returns 0, -ESRCH (no such process; a target that has
 * just exited gets its last profile kept first), -EACCES/-EPERM (not
 * allowed), -ENOSPC (too many targets), -ENOENT (no allocator found),
 * -EAGAIN (just_exec_d, and not yet loaded) or another -errno, with a
 * one-line reason in `err`. A request for a process being attached or
 * detached waits for that to finish.
 */
int targets_hold(struct targets *t, pid_t pid, const struct hold_request *why, char *err,
                 size_t errlen);

/* targets_hold() with a whole set of holders (those a target kept
 * across its exec, say); `how` says when, not why. */
int targets_hold_set(struct targets *t, pid_t pid, const struct holders *holders,
                     const struct hold_request *how, char *err, size_t errlen);

/* Drops one hold of `kind` of `pid` (a window that closed); if nothing
 * holds it any more it is detached now, no last profile kept. */
void targets_release(struct targets *t, pid_t pid, enum hold_kind kind);

/* As a fork's parent, target `pid` is: 1 live (its holders, sampler and
 * owner filled in), 0 still attaching (a child forked now is attached once
 * it is live), or -1 not a target. */
int targets_fork_parent(struct targets *t, pid_t pid, struct holders *holders,
                        enum sampler_kind *sampler, bool *owned, uid_t *owner);

/* The holders of target `pid`, and the sampler in use in it if `sampler`
 * is not NULL (false if it is not a target). */
bool targets_holders_of(struct targets *t, pid_t pid, struct holders *out,
                        enum sampler_kind *sampler);

/*
 * Takes the allocator probes a child inherited from its profiled parent
 * out of process `pid`, which cannot be profiled itself (--max-targets):
 * the kernel leaves the parent's breakpoints in a forked child's memory,
 * where every call traps for nothing, until a link on those functions is
 * removed; so one is made for the child and removed at once. Slow (two
 * RCU waits). 0, or -errno with why in `err`.
 */
int targets_scrub_inherited(struct targets *t, pid_t pid, char *err, size_t errlen);

/* Counts a child of `parent` that could not be profiled. */
void targets_note_unprofiled_fork(struct targets *t, pid_t parent);

/* Detaches from processes that exited or whose pid now names another
 * process, attaches afresh to processes that exec'd, and refreshes the
 * unwind tables of the rest (dlopen): the scan behind the events. */
void targets_reap(struct targets *t);

/* Detaches the targets nothing holds any more at `now_ns`, keeping each
 * one's last profile (on_farewell, END_IDLE). Returns how many. */
size_t targets_expire(struct targets *t, uint64_t now_ns);

/* Process `pid` exited (its exit event, or a request that found it gone):
 * keeps its last profile and detaches it, once; waits if that is under way. */
void targets_exited(struct targets *t, pid_t pid);
/* targets_exited() of the `n` processes `pids` at once: their probes
 * released together and their rows forgotten in one pass over the maps. */
void targets_exited_many(struct targets *t, const pid_t *pids, size_t n);

/* targets_exited() of every target whose process is gone (a zombie, or
 * reaped), for a request about to read the kept profiles: the exit events
 * may not have been acted on yet. */
void targets_settle_exits(struct targets *t);

/* Process `pid` exec'd at `event_ns` (its exec event): if it is a target
 * attached before that, its probes on the old program go and its holders
 * are put in *kept and the sampler it asked for in *sampler, to attach it
 * afresh once the new program is loaded (targets_hold_set(),
 * just_exec_d). Returns whether it was one. */
bool targets_exec_d(struct targets *t, pid_t pid, uint64_t event_ns, struct holders *kept,
                    enum sampler_kind *sampler);

#endif
