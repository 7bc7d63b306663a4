/*
 * heap_profile.c - builds a pprof heap profile from the BPF counts of one
 * process (see heap_profile.h).
 */
#include "heap_profile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "profile_frames.h"
#include "proc_maps.h"

/* Rounds a fixed-point value with `shift` fractional bits; negatives (a
 * free seen before its allocation's counts landed) read as 0. */
static int64_t fixed_to_int(int64_t v, int shift)
{
    if (v <= 0)
        return 0;
    return (int64_t)(((uint64_t)v + (1ULL << (shift - 1))) >> shift);
}

/* Adds one sample for one stack, with `labels` (n_labels of them). */
static int add_sample(struct profile_frames *frames, struct pprof_profile *p,
                      struct bpf_state *bpf, const struct stack_counts *sc,
                      const struct pprof_label *labels, size_t n_labels)
{
    struct hp_stack st;
    uint64_t ret[HP_MAX_FRAMES], locs[HP_MAX_FRAMES];
    size_t n = 0;
    if (bpf_state_read_stack(bpf, sc->stack_id, &st) != 0)
        return 0; /* a stack we cannot read is reported by the stats comments */
    size_t len = st.len < HP_MAX_FRAMES ? st.len : HP_MAX_FRAMES;
    for (size_t i = 0; i < len; i++)
        ret[i] = st.frames[i];
    int e = profile_frames_stack(frames, ret, len, locs, &n);
    if (e)
        return e;
    int64_t values[4] = {
        fixed_to_int((int64_t)sc->counts.alloc_objects, HP_OBJ_SHIFT),
        fixed_to_int((int64_t)sc->counts.alloc_bytes, HP_BYTES_SHIFT),
        fixed_to_int(sc->counts.inuse_objects, HP_OBJ_SHIFT),
        fixed_to_int(sc->counts.inuse_bytes, HP_BYTES_SHIFT),
    };
    return pprof_add_sample(p, locs, n, values, 4, labels, n_labels);
}

/* Profile-wide fields: sample types, period, time, and what was dropped. */
static int add_header(struct pprof_profile *p, struct bpf_state *bpf,
                      const struct heap_profile_spec *s)
{
    static const char *const types[4][2] = {
        {"alloc_objects", "count"},
        {"alloc_space", "bytes"},
        {"inuse_objects", "count"},
        {"inuse_space", "bytes"},
    };
    int e = 0;
    for (int i = 0; i < 4 && e == 0; i++)
        e = pprof_add_sample_type(p, types[i][0], types[i][1]);
    if (e == 0)
        e = pprof_set_period(p, "space", "bytes", (int64_t)bpf->sample_interval);
    if (e == 0)
        e = pprof_set_default_sample_type(p, s->default_alloc ? "alloc_space" : "inuse_space");
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    pprof_set_time(p, (int64_t)now.tv_sec * 1000000000 + now.tv_nsec, s->duration_ns);

    uint64_t stats[HP_STAT_COUNT];
    if (e == 0 && bpf_state_read_stats(bpf, stats) == 0) {
        char line[160];
        if (s->pid)
            snprintf(line, sizeof(line), "heapprofd: pid %d, sample interval %llu bytes",
                     (int)s->pid, (unsigned long long)bpf->sample_interval);
        else
            snprintf(line, sizeof(line), "heapprofd: %s, sample interval %llu bytes",
                     s->scope ? s->scope : "all profiled processes",
                     (unsigned long long)bpf->sample_interval);
        e = pprof_add_comment(p, line);
        /* Losses are daemon-wide counters: say so when any happened. */
        for (int i = HP_STAT_STACK_COLLISION; i < HP_STAT_COUNT && e == 0; i++) {
            if (!stats[i])
                continue;
            snprintf(line, sizeof(line), "heapprofd (all processes): %s = %llu",
                     bpf_state_stat_name((enum hp_stat)i), (unsigned long long)stats[i]);
            e = pprof_add_comment(p, line);
        }
    }
    return e;
}

/* Adds one process's samples to `p`. -ESRCH if it is gone and has no maps. */
static int add_part(struct bpf_state *bpf, struct symbol_cache *cache, struct pprof_profile *p,
                    const struct heap_profile_spec *spec, const struct heap_profile_part *part,
                    int label, int first)
{
    struct proc_maps own = {0};
    const struct proc_maps *maps = part->maps;
    struct profile_frames *frames = NULL;
    if (!maps) {
        int e = proc_maps_read(part->pid, &own);
        if (e)
            return e;
        maps = &own;
    }
    char pid_text[16];
    snprintf(pid_text, sizeof(pid_text), "%d", (int)part->pid);
    struct pprof_label labels[2] = {{"pid", pid_text}, {"comm", part->comm ? part->comm : ""}};
    int e = profile_frames_new(part->pid, maps, cache, p, spec->symbolize, &frames);
    if (e == 0 && part->exited_start)
        profile_frames_set_exited(frames, part->exited_start, part->exited_exe);
    if (e == 0 && first)
        profile_frames_add_main(frames); /* pprof takes the first mapping as the main binary */
    for (size_t i = 0; i < part->n && e == 0; i++)
        e = add_sample(frames, p, bpf, &part->counts[i], labels, label ? 2 : 0);
    if (e == 0)
        e = profile_frames_finish(frames);
    profile_frames_free(frames);
    proc_maps_free(&own);
    return e;
}

int heap_profile_build_parts(struct bpf_state *bpf, struct symbol_cache *cache,
                             const struct heap_profile_spec *spec,
                             const struct heap_profile_part *parts, size_t nparts, int label,
                             struct pprof_profile **out, char *err, size_t errlen)
{
    struct pprof_profile *p = pprof_new();
    int e = p ? add_header(p, bpf, spec) : -ENOMEM;
    int added = 0;
    for (size_t i = 0; i < nparts && e == 0; i++) {
        e = add_part(bpf, cache, p, spec, &parts[i], label, added == 0);
        if (e == 0)
            added++;
        else if (e == -ESRCH && spec->pid == 0)
            e = 0; /* exited meanwhile: the others (or none) still make a profile */
    }
    if (e) {
        if (e == -ESRCH)
            snprintf(err, errlen, "process %d does not exist", (int)spec->pid);
        else
            snprintf(err, errlen, "build the profile of %s: %s",
                     spec->pid ? "the process" : "all processes", strerror(-e));
        pprof_free(p);
        return e;
    }
    *out = p;
    return 0;
}

int heap_profile_delta(const struct stack_counts *before, size_t nbefore,
                       const struct stack_counts *after, size_t nafter, struct stack_counts **out,
                       size_t *nout)
{
    struct stack_counts *v = calloc(nafter ? nafter : 1, sizeof(*v));
    struct stack_counts *sorted = calloc(nbefore ? nbefore : 1, sizeof(*sorted));
    if (!v || !sorted) {
        free(v);
        free(sorted);
        return -ENOMEM;
    }
    if (nbefore)
        memcpy(sorted, before, nbefore * sizeof(*sorted));
    qsort(sorted, nbefore, sizeof(*sorted), stack_counts_by_id);
    size_t n = 0;
    for (size_t i = 0; i < nafter; i++) {
        struct stack_counts d = after[i];
        const struct stack_counts *old =
            bsearch(&d, sorted, nbefore, sizeof(*sorted), stack_counts_by_id);
        if (old) {
            d.counts.alloc_objects -= old->counts.alloc_objects;
            d.counts.alloc_bytes -= old->counts.alloc_bytes;
        }
        if (d.counts.alloc_objects == 0 && d.counts.inuse_objects <= 0)
            continue;
        v[n++] = d;
    }
    free(sorted);
    *out = v;
    *nout = n;
    return 0;
}
