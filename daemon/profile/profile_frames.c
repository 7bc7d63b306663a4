/*
 * profile_frames.c - return addresses to pprof locations and mappings for
 * one profile build (see profile_frames.h).
 *
 * Stacks share most of their frames, so each address is named once per
 * build: a small hash table remembers its location id and whether it is the
 * allocator's. Addresses are return addresses; the location holds the call
 * (address - 1), which is what symbolizers must look up.
 */
#include "profile_frames.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "allocator_names.h"
#include "proc_info.h"

/* Initial slots of the address table (a power of two); it doubles at half full. */
#define FRAME_TABLE_INITIAL 1024

/* What a mapping's locations have all had so far (pprof's has_* flags). */
struct mapping_state {
    int64_t id;             /* pprof id, 0 until added */
    struct cached_elf *elf; /* a cache reference, or NULL */
    int elf_error;          /* why there is none: -ENOEXEC for a file that is not ELF */
    bool elf_tried;
    bool functions, filenames, line_numbers, inline_frames;
};

/* A range between mappings holding addresses that no mapping does. */
struct gap {
    uint64_t start, end;
    int64_t id;
};

/* One address seen in this build. */
struct frame_slot {
    uint64_t pc;
    int64_t location; /* 0 until its location is added */
    int8_t allocator; /* -1 not yet known, else whether every line is the allocator's */
    bool used;
};

struct profile_frames {
    pid_t pid;
    bool symbolize;
    bool perf_map_tried;
    struct perf_map *perf_map; /* a reference, or NULL: the process's JIT names */
    char jit_name[80];         /* "[jit node]": JIT code without a name, "" until needed */
    uint64_t exited_start;     /* an exited process's start time (0: it runs) */
    const char *exited_exe;    /* and its executable's path, or NULL */
    const struct proc_maps *maps;
    struct symbol_cache *cache;
    struct pprof_profile *p;
    struct mapping_state *ms; /* one per maps entry */
    struct gap *gaps;
    size_t ngaps;
    struct frame_slot *slots;
    size_t nslots, used;
};

int profile_frames_new(pid_t pid, const struct proc_maps *maps, struct symbol_cache *cache,
                       struct pprof_profile *p, bool symbolize, struct profile_frames **out)
{
    struct profile_frames *t = calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    *t = (struct profile_frames){.pid = pid,
                                 .symbolize = symbolize,
                                 .maps = maps,
                                 .cache = cache,
                                 .p = p,
                                 .nslots = FRAME_TABLE_INITIAL};
    t->ms = calloc(maps->n ? maps->n : 1, sizeof(*t->ms));
    t->slots = calloc(t->nslots, sizeof(*t->slots));
    if (!t->ms || !t->slots) {
        profile_frames_free(t);
        return -ENOMEM;
    }
    *out = t;
    return 0;
}

void profile_frames_free(struct profile_frames *t)
{
    if (!t)
        return;
    for (size_t i = 0; t->ms && i < t->maps->n; i++)
        if (t->ms[i].elf)
            symbol_cache_put(t->cache, t->ms[i].elf);
    if (t->perf_map)
        perf_map_put(&t->cache->perf_maps, t->perf_map);
    free(t->ms);
    free(t->gaps);
    free(t->slots);
    free(t);
}

/* The slot of address `pc`, a new one if it was not seen; NULL when out of memory. */
static struct frame_slot *slot_of(struct profile_frames *t, uint64_t pc)
{
    if (2 * (t->used + 1) > t->nslots) {
        size_t n = t->nslots * 2;
        struct frame_slot *v = calloc(n, sizeof(*v));
        if (!v)
            return NULL;
        for (size_t i = 0; i < t->nslots; i++) {
            if (!t->slots[i].used)
                continue;
            size_t j = (t->slots[i].pc * 0x9e3779b97f4a7c15ULL) >> 20 & (n - 1);
            while (v[j].used)
                j = (j + 1) & (n - 1);
            v[j] = t->slots[i];
        }
        free(t->slots);
        t->slots = v;
        t->nslots = n;
    }
    size_t j = (pc * 0x9e3779b97f4a7c15ULL) >> 20 & (t->nslots - 1);
    while (t->slots[j].used && t->slots[j].pc != pc)
        j = (j + 1) & (t->nslots - 1);
    if (!t->slots[j].used) {
        t->slots[j] = (struct frame_slot){.pc = pc, .allocator = -1, .used = true};
        t->used++;
    }
    return &t->slots[j];
}

/* The cached ELF file of mapping i, opened on first use; NULL if it has none. */
static struct cached_elf *mapping_elf(struct profile_frames *t, size_t i)
{
    struct mapping_state *s = &t->ms[i];
    if (!s->elf_tried) {
        s->elf_tried = true;
        s->elf_error = symbol_cache_get(t->cache, t->pid, &t->maps->v[i], &s->elf);
        if (s->elf_error)
            s->elf = NULL;
    }
    return s->elf;
}

/* The pprof id of mapping i, adding it on first use. */
static int64_t mapping_id(struct profile_frames *t, size_t i)
{
    struct mapping_state *s = &t->ms[i];
    if (s->id)
        return s->id;
    const struct proc_mapping *m = &t->maps->v[i];
    struct cached_elf *e = proc_mapping_is_file(m) ? mapping_elf(t, i) : NULL;
    struct pprof_mapping_desc d = {
        .start = m->start,
        .limit = m->end,
        .offset = m->offset,
        .filename = m->path,
        .build_id = e ? e->build_id : "",
    };
    s->id = pprof_add_mapping(t->p, &d);
    s->functions = s->filenames = s->line_numbers = s->inline_frames = t->symbolize;
    return s->id;
}

/* The pprof id of a mapping for `pc`, which lies in no mapping: the gap
 * between its neighbours, added on first use. */
static int64_t gap_id(struct profile_frames *t, uint64_t pc)
{
    uint64_t start = 0, end = UINT64_MAX;
    for (size_t i = 0; i < t->maps->n; i++) {
        if (t->maps->v[i].end <= pc)
            start = t->maps->v[i].end;
        else if (t->maps->v[i].start > pc && t->maps->v[i].start < end)
            end = t->maps->v[i].start;
    }
    for (size_t i = 0; i < t->ngaps; i++)
        if (t->gaps[i].start == start)
            return t->gaps[i].id;
    struct gap *g = realloc(t->gaps, (t->ngaps + 1) * sizeof(*g));
    if (!g)
        return -ENOMEM;
    t->gaps = g;
    struct pprof_mapping_desc d = {.start = start, .limit = end, .filename = "", .build_id = ""};
    int64_t id = pprof_add_mapping(t->p, &d);
    if (id > 0)
        t->gaps[t->ngaps++] = (struct gap){.start = start, .end = end, .id = id};
    return id;
}

bool profile_frames_is_allocator_line(const struct sym_line *l)
{
    return allocator_is_allocator_name(l->system_name, l->name);
}

/* Folds one location's lines into its mapping's has_* flags. */
static void note_lines(struct mapping_state *s, const struct sym_frame *f, size_t from)
{
    s->functions &= f->n > from;
    s->inline_frames &= f->from_dwarf;
    for (size_t i = from; i < f->n; i++) {
        s->filenames &= f->lines[i].file[0] != '\0';
        s->line_numbers &= f->lines[i].line > 0;
    }
    if (f->n <= from)
        s->filenames = s->line_numbers = false;
}

/* Adds the location of `pc` with lines f->lines[from..] to mapping `mid`. */
static int64_t add_location(struct profile_frames *t, uint64_t mid, uint64_t pc,
                            const struct sym_frame *f, size_t from)
{
    struct pprof_line lines[SYM_MAX_LINES];
    size_t n = 0;
    for (size_t i = from; i < f->n; i++) {
        const struct sym_line *l = &f->lines[i];
        int64_t fid = pprof_function_id(t->p, l->name, l->system_name, l->file, 0);
        if (fid < 0)
            return fid;
        lines[n++] = (struct pprof_line){.function_id = (uint64_t)fid, .line = l->line};
    }
    return pprof_location_id(t->p, mid, pc, lines, n);
}

/* Whether mapping i holds code made at run time: executable and anonymous
 * (not the kernel's [vdso] and friends), or a file that is not ELF (a
 * memfd a JIT maps twice, writable and executable). */
static bool is_jit_mapping(struct profile_frames *t, size_t i)
{
    const struct proc_mapping *m = &t->maps->v[i];
    if (!m->executable)
        return false;
    if (proc_mapping_is_file(m))
        return mapping_elf(t, i) == NULL && t->ms[i].elf_error == -ENOEXEC;
    return m->path[0] == '\0' || strncmp(m->path, "[anon:", 6) == 0;
}

void profile_frames_set_exited(struct profile_frames *t, uint64_t start_time, const char *exe)
{
    t->exited_start = start_time;
    t->exited_exe = exe;
}

/* "[jit node]": what JIT code without a name is called, after the runtime. */
static const char *jit_name(struct profile_frames *t)
{
    if (t->jit_name[0])
        return t->jit_name;
    char exe[4096];
    if (t->exited_exe)
        snprintf(exe, sizeof(exe), "%s", t->exited_exe);
    else if (proc_exe_path(t->pid, exe, sizeof(exe)) != 0)
        exe[0] = '\0';
    const char *base = strrchr(exe, '/') ? strrchr(exe, '/') + 1 : exe;
    snprintf(t->jit_name, sizeof(t->jit_name), base[0] ? "[jit %s]" : "[jit]", base);
    return t->jit_name;
}

/*
 * The location of JIT code at `pc` in pprof mapping `mid`: named from the
 * process's perf map, else, in a JIT mapping (`ms` given), after the
 * runtime ("[jit node]"); marked with the file "[jit]" either way. An
 * address in no mapping that the perf map does not know stays unnamed:
 * it may as well be a library unloaded since.
 */
static int64_t add_jit_location(struct profile_frames *t, int64_t mid, uint64_t pc,
                                struct mapping_state *ms)
{
    if (mid < 0 || !t->symbolize)
        return mid < 0 ? mid : pprof_location_id(t->p, (uint64_t)mid, pc, NULL, 0);
    if (!t->perf_map_tried) {
        t->perf_map_tried = true;
        /* An exited process's file cannot be opened in its root any more:
         * the names are those read while it ran. */
        int e = t->exited_start
                    ? perf_map_get_kept(&t->cache->perf_maps, t->pid, t->exited_start, &t->perf_map)
                    : perf_map_get(&t->cache->perf_maps, t->pid, &t->perf_map);
        if (e != 0)
            t->perf_map = NULL;
    }
    char name[PERF_MAP_MAX_NAME];
    if (!t->perf_map || perf_map_lookup(t->perf_map, pc, name, sizeof(name)) != 1) {
        if (!ms)
            return pprof_location_id(t->p, (uint64_t)mid, pc, NULL, 0);
        snprintf(name, sizeof(name), "%s", jit_name(t));
    }
    struct sym_line l = {.name = name, .system_name = name, .file = "[jit]", .line = 0};
    struct sym_frame f = {.n = 1};
    f.lines[0] = l;
    if (ms)
        note_lines(ms, &f, 0);
    return add_location(t, (uint64_t)mid, pc, &f, 0);
}

/*
 * Names `pc` and, unless it may be skipped as the allocator's, adds its
 * location into s->location. With `may_skip`, an address whose every line
 * is the allocator's gets no location.
 */
static int resolve(struct profile_frames *t, struct frame_slot *s, bool may_skip)
{
    uint64_t pc = s->pc;
    const struct proc_mapping *m = proc_maps_find(t->maps, pc);
    if (!m) {
        /* JIT code unmapped since the sample, or nothing: the perf map may know. */
        s->allocator = 0;
        s->location = add_jit_location(t, gap_id(t, pc), pc, NULL);
        return s->location < 0 ? (int)s->location : 0;
    }
    size_t i = (size_t)(m - t->maps->v);
    if (is_jit_mapping(t, i)) {
        s->allocator = 0;
        s->location = add_jit_location(t, mapping_id(t, i), pc, &t->ms[i]);
        return s->location < 0 ? (int)s->location : 0;
    }
    struct sym_frame f = {.n = 0};
    struct cached_elf *e = proc_mapping_is_file(m) ? mapping_elf(t, i) : NULL;
    if (e && (t->symbolize || may_skip)) {
        int err = symbol_cache_symbolize(t->cache, e, pc - m->start + m->offset, &f);
        if (err)
            return err;
    }
    size_t alloc_lines = 0;
    while (alloc_lines < f.n && profile_frames_is_allocator_line(&f.lines[alloc_lines]))
        alloc_lines++;
    s->allocator = f.n > 0 && alloc_lines == f.n;
    if (!(may_skip && s->allocator)) {
        /* The allocator's inlined lines go; all of them stay if nothing else is left. */
        size_t from = alloc_lines < f.n ? alloc_lines : 0;
        if (!t->symbolize)
            from = f.n;
        int64_t mid = mapping_id(t, i); /* only mappings with locations are added */
        if (mid > 0 && t->symbolize)
            note_lines(&t->ms[i], &f, from);
        s->location = mid < 0 ? mid : add_location(t, (uint64_t)mid, pc, &f, from);
    }
    sym_frame_free(&f);
    return s->location < 0 ? (int)s->location : 0;
}

int profile_frames_stack(struct profile_frames *t, const uint64_t *ret, size_t n, uint64_t *locs,
                         size_t *nlocs)
{
    bool at_leaf = true;
    *nlocs = 0;
    for (size_t k = 0; k < n; k++) {
        struct frame_slot *s = slot_of(t, ret[k] - 1);
        if (!s)
            return -ENOMEM;
        /* The allocator's frames go from the leaf end; the last frame always stays. */
        bool may_skip = at_leaf && k + 1 < n;
        if (may_skip && s->allocator == 1)
            continue;
        if (s->location == 0) {
            int err = resolve(t, s, may_skip);
            if (err)
                return err;
            if (s->location == 0)
                continue; /* skipped as the allocator's */
        }
        at_leaf = false;
        locs[(*nlocs)++] = (uint64_t)s->location;
    }
    return 0;
}

void profile_frames_add_main(struct profile_frames *t)
{
    char exe[4096];
    if (t->exited_exe)
        snprintf(exe, sizeof(exe), "%s", t->exited_exe);
    else if (proc_exe_path(t->pid, exe, sizeof(exe)) != 0)
        return;
    for (size_t i = 0; i < t->maps->n; i++) {
        if (t->maps->v[i].executable && strcmp(t->maps->v[i].path, exe) == 0) {
            mapping_id(t, i);
            return;
        }
    }
}

int profile_frames_finish(struct profile_frames *t)
{
    int e = 0;
    for (size_t i = 0; i < t->maps->n && e == 0; i++) {
        const struct mapping_state *s = &t->ms[i];
        if (s->id > 0)
            e = pprof_set_mapping_flags(t->p, (uint64_t)s->id, s->functions, s->filenames,
                                        s->line_numbers, s->inline_frames);
    }
    return e;
}
