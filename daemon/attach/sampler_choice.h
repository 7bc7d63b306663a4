/*
 * sampler_choice.h - which sampler decides what to sample in a process:
 * uprobes on every allocator call (the default), or the in-process sampler
 * (daemon/inject/, sampler/) whose wrappers reach a uprobe only for sampled
 * calls; and attaching the latter to one process, with its report probes.
 *
 * Ownership: a struct inprocess_target owns its links; release it with
 * inprocess_detach().
 */
#ifndef HEAPPROF_SAMPLER_CHOICE_H
#define HEAPPROF_SAMPLER_CHOICE_H

#include <stddef.h>
#include <sys/types.h>

#include "allocator.h"
#include "bpf_state.h"
#include "inject.h"

enum sampler_kind {
    SAMPLER_UPROBE = 0, /* uprobes on the allocator's functions */
    SAMPLER_INPROCESS,  /* the sampler injected into the process */
};

/* "uprobe" or "inprocess". */
const char *sampler_name(enum sampler_kind k);
/* Parses a sampler name; -EINVAL if it is none. */
int sampler_parse(const char *s, enum sampler_kind *out);

/* A process profiled by the in-process sampler. */
struct inprocess_target {
    struct inject_state inj;
    struct bpf_link *links[2]; /* classic layout: one per report function */
    int link_fd;               /* other layouts: one uprobe_multi link, or -1 */
};

/*
 * Injects the sampler into process `pid` for the functions of `plan` and
 * attaches the report probe. Returns 0, or -errno with the reason in `err`
 * (the caller falls back to uprobes); on failure nothing is left patched.
 */
int inprocess_attach(struct bpf_state *bpf, pid_t pid, const struct allocator_plan *plan,
                     struct inprocess_target *it, char *err, size_t errlen);

/* Restores the process's allocator entries and removes the report probes.
 * Returns how long the process was stopped for the restore, in ns. */
uint64_t inprocess_detach(struct inprocess_target *it);

#endif
