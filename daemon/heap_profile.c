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
#include <unistd.h>

#include "allocator.h"
#include "proc_maps.h"

/* Per mapping of /proc/PID/maps: its pprof id once added, and whether every
 * location in it got a function name. */
struct mapping_state {
    int64_t id;
    int all_named;
    struct cached_elf *elf; /* a cache reference, or NULL */
    int elf_tried;
};

/* Everything one build needs. */
struct builder {
    pid_t pid;
    struct pprof_profile *p;
    struct symbol_cache *cache;
    struct proc_maps maps;
    struct mapping_state *ms;
};

/* The ELF file of mapping i, opened on first use; NULL if it has none. */
static struct cached_elf *mapping_elf(struct builder *b, size_t i)
{
    struct mapping_state *s = &b->ms[i];
    if (!s->elf_tried) {
        s->elf_tried = 1;
        if (symbol_cache_get(b->cache, b->pid, &b->maps.v[i], &s->elf) != 0)
            s->elf = NULL;
    }
    return s->elf;
}

/* The pprof id of mapping i, adding it on first use. */
static int64_t mapping_id(struct builder *b, size_t i)
{
    struct mapping_state *s = &b->ms[i];
    if (s->id)
        return s->id;
    const struct proc_mapping *m = &b->maps.v[i];
    struct cached_elf *e = mapping_elf(b, i);
    struct pprof_mapping_desc d = {
        .start = m->start,
        .limit = m->end,
        .offset = m->offset,
        .filename = m->path,
        .build_id = e ? e->build_id : "",
    };
    s->id = pprof_add_mapping(b->p, &d);
    s->all_named = 1;
    return s->id;
}

/* The symbol at code address `pc` of mapping i, or NULL. */
static const char *symbol_at(struct builder *b, size_t i, uint64_t pc)
{
    const struct proc_mapping *m = &b->maps.v[i];
    struct cached_elf *e = mapping_elf(b, i);
    uint64_t vaddr;
    struct elf_symbol sym;
    if (!e || elf_file_offset_to_vaddr(e->ef, pc - m->start + m->offset, &vaddr) != 0 ||
        elf_file_symbolize(e->ef, vaddr, &sym) != 0)
        return NULL;
    return sym.name;
}

/* The location id of return address `ret`; the location holds the call
 * (ret - 1), which is what symbolizers should look up. */
static int64_t location_of(struct builder *b, uint64_t ret)
{
    uint64_t pc = ret - 1;
    const struct proc_mapping *m = proc_maps_find(&b->maps, pc);
    if (!m || !proc_mapping_is_file(m))
        return pprof_location_id(b->p, 0, pc, NULL, 0);
    size_t i = (size_t)(m - b->maps.v);
    int64_t mid = mapping_id(b, i);
    if (mid < 0)
        return mid;
    const char *name = symbol_at(b, i, pc);
    if (!name) {
        b->ms[i].all_named = 0;
        return pprof_location_id(b->p, (uint64_t)mid, pc, NULL, 0);
    }
    int64_t fid = pprof_function_id(b->p, name, name, m->path, 0);
    if (fid < 0)
        return fid;
    struct pprof_line line = {.function_id = (uint64_t)fid, .line = 0};
    return pprof_location_id(b->p, (uint64_t)mid, pc, &line, 1);
}

/* The frames of a stack minus the allocator's own at the leaf end
 * (operator new and the like, which call malloc for the user). */
static size_t skip_allocator_frames(struct builder *b, const struct hp_stack *st)
{
    size_t skip = 0;
    while (skip + 1 < st->len) {
        uint64_t pc = st->frames[skip] - 1;
        const struct proc_mapping *m = proc_maps_find(&b->maps, pc);
        const char *name = m ? symbol_at(b, (size_t)(m - b->maps.v), pc) : NULL;
        if (!name || !allocator_is_allocator_symbol(name))
            break;
        skip++;
    }
    return skip;
}

/* Rounds a fixed-point value with `shift` fractional bits; negatives (a
 * free seen before its allocation's counts landed) read as 0. */
static int64_t fixed_to_int(int64_t v, int shift)
{
    if (v <= 0)
        return 0;
    return (int64_t)(((uint64_t)v + (1ULL << (shift - 1))) >> shift);
}

/* Adds one sample for one stack. */
static int add_sample(struct builder *b, struct bpf_state *bpf, const struct stack_counts *sc)
{
    struct hp_stack st;
    uint64_t locs[HP_MAX_FRAMES];
    size_t n = 0;
    if (bpf_state_read_stack(bpf, sc->stack_id, &st) != 0)
        return 0; /* a stack we cannot read is reported by the stats comments */
    for (size_t f = skip_allocator_frames(b, &st); f < st.len; f++) {
        int64_t id = location_of(b, st.frames[f]);
        if (id < 0)
            return (int)id;
        locs[n++] = (uint64_t)id;
    }
    int64_t values[4] = {
        fixed_to_int((int64_t)sc->counts.alloc_objects, HP_OBJ_SHIFT),
        fixed_to_int((int64_t)sc->counts.alloc_bytes, HP_BYTES_SHIFT),
        fixed_to_int(sc->counts.inuse_objects, HP_OBJ_SHIFT),
        fixed_to_int(sc->counts.inuse_bytes, HP_BYTES_SHIFT),
    };
    return pprof_add_sample(b->p, locs, n, values, 4, NULL, 0);
}

/* Profile-wide fields: sample types, period, time, and what was dropped. */
static int add_header(struct builder *b, struct bpf_state *bpf, const struct heap_profile_spec *s)
{
    static const char *const types[4][2] = {
        {"alloc_objects", "count"},
        {"alloc_space", "bytes"},
        {"inuse_objects", "count"},
        {"inuse_space", "bytes"},
    };
    int e = 0;
    for (int i = 0; i < 4 && e == 0; i++)
        e = pprof_add_sample_type(b->p, types[i][0], types[i][1]);
    if (e == 0)
        e = pprof_set_period(b->p, "space", "bytes", (int64_t)bpf->sample_interval);
    if (e == 0)
        e = pprof_set_default_sample_type(b->p, s->default_alloc ? "alloc_space" : "inuse_space");
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    pprof_set_time(b->p, (int64_t)now.tv_sec * 1000000000 + now.tv_nsec, s->duration_ns);

    uint64_t stats[HP_STAT_COUNT];
    if (e == 0 && bpf_state_read_stats(bpf, stats) == 0) {
        char line[160];
        snprintf(line, sizeof(line), "heapprofd: pid %d, sample interval %llu bytes", (int)s->pid,
                 (unsigned long long)bpf->sample_interval);
        e = pprof_add_comment(b->p, line);
        /* Losses are daemon-wide counters: say so when any happened. */
        for (int i = HP_STAT_STACK_COLLISION; i < HP_STAT_COUNT && e == 0; i++) {
            if (!stats[i])
                continue;
            snprintf(line, sizeof(line), "heapprofd (all processes): %s = %llu",
                     bpf_state_stat_name((enum hp_stat)i), (unsigned long long)stats[i]);
            e = pprof_add_comment(b->p, line);
        }
    }
    return e;
}

/* Adds the executable's mapping first: pprof takes the first mapping as the main binary. */
static void add_main_mapping(struct builder *b)
{
    char link[64], exe[4096];
    snprintf(link, sizeof(link), "/proc/%d/exe", (int)b->pid);
    ssize_t n = readlink(link, exe, sizeof(exe) - 1);
    if (n <= 0)
        return;
    exe[n] = '\0';
    char *deleted = strstr(exe, " (deleted)");
    if (deleted && deleted[10] == '\0')
        *deleted = '\0';
    for (size_t i = 0; i < b->maps.n; i++) {
        if (b->maps.v[i].executable && strcmp(b->maps.v[i].path, exe) == 0) {
            mapping_id(b, i);
            return;
        }
    }
}

int heap_profile_build(struct bpf_state *bpf, struct symbol_cache *cache,
                       const struct heap_profile_spec *spec, const struct stack_counts *counts,
                       size_t n, struct pprof_profile **out, char *err, size_t errlen)
{
    struct builder b = {.pid = spec->pid, .cache = cache};
    int e = proc_maps_read(spec->pid, &b.maps);
    if (e) {
        snprintf(err, errlen, e == -ESRCH ? "process %d does not exist"
                                          : "read /proc/%d/maps failed", (int)spec->pid);
        return e;
    }
    b.ms = calloc(b.maps.n ? b.maps.n : 1, sizeof(*b.ms));
    b.p = pprof_new();
    if (!b.ms || !b.p) {
        e = -ENOMEM;
        goto out;
    }
    e = add_header(&b, bpf, spec);
    add_main_mapping(&b);
    for (size_t i = 0; i < n && e == 0; i++)
        e = add_sample(&b, bpf, &counts[i]);
    for (size_t i = 0; i < b.maps.n && e == 0; i++)
        if (b.ms[i].id > 0)
            e = pprof_set_mapping_flags(b.p, (uint64_t)b.ms[i].id, b.ms[i].all_named, 0, 0, 0);
out:
    for (size_t i = 0; b.ms && i < b.maps.n; i++)
        if (b.ms[i].elf)
            symbol_cache_put(cache, b.ms[i].elf);
    free(b.ms);
    proc_maps_free(&b.maps);
    if (e) {
        snprintf(err, errlen, "build the profile of process %d: %s", (int)spec->pid,
                 strerror(-e));
        pprof_free(b.p);
        return e;
    }
    *out = b.p;
    return 0;
}

/* Orders stack counts by stack id, for the binary search of the delta. */
static int by_stack_id(const void *a, const void *b)
{
    uint64_t x = ((const struct stack_counts *)a)->stack_id;
    uint64_t y = ((const struct stack_counts *)b)->stack_id;
    return x < y ? -1 : x > y;
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
    qsort(sorted, nbefore, sizeof(*sorted), by_stack_id);
    size_t n = 0;
    for (size_t i = 0; i < nafter; i++) {
        struct stack_counts d = after[i];
        const struct stack_counts *old =
            bsearch(&d, sorted, nbefore, sizeof(*sorted), by_stack_id);
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
