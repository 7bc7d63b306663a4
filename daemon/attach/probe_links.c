/*
 * probe_links.c - attaches and detaches the allocator probes of one
 * process in the probe layout in use (see probe_links.h).
 */
#include "probe_links.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "uprobe_link.h"

/* Attaches one probe; returns the link or NULL with errno set. */
static struct bpf_link *attach_probe(struct bpf_program *prog, pid_t pid,
                                     const struct allocator_func *f, uint64_t cookie, int retprobe)
{
    LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = cookie, .retprobe = retprobe);
    struct bpf_link *link =
        bpf_program__attach_uprobe_opts(prog, pid, f->open_path, (size_t)f->file_offset, &opts);
    if (!link && errno == 0)
        errno = EINVAL;
    return link;
}

/* Classic layout: a perf-event uprobe per function, and a uretprobe per
 * allocating function. */
static int attach_classic(struct bpf_state *bpf, pid_t pid, size_t slot,
                          const struct allocator_plan *plan, struct probe_links *out, char *err,
                          size_t errlen)
{
    /* free's probes first: see attach_object_link(). */
    for (size_t k = 0; k < 2 * plan->n; k++) {
        const struct allocator_func *f = &plan->funcs[k % plan->n];
        if ((f->kind == HP_FREE) != (k < plan->n))
            continue;
        uint64_t cookie = HP_COOKIE(slot, f->kind);
        struct bpf_link *l = attach_probe(bpf_state_entry_program(bpf), pid, f, cookie, 0);
        if (l)
            out->links[out->nlinks++] = l;
        if (l && f->kind != HP_FREE) {
            l = attach_probe(bpf_state_return_program(bpf), pid, f, cookie, 1);
            if (l)
                out->links[out->nlinks++] = l;
        }
        if (!l) {
            int e = errno;
            snprintf(err, errlen, "attach uprobe to %s:%s (offset 0x%llx) for pid %d: %s",
                     f->object_path, f->name, (unsigned long long)f->file_offset, (int)pid,
                     strerror(e));
            return -e;
        }
    }
    return 0;
}

/* One link of `prog_fd` over the functions of object `obj` (all of them, or
 * only the allocating ones). */
static int attach_object_link(pid_t pid, size_t slot, const struct allocator_plan *plan,
                              const char *obj, int prog_fd, uint32_t attach_type, uint32_t flags,
                              int alloc_only, struct probe_links *out, char *err, size_t errlen)
{
    uint64_t offsets[HP_MAX_FUNCS], cookies[HP_MAX_FUNCS];
    uint32_t cnt = 0;
    const char *path = NULL;
    /* The kernel registers a link's offsets one after the other, in this
     * order, each over every process mapping the file (milliseconds for
     * libc): free's first, so that no allocation is recorded while its
     * free could go unseen (a forked child that frees everything and
     * exits showed megabytes in use, test_fork_children.py). */
    for (int frees = 1; frees >= 0; frees--)
        for (size_t i = 0; i < plan->n; i++) {
            const struct allocator_func *f = &plan->funcs[i];
            if (strcmp(f->object_path, obj) != 0 || (f->kind == HP_FREE) != frees ||
                (alloc_only && f->kind == HP_FREE))
                continue;
            path = path ? path : f->open_path;
            offsets[cnt] = f->file_offset;
            cookies[cnt] = HP_COOKIE(slot, f->kind);
            cnt++;
        }
    if (cnt == 0)
        return 0;
    int fd = uprobe_link_create(prog_fd, attach_type, path, offsets, cookies, cnt, flags, pid);
    if (fd < 0) {
        snprintf(err, errlen, "attach %u uprobes to %s for pid %d: %s", cnt, obj, (int)pid,
                 strerror(-fd));
        return fd;
    }
    out->fds[out->nfds++] = fd;
    return 0;
}

/* Session and multi layouts: links per object the allocator lives in. */
static int attach_links(struct bpf_state *bpf, pid_t pid, size_t slot,
                        const struct allocator_plan *plan, struct probe_links *out, char *err,
                        size_t errlen)
{
    int e = 0;
    for (size_t i = 0; i < plan->n && e == 0; i++) {
        const char *obj = plan->funcs[i].object_path;
        int seen = 0;
        for (size_t j = 0; j < i; j++)
            seen |= strcmp(plan->funcs[j].object_path, obj) == 0;
        if (seen)
            continue;
        if (bpf->layout == LAYOUT_SESSION) {
            e = attach_object_link(pid, slot, plan, obj, bpf_state_session_fd(bpf),
                                   HP_BPF_TRACE_UPROBE_SESSION, 0, 0, out, err, errlen);
            continue;
        }
        e = attach_object_link(pid, slot, plan, obj, bpf_state_entry_fd(bpf),
                               HP_BPF_TRACE_UPROBE_MULTI, 0, 0, out, err, errlen);
        if (e == 0)
            e = attach_object_link(pid, slot, plan, obj, bpf_state_return_fd(bpf),
                                   HP_BPF_TRACE_UPROBE_MULTI, HP_BPF_F_UPROBE_MULTI_RETURN, 1, out,
                                   err, errlen);
    }
    return e;
}

int probe_links_attach(struct bpf_state *bpf, pid_t pid, size_t slot,
                       const struct allocator_plan *plan, struct probe_links *out, char *err,
                       size_t errlen)
{
    if (bpf->layout == LAYOUT_CLASSIC)
        return attach_classic(bpf, pid, slot, plan, out, err, errlen);
    return attach_links(bpf, pid, slot, plan, out, err, errlen);
}

void probe_links_release(struct probe_links *l)
{
    for (size_t i = 0; i < l->nlinks; i++)
        bpf_link__destroy(l->links[i]);
    for (size_t i = 0; i < l->nfds; i++)
        close(l->fds[i]);
    l->nlinks = l->nfds = 0;
}
