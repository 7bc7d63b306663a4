/*
 * kernel_features.h - what the running kernel's BPF accepts, probed once at
 * start with tiny programs and the kernel's BTF, before the large object
 * is loaded: so that the daemon loads only the variant the kernel takes
 * (each refused load of the full object costs a whole verification), and
 * can say what it gave up and why. docs/operations.md tables the kernels.
 */
#ifndef HEAPPROF_KERNEL_FEATURES_H
#define HEAPPROF_KERNEL_FEATURES_H

#include <stdbool.h>
#include <stddef.h>

/* One feature heapprofd can use, and the kernel that brought it. */
enum kernel_feature {
    KF_UPROBE_MULTI = 0, /* uprobe_multi links (6.6): one link per file, not per function */
    KF_UPROBE_SESSION,   /* uprobe sessions (6.13): no return trap for unsampled calls */
    KF_SYSCALL_PROGS,    /* BPF_PROG_TYPE_SYSCALL (5.14): the in-process sampler's free ring */
    KF_BPF_LOOP,         /* bpf_loop (5.17): the CFI unwinder's walk */
    KF_FIND_VMA,         /* bpf_find_vma (5.17): frame-pointer steps checked against mappings */
    KF_RETURN_INSTANCES, /* task->utask->return_instances (CO-RE): hidden return addresses */
    KF_COUNT,
};

/* What the kernel has: one flag per feature, and its release. */
struct kernel_features {
    bool probed; /* the probes could load a program at all (not so without privileges) */
    bool has[KF_COUNT];
    char release[65]; /* uname -r */
};

/* Probes the running kernel. Never fails: a probe that cannot run says
 * the feature is missing, and kf->probed is false if none could. */
void kernel_features_probe(struct kernel_features *kf);

/* The kernel BTF that CO-RE relocates against: NULL, the running kernel's,
 * except in builds with HEAPPROF_TEST_HOOKS, where HEAPPROFD_TEST_BTF may
 * name a file that stands for another kernel's. */
const char *kernel_features_btf_path(void);

/* The feature's short name ("uprobe_multi"), as /metrics labels it. */
const char *kernel_feature_name(enum kernel_feature f);

/* The Linux version that brought the feature ("6.6"), or "CO-RE" for a
 * kernel structure's field. */
const char *kernel_feature_since(enum kernel_feature f);

/* What a user loses without the feature: one sentence, no final period. */
const char *kernel_feature_loss(enum kernel_feature f);

/* Writes "name (since): loss; ..." for each missing feature into `out`
 * ("" when none is missing or nothing could be probed); returns how many. */
size_t kernel_features_missing(const struct kernel_features *kf, char *out, size_t len);

#endif
