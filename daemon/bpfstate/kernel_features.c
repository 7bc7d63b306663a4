/*
 * kernel_features.c - probes what the running kernel's BPF accepts (see
 * kernel_features.h). Links are probed by making one on a function of our
 * own with a two-instruction program, helpers and program types through
 * libbpf's probes, and kernel structures' fields in the kernel's BTF:
 * each probe costs microseconds, where a refused load of heapprof.bpf.c
 * costs a whole verification (seconds on a slow machine).
 */
#include "kernel_features.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "uprobe_link.h"

/* The name, first kernel and loss of each feature, in enum order. */
static const struct {
    const char *name, *since, *loss;
} features[KF_COUNT] = {
    [KF_UPROBE_MULTI] = {"uprobe_multi", "6.6",
                         "probes attach as one perf uprobe per function and process (the "
                         "classic layout): slower attach and detach"},
    [KF_UPROBE_SESSION] = {"uprobe_session", "6.13",
                           "every call of a probed allocator also traps at its return, "
                           "sampled or not (uprobe sampler only)"},
    [KF_SYSCALL_PROGS] = {"syscall_programs", "5.14",
                          "the in-process sampler's frees of sampled pointers trap one by "
                          "one instead of going through its ring"},
    [KF_BPF_LOOP] = {"bpf_loop", "5.17", "no stacks from unwind tables: heapprofd cannot load"},
    [KF_FIND_VMA] = {"bpf_find_vma", "5.17",
                     "frame-pointer steps are not checked against the process's mappings"},
    [KF_RETURN_INSTANCES] = {"return_instances", "CO-RE",
                             "return addresses hidden by another tool's uretprobe are not "
                             "recovered: such stacks lose their callers"},
};

const char *kernel_feature_name(enum kernel_feature f)
{
    return (unsigned)f < KF_COUNT ? features[f].name : "unknown";
}

const char *kernel_feature_since(enum kernel_feature f)
{
    return (unsigned)f < KF_COUNT ? features[f].since : "?";
}

const char *kernel_feature_loss(enum kernel_feature f)
{
    return (unsigned)f < KF_COUNT ? features[f].loss : "";
}

/* Whether a link of `attach_type` can be made: a kprobe-type program that
 * returns 0, loaded for that attach type and linked to a function of ours.
 * A kernel without the link type refuses the link (EINVAL), or already
 * the program's attach type. */
static bool link_works(uint32_t attach_type, bool *loaded)
{
    const struct bpf_insn insns[] = {
        {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
        {.code = BPF_JMP | BPF_EXIT},
    };
    LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = attach_type);
    int fd = bpf_prog_load(BPF_PROG_TYPE_KPROBE, "hp_probe", "GPL", insns, 2, &opts);
    if (fd < 0)
        return false;
    *loaded = true;
    bool ok = uprobe_link_supported(fd, attach_type) == 0;
    close(fd);
    return ok;
}

/* Whether the kernel's BTF has `struct sname` with a member `member`. */
static bool btf_has_member(const struct btf *btf, const char *sname, const char *member)
{
    if (!btf)
        return false;
    int id = btf__find_by_name_kind(btf, sname, BTF_KIND_STRUCT);
    if (id < 0)
        return false;
    const struct btf_type *t = btf__type_by_id(btf, (__u32)id);
    const struct btf_member *m = btf_members(t);
    for (unsigned i = 0; i < btf_vlen(t); i++, m++)
        if (strcmp(btf__name_by_offset(btf, m->name_off), member) == 0)
            return true;
    return false;
}

const char *kernel_features_btf_path(void)
{
#ifdef HEAPPROF_TEST_HOOKS
    const char *p = getenv("HEAPPROFD_TEST_BTF");
    return p && *p ? p : NULL;
#else
    return NULL;
#endif
}

void kernel_features_probe(struct kernel_features *kf)
{
    memset(kf, 0, sizeof(*kf));
    struct utsname u;
    if (uname(&u) == 0)
        snprintf(kf->release, sizeof(kf->release), "%s", u.release);
    kf->has[KF_UPROBE_MULTI] = link_works(HP_BPF_TRACE_UPROBE_MULTI, &kf->probed);
    kf->has[KF_UPROBE_SESSION] = kf->has[KF_UPROBE_MULTI] &&
                                 link_works(HP_BPF_TRACE_UPROBE_SESSION, &kf->probed);
    kf->has[KF_SYSCALL_PROGS] = libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_SYSCALL, NULL) == 1;
    kf->has[KF_BPF_LOOP] = libbpf_probe_bpf_helper(BPF_PROG_TYPE_KPROBE, BPF_FUNC_loop, NULL) == 1;
    kf->has[KF_FIND_VMA] =
        libbpf_probe_bpf_helper(BPF_PROG_TYPE_KPROBE, BPF_FUNC_find_vma, NULL) == 1;
    /* The fields hidden_returns.bpf.h reads; it checks them itself at load
     * (bpf_core_field_exists), this is what the daemon reports. */
    const char *custom = kernel_features_btf_path();
    struct btf *btf = custom ? btf__parse(custom, NULL) : btf__load_vmlinux_btf();
    if (libbpf_get_error(btf))
        btf = NULL;
    kf->has[KF_RETURN_INSTANCES] = btf_has_member(btf, "uprobe_task", "return_instances") &&
                                   btf_has_member(btf, "return_instance", "orig_ret_vaddr") &&
                                   btf_has_member(btf, "return_instance", "stack") &&
                                   btf_has_member(btf, "return_instance", "next");
    btf__free(btf);
}

size_t kernel_features_missing(const struct kernel_features *kf, char *out, size_t len)
{
    size_t n = 0, used = 0;
    if (len)
        out[0] = '\0';
    if (!kf->probed)
        return 0;
    for (int f = 0; f < KF_COUNT; f++) {
        if (kf->has[f])
            continue;
        if (used < len) {
            int w = snprintf(out + used, len - used, "%s%s (%s): %s", n ? "; " : "",
                             features[f].name, features[f].since, features[f].loss);
            used += w > 0 ? (size_t)w : 0;
        }
        n++;
    }
    return n;
}
