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

#include "entry_families.h"
#include "free_ring.h"
#include "proc_info.h"
#include "report_opt.h"
#include "sampler_image.h"
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

/* What the callbacks need. */
struct ready_ctx {
    struct bpf_state *bpf;
    struct inprocess_target *it;
    const struct process_identity *who;
};

/* The process stopped is the one approved: same start, same executable,
 * and for an unprivileged owner still all its own and dumpable. */
static int same_process(void *arg, pid_t pid, char *err, size_t errlen)
{
    const struct process_identity *who = ((struct ready_ctx *)arg)->who;
    uint64_t start_time;
    dev_t dev;
    ino_t ino;
    if (proc_start_time(pid, &start_time) != 0 || start_time != who->start_time) {
        snprintf(err, errlen, "process %d is gone", (int)pid);
        return -ESRCH;
    }
    if (who->exe_ino && (proc_exe_identity(pid, &dev, &ino) != 0 || dev != who->exe_dev ||
                         ino != who->exe_ino)) {
        snprintf(err, errlen, "process %d runs another executable than the one approved",
                 (int)pid);
        return -ESTALE;
    }
    unsigned uids[3], gids[3];
    uid_t dump_owner;
    if (who->owned && (proc_status_ids(pid, uids, gids, &dump_owner) != 0 ||
                       uids[0] != who->owner || uids[1] != who->owner ||
                       uids[2] != who->owner || dump_owner != who->owner)) {
        snprintf(err, errlen, "process %d is no longer uid %u's own and dumpable", (int)pid,
                 (unsigned)who->owner);
        return -EACCES;
    }
    return 0;
}

/* Attaches the report probes to the sampler file at `path` for process
 * `pid` (-1: every process that maps it). */
static int attach_report_links(struct bpf_state *bpf, const char *path, uint64_t report_free,
                               uint64_t report_alloc, uint64_t report_alloc_opt, pid_t pid,
                               struct report_links *out, char *err, size_t errlen)
{
    /* The free probe first: in a forked child the wrappers already call
     * both, and an allocation recorded before the free probe is in would
     * have its free missed (a false in-use). */
    uint64_t offsets[3] = {report_free, report_alloc, report_alloc_opt};
    uint64_t cookies[3] = {HP_REPORT_FREE, HP_REPORT_ALLOC, HP_REPORT_ALLOC};
    if (bpf->layout == LAYOUT_CLASSIC) {
        for (int i = 0; i < 3; i++) {
            LIBBPF_OPTS(bpf_uprobe_opts, opts, .bpf_cookie = cookies[i]);
            out->links[i] = bpf_program__attach_uprobe_opts(bpf_state_report_program(bpf), pid,
                                                            path, (size_t)offsets[i], &opts);
            if (!out->links[i]) {
                int e = errno ? errno : EINVAL;
                snprintf(err, errlen, "attach the report probe to %s: %s", path, strerror(e));
                return -e;
            }
        }
        return 0;
    }
    int fd = uprobe_link_create(bpf_state_report_fd(bpf), HP_BPF_TRACE_UPROBE_MULTI, path,
                                offsets, cookies, 3, 0, pid < 0 ? 0 : pid);
    if (fd < 0) {
        snprintf(err, errlen, "attach the report probes to %s: %s", path, strerror(-fd));
        return fd;
    }
    out->link_fd = fd;
    return 0;
}

static void release_links(struct report_links *l)
{
    for (int i = 0; i < 3; i++) {
        if (l->links[i])
            bpf_link__destroy(l->links[i]);
        l->links[i] = NULL;
    }
    if (l->link_fd >= 0)
        close(l->link_fd);
    l->link_fd = -1;
}

/* Makes the process's reports count before any slot points at the
 * sampler, so that no sample is lost: its own probes first if its sampler
 * is not the shared file (on our own descriptor of it, s->text_path, never
 * on a path the process could redirect), then its entry in `reporting`. */
static int attach_reports(void *arg, const struct inject_state *s, char *err, size_t errlen)
{
    struct ready_ctx *c = arg;
    int e = s->shared ? 0
                      : attach_report_links(c->bpf, s->text_path, s->report_free,
                                            s->report_alloc, s->report_alloc_opt, s->pid,
                                            &c->it->own, err, errlen);
    if (e == 0 && (e = bpf_state_set_reporting(c->bpf, (uint32_t)s->pid, true)) != 0)
        snprintf(err, errlen, "count the reports of pid %d: %s", (int)s->pid, strerror(-e));
    return e;
}

int inprocess_shared_open(struct bpf_state *bpf, const char *dir, struct inprocess_shared *out,
                          char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    out->file.fd = -1;
    out->links.link_fd = -1;
    uint64_t report_free, report_alloc, report_alloc_opt;
    const struct sampler_image *img = sampler_image_get(err, errlen);
    if (!img)
        return -ENOEXEC;
    if (sampler_image_report_offsets(img, &report_alloc, &report_free, &report_alloc_opt) != 0) {
        snprintf(err, errlen, "the sampler has no report functions");
        return -ENOENT;
    }
    int e = sampler_file_publish(dir, img, &out->file, err, errlen);
    if (e == 0)
        e = attach_report_links(bpf, out->file.fd_path, report_free, report_alloc,
                                report_alloc_opt, -1, &out->links, err, errlen);
    if (e)
        inprocess_shared_close(out);
    return e;
}

void inprocess_shared_close(struct inprocess_shared *sh)
{
    release_links(&sh->links);
    sampler_file_close(&sh->file);
}

/* The names of the sampler's entries (hp_sampler.h), as the allocator's
 * bindings and the families know them. */
#define NAME_ROW(sym, kind, family) #sym,
static const char *const entry_names[HP_ENTRY_COUNT] = {HP_ALLOC_ENTRIES(NAME_ROW)};
#undef NAME_ROW

int inprocess_plan(const struct allocator_plan *plan, struct inject_plan *out, char *err,
                   size_t errlen)
{
    memset(out, 0, sizeof(*out));
    if (plan->malloc_in_executable) {
        snprintf(err, errlen, "its allocator is linked into the executable, whose own calls go "
                 "through no relocation slot");
        return -ENOENT;
    }
    for (int e = 0; e < HP_ENTRY_COUNT; e++)
        out->orig[e] = allocator_bound(plan, entry_names[e]);
    for (size_t i = 0; i < plan->n && i < HP_MAX_FUNCS; i++) {
        out->range_lo[i] = plan->funcs[i].runtime_start;
        out->range_hi[i] = plan->funcs[i].runtime_end;
        out->nranges++;
    }
    out->dl_iterate_phdr = allocator_bound(plan, "dl_iterate_phdr");
    out->r_debug = plan->r_debug;
    if (!out->orig[HP_E_dlopen] && !out->orig[HP_E_dlmopen]) {
        snprintf(err, errlen, "no dlopen to follow the modules loaded later with");
        return -ENOENT;
    }
    return 0;
}

int inprocess_attach(struct bpf_state *bpf, pid_t pid, const struct process_identity *who,
                     const struct allocator_plan *plan, const struct inprocess_shared *shared,
                     bool fork_child, struct inprocess_target *it, char *err, size_t errlen)
{
    struct inject_plan ip;
    memset(it, 0, sizeof(*it));
    it->own.link_fd = -1;
    it->inj.memfd = -1;
    it->bpf = bpf;
    int e = inprocess_plan(plan, &ip, err, errlen);
    if (e)
        return e;
    ip.shared = shared && shared->file.fd >= 0 ? &shared->file : NULL;
    ip.fork_child = fork_child;
    ip.free_ring = free_ring_wanted(bpf_state_drain_fd(bpf));
    struct ready_ctx c = {.bpf = bpf, .it = it, .who = who};
    e = inject_attach(pid, who->start_time, &ip, bpf->sample_interval, same_process,
                      attach_reports, &c, &it->inj, err, errlen);
    if (e) {
        bpf_state_set_reporting(bpf, (uint32_t)pid, false);
        release_links(&it->own);
    } else {
        /* A failure is logged once per cause, and counted, there. */
        report_opt_enable(pid, it->inj.base, it->inj.status.wipeonfork);
    }
    return e;
}

uint32_t inprocess_families(const struct inprocess_target *it)
{
    uint32_t mask = 0;
    for (int e = 0; e < HP_ENTRY_COUNT; e++) {
        int f = entry_family_of(entry_names[e]);
        if (f >= 0 && it->inj.status.taken_by_entry[e])
            mask |= 1u << f;
    }
    return mask;
}

uint64_t inprocess_detach(struct inprocess_target *it)
{
    char err[256];
    /* Entries first: once restored, no call reaches the report functions. */
    if (inject_detach(&it->inj, err, sizeof(err)) != 0)
        fprintf(stderr, "heapprofd: %s\n", err);
    bpf_state_set_reporting(it->bpf, (uint32_t)it->inj.pid, false);
    release_links(&it->own);
    inject_state_close(&it->inj);
    return it->inj.stopped_ns;
}
