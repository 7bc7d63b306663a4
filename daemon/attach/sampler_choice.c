/*
 * sampler_choice.c - the choice of sampler and the attachment of the
 * in-process one (see sampler_choice.h).
 */
#include "sampler_choice.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "uprobe_link.h"

const char *sampler_name(enum sampler_kind k)
{
    return k == SAMPLER_INPROCESS ? "inprocess" : "uprobe";
}

int sampler_parse(const char *s, enum sampler_kind *out)
{
    if (strcmp(s, "uprobe") == 0)
        *out = SAMPLER_UPROBE;
    else if (strcmp(s, "inprocess") == 0)
        *out = SAMPLER_INPROCESS;
    else
        return -EINVAL;
    return 0;
}

/* What the ready callback needs. */
struct ready_ctx {
    struct bpf_state *bpf;
    struct inprocess_target *it;
};

/* Attaches the report probe while the process is stopped, before any entry
 * jumps into the sampler: no sample is lost. */
static int attach_reports(void *arg, const struct inject_state *s, char *err, size_t errlen)
{
    struct ready_ctx *c = arg;
    uint64_t offsets[2] = {s->report_alloc, s->report_free};
    uint64_t cookies[2] = {HP_REPORT_ALLOC, HP_REPORT_FREE};
    if (c->bpf->layout == LAYOUT_CLASSIC) {
        for (int i = 0; i < 2; i++) {
            LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = cookies[i]);
            c->it->links[i] = bpf_program__attach_uprobe_opts(
                bpf_state_report_program(c->bpf), s->pid, s->text_path, (size_t)offsets[i], &opts);
            if (!c->it->links[i]) {
                int e = errno ? errno : EINVAL;
                snprintf(err, errlen, "attach the report probe to %s for pid %d: %s",
                         s->text_path, (int)s->pid, strerror(e));
                return -e;
            }
        }
        return 0;
    }
    int fd = uprobe_link_create(bpf_state_report_fd(c->bpf), HP_BPF_TRACE_UPROBE_MULTI,
                                s->text_path, offsets, cookies, 2, 0, s->pid);
    if (fd < 0) {
        snprintf(err, errlen, "attach the report probes to %s for pid %d: %s", s->text_path,
                 (int)s->pid, strerror(-fd));
        return fd;
    }
    c->it->link_fd = fd;
    return 0;
}

static void release_links(struct inprocess_target *it)
{
    for (int i = 0; i < 2; i++) {
        if (it->links[i])
            bpf_link__destroy(it->links[i]);
        it->links[i] = NULL;
    }
    if (it->link_fd >= 0)
        close(it->link_fd);
    it->link_fd = -1;
}

int inprocess_attach(struct bpf_state *bpf, pid_t pid, const struct allocator_plan *plan,
                     struct inprocess_target *it, char *err, size_t errlen)
{
    struct inject_func f[HP_MAX_FUNCS];
    memset(it, 0, sizeof(*it));
    it->link_fd = -1;
    for (size_t i = 0; i < plan->n; i++) {
        const struct allocator_func *a = &plan->funcs[i];
        if (!a->code) {
            snprintf(err, errlen, "the code of %s in %s could not be read whole", a->name,
                     a->object_path);
            return -EINVAL;
        }
        f[i] = (struct inject_func){
            .name = a->name, .addr = a->runtime_start, .code = a->code, .len = a->code_len};
    }
    struct ready_ctx c = {.bpf = bpf, .it = it};
    int e = inject_attach(pid, f, plan->n, bpf->sample_interval, attach_reports, &c, &it->inj,
                          err, errlen);
    if (e)
        release_links(it);
    return e;
}

uint64_t inprocess_detach(struct inprocess_target *it)
{
    char err[256];
    /* Entries first: once restored, no call reaches the report functions. */
    if (inject_detach(&it->inj, err, sizeof(err)) != 0)
        fprintf(stderr, "heapprofd: %s\n", err);
    release_links(it);
    return it->inj.stopped_ns;
}
