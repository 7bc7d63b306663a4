/*
 * sampler_choice.h - which sampler decides what to sample in a process:
 * the in-process sampler (daemon/inject/, sampler/; the default), whose
 * wrappers reach a uprobe only for sampled calls, or uprobes on every
 * allocator call (the fallback wherever the former cannot be used); and
 * attaching the in-process one to a process, with its report probes.
 *
 * Ownership: a struct inprocess_target owns its links; release it with
 * inprocess_detach().
 */
#ifndef HEAPPROF_SAMPLER_CHOICE_H
#define HEAPPROF_SAMPLER_CHOICE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "allocator.h"
#include "bpf_state.h"
#include "inject.h"
#include "sampler_file.h"

enum sampler_kind {
    SAMPLER_UPROBE = 0, /* uprobes on the allocator's functions */
    SAMPLER_INPROCESS,  /* the sampler injected into the process */
};

/* The sampler a process gets unless a rule or an option says otherwise. */
#define SAMPLER_DEFAULT SAMPLER_INPROCESS

/* Who a process was when it was approved for profiling: checked again on
 * the process actually stopped, so that an exec (of a setuid program, say)
 * in between is not profiled on the strength of the first decision. */
struct process_identity {
    uint64_t start_time;
    dev_t exe_dev;
    ino_t exe_ino; /* 0: not checked */
    int owned;     /* approved for an unprivileged owner: */
    uid_t owner;   /* its every uid must be this one, and it must be dumpable */
};

/* "uprobe" or "inprocess". */
const char *sampler_name(enum sampler_kind k);
/* Parses a sampler name; -EINVAL if it is none. */
int sampler_parse(const char *s, enum sampler_kind *out);

/* Report probes on one file: for one process, or for all (the shared file). */
struct report_links {
    struct bpf_link *links[3]; /* classic layout: one per report function */
    int link_fd;               /* other layouts: one uprobe_multi link, or -1 */
};

/* A process profiled by the in-process sampler. */
struct inprocess_target {
    struct inject_state inj;
    struct report_links own; /* a sampler not mapped from the shared file: its own probes */
    struct bpf_state *bpf;   /* whose `reporting` map names it */
};

/* The sampler file every target maps, and its report probes, made once
 * at start for every process (sampler_file.h). Read-only once made. */
struct inprocess_shared {
    struct sampler_file file;
    struct report_links links;
};

/*
 * Publishes the sampler in `dir` and attaches its report probes for every
 * process. 0, or -errno with the reason in `err`: then every target gets
 * a memfd of its own and its own probes, as the shared file's absence
 * costs only speed. Release with inprocess_shared_close().
 */
int inprocess_shared_open(struct bpf_state *bpf, const char *dir, struct inprocess_shared *out,
                          char *err, size_t errlen);
void inprocess_shared_close(struct inprocess_shared *sh);

/* What the sampler is told of a process whose allocator is `plan`: where
 * each entry binds, the allocator's code, the loader's functions. -ENOENT
 * with the reason when the process has no dlopen to follow. */
int inprocess_plan(const struct allocator_plan *plan, struct inject_plan *out, char *err,
                   size_t errlen);

/*
 * Injects the sampler into process `pid` for the functions of `plan`, from
 * `shared` where it can (NULL: a memfd of its own), and has its reports
 * counted. `fork_child`: forked by a process live on the sampler, whose
 * copy is taken over without a stop when whole. Returns 0, or -errno with
 * the reason in `err` (the caller falls back to uprobes); on failure
 * nothing is left patched.
 */
int inprocess_attach(struct bpf_state *bpf, pid_t pid, const struct process_identity *who,
                     const struct allocator_plan *plan, const struct inprocess_shared *shared,
                     bool fork_child, struct inprocess_target *it, char *err, size_t errlen);

/* The entry families (entry_families.h, a mask) whose slots the installer
 * took in the process at its attach. */
uint32_t inprocess_families(const struct inprocess_target *it);

/* Points the process's slots back, removes the report probes and closes
 * what `it` holds. Returns how long a thread was stopped for it, in ns. */
uint64_t inprocess_detach(struct inprocess_target *it);

#endif
