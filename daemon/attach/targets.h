/*
 * targets.h - the processes being profiled: attaching the allocator probes
 * to a process (synchronously, so that every later allocation is seen),
 * detaching from processes that exited, and telling a reused pid from the
 * process we attached to.
 *
 * All functions take the table's lock; they may be called from any thread.
 * The slow part of an attach (reading the process's ELF files, building
 * its unwind tables, making the links) runs outside it, with the slot
 * reserved, so that requests for the index and /metrics and other
 * attaches go on meanwhile.
 */
#ifndef HEAPPROF_TARGETS_H
#define HEAPPROF_TARGETS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bpf_state.h"
#include "hp_limits.h"
#include "proc_maps.h"
#include "process_match.h"
#include "sampler_choice.h"
#include "unwind_manager.h"

struct target;

/* A copy of what a caller may know about one target. */
struct target_info {
    pid_t pid;
    char comm[17];
    char allocator[256];   /* the object whose malloc is probed */
    size_t nfuncs;         /* allocator functions probed */
    size_t emulated;       /* of which probed on an instruction the kernel emulates */
    const char *sampler;   /* "uprobe" or "inprocess": the one in use (static string) */
    char sampler_note[256]; /* why the in-process sampler was not used, or "" */
    uint64_t attached_ns;  /* CLOCK_MONOTONIC when this daemon attached (or adopted) it */
};

/* Called as a target's exit is noticed, before its BPF state goes: its
 * comm, exe and cgroup and its last memory map, as read at the previous
 * scan, stand in for /proc. */
typedef void (*targets_exit_fn)(void *arg, pid_t pid, const struct process_facts *facts,
                                const struct proc_maps *maps);

/* The table of profiled processes; its slot index is the BPF image slot. */
struct targets {
    pthread_mutex_t lock;
    pthread_cond_t attached; /* broadcast when an attach finishes, for requests waiting on it */
    struct bpf_state *bpf;
    struct unwind_manager *unwind; /* NULL: frame pointers only */
    struct target *slot[HP_MAX_TARGETS]; /* under lock */
    uint64_t attach_errors;    /* under lock */
    uint64_t attached_total;   /* under lock */
    uint64_t detached_total;   /* under lock */
    uint64_t reattached_total; /* under lock: processes attached again after exec */
    uint64_t last_attach_ns;   /* under lock: how long the last attach took */
    uint64_t last_detach_ns;   /* under lock: how long removing the last target's probes took */
    size_t max_targets;        /* under lock: processes profiled at once */
    size_t max_per_owner;      /* under lock: targets one owner may hold (0: no limit) */
    enum sampler_kind sampler; /* under lock: the sampler new targets get (--sampler) */
    uint64_t inprocess_fallbacks;  /* under lock: in-process asked, uprobes used */
    uint64_t last_inject_stop_ns;  /* under lock: target stopped at the last injection */
    uint64_t last_restore_stop_ns; /* atomic: target stopped at the last restore */
    targets_exit_fn on_exit;   /* NULL: nothing kept of exited processes */
    void *on_exit_arg;
};

/* `max_targets`: processes profiled at once (0: HP_MAX_TARGETS). */
void targets_init(struct targets *t, struct bpf_state *bpf, struct unwind_manager *unwind,
                  size_t max_targets);
/* Detaches everything; with `keep_state`, the BPF counts of the processes
 * stay (pinned) for the next daemon to adopt. */
void targets_destroy(struct targets *t, int keep_state);

/*
 * Attaches again to the processes a previous daemon profiled (remembered in
 * the pinned maps) that still run, keeping their counts; forgets the rest.
 * Returns how many were adopted; each running process that could not be
 * adopted is named with its reason in `err` ("" if none), its counts gone.
 */
int targets_adopt(struct targets *t, char *err, size_t errlen);

/*
 * Makes sure process `pid` is profiled, attaching if it is not. Returns 0,
 * -ESRCH (no such process), -EACCES/-EPERM (not allowed), -ENOSPC (too many
 * targets), -ENOENT (no allocator found) or another -errno, with a one-line
 * reason in `err`. A request for a process another request is attaching
 * waits for that attach.
 */
int targets_ensure(struct targets *t, pid_t pid, char *err, size_t errlen);

/*
 * targets_ensure() for a caller who may hold at most t->max_per_owner
 * targets at once: `owner` is its uid (NULL: no cap, and no owner), with
 * the sampler a target rule asks for (enum sampler_kind; -1: the default,
 * t->sampler; a process already profiled keeps the sampler it has). Over
 * the cap it returns -EDQUOT. If this call attached the process, and
 * `attached` is not NULL, *attached describes it (else attached->pid is 0).
 * A target with an owner is detached, not attached again, when it execs:
 * the new program may not be its owner's to profile.
 */
int targets_ensure_for(struct targets *t, pid_t pid, const uid_t *owner, int sampler,
                       struct target_info *attached, char *err, size_t errlen);

/* targets_ensure_for() of the process that started at `started` (clock
 * ticks since boot, as process_facts has it; 0: whichever has the pid
 * now): -ESRCH if `pid` names another process by then, which is never
 * attached in its place. */
int targets_ensure_started(struct targets *t, pid_t pid, uint64_t started, const uid_t *owner,
                           int sampler, struct target_info *attached, char *err, size_t errlen);

/* Detaches from processes that exited or whose pid now names another
 * process, attaches afresh to processes that exec'd, and refreshes the
 * unwind tables of the rest (dlopen). */
void targets_reap(struct targets *t);

/* Copies up to `cap` targets into `out`; returns how many there are. */
size_t targets_list(struct targets *t, struct target_info *out, size_t cap);

#endif
