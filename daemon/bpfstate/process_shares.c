/*
 * process_shares.c - the daemon's half of the per-process bound on the
 * shared maps (bpf/process_share.bpf.h): the share records counted again
 * when pinned maps are adopted, and the stacks map pruned of stacks that
 * nothing names any more. See bpf_state.h.
 *
 * Stacks are shared by all processes and named by count rows (one per
 * process and stack) and by calls between their entry and return probe.
 * Count rows go only when the daemon forgets a process, so that is when
 * stacks become garbage; a stack stored for a sample that was then dropped
 * is garbage from the start. A prune walks the stacks, then what names
 * them, and deletes the rest. A sample may find such a stack again
 * between the two (the same program in another process): so each batch
 * of deleted stacks is kept, what names stacks is read once more after
 * the deletion, and a stack named by then is stored again.
 *
 * An owner's record (per real uid) is the sum of its processes' records:
 * when one goes, its counts are taken out of the owner's by a read, a
 * subtraction and a write. A sample of another process of that owner
 * between the read and the write is lost from the owner's count, which
 * errs towards room (one entry per such sample, in a window of a few
 * microseconds); the process's own bound still holds.
 */
#include "process_shares.h"

#include "bpf_state.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "array_grow.h"
#include "heapprof.skel.h"
#include "map_walk.h"

/* Stacks deleted, and kept to be stored again, per batch: 1 KiB each, so
 * 4 MiB for a while; each batch walks the counts once more (a few ms for
 * 60,000 rows, read in batches), so a larger batch makes a large prune
 * cheaper. */
#define PRUNE_BATCH 4096

/* A set of 64-bit values: appended, then sorted for lookups. */
struct u64_set {
    uint64_t *v;
    size_t n, cap;
};

/* Appends `x`; -ENOMEM. */
static int set_add(struct u64_set *s, uint64_t x)
{
    uint64_t *nv = array_grow(s->v, &s->cap, s->n + 1, sizeof(*nv), 256);
    if (!nv)
        return -ENOMEM;
    s->v = nv;
    s->v[s->n++] = x;
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Sorts the set and drops repeats, for set_has(). */
static void set_seal(struct u64_set *s)
{
    if (s->n)
        qsort(s->v, s->n, sizeof(*s->v), cmp_u64);
    size_t m = 0;
    for (size_t i = 0; i < s->n; i++)
        if (m == 0 || s->v[m - 1] != s->v[i])
            s->v[m++] = s->v[i];
    s->n = m;
}

static bool set_has(const struct u64_set *s, uint64_t x)
{
    return s->n && bsearch(&x, s->v, s->n, sizeof(*s->v), cmp_u64);
}

/* What the count rows and the calls in flight name: stacks and processes. */
struct refs {
    struct u64_set stacks, tgids;
};

static void refs_free(struct refs *r)
{
    free(r->stacks.v);
    free(r->tgids.v);
    memset(r, 0, sizeof(*r));
}

/* walk_fn over the counts map: a row names its stack and its process. */
static int ref_row(const void *key, const void *value, void *ctx)
{
    (void)value;
    const struct hp_count_key *k = key;
    struct refs *r = ctx;
    int e = set_add(&r->stacks, k->stack_id);
    return e ? e : set_add(&r->tgids, k->tgid);
}

/* walk_fn over the pending map: a sampled call in flight names its stack. */
static int ref_pending(const void *key, const void *value, void *ctx)
{
    const struct hp_pending_key *k = key;
    struct refs *r = ctx;
    struct hp_pending p;
    memcpy(&p, value, sizeof(p));
    int e = p.stack_id ? set_add(&r->stacks, p.stack_id) : 0;
    return e ? e : set_add(&r->tgids, k->pid_tgid >> 32);
}

/* Reads what names stacks now. A call's stack moves from its pending
 * entry to a count row at its return, so the pending calls are read first. */
static int read_refs(struct bpf_state *b, struct refs *r)
{
    memset(r, 0, sizeof(*r));
    int e = map_walk(bpf_map__fd(b->skel->maps.pending), sizeof(struct hp_pending_key),
                     sizeof(struct hp_pending), ref_pending, r);
    if (e == 0)
        e = map_walk(bpf_map__fd(b->skel->maps.counts), sizeof(struct hp_count_key),
                     sizeof(struct hp_counts), ref_row, r);
    if (e) {
        refs_free(r);
        return e;
    }
    set_seal(&r->stacks);
    set_seal(&r->tgids);
    return 0;
}

/* walk_fn gathering every key of a map with 64-bit keys (the stacks). */
static int take_u64_key(const void *key, const void *value, void *ctx)
{
    (void)value;
    uint64_t id;
    memcpy(&id, key, sizeof(id));
    return set_add(ctx, id);
}

/* walk_fn gathering every key of a map with 32-bit keys (the shares). */
static int take_u32_key(const void *key, const void *value, void *ctx)
{
    (void)value;
    uint32_t tgid;
    memcpy(&tgid, key, sizeof(tgid));
    return set_add(ctx, tgid);
}

/* Deletes the stacks of `ids[0..n)` (at most PRUNE_BATCH) that still exist,
 * stores again those named once they are gone; adds to *pruned. */
static int prune_batch(struct bpf_state *b, const uint64_t *ids, size_t n, struct hp_stack *kept,
                       uint64_t *gone, size_t *pruned)
{
    int fd = bpf_map__fd(b->skel->maps.stacks);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (bpf_map_lookup_elem(fd, &ids[i], &kept[m]) == 0 &&
            bpf_map_delete_elem(fd, &ids[i]) == 0)
            gone[m++] = ids[i];
    }
    if (m == 0)
        return 0;
    struct refs after;
    int e = read_refs(b, &after);
    for (size_t j = 0; j < m; j++) {
        /* Unread what names them, all are stored again: nothing is lost. */
        if (e || set_has(&after.stacks, gone[j]))
            bpf_map_update_elem(fd, &gone[j], &kept[j], BPF_NOEXIST);
        else
            (*pruned)++;
    }
    refs_free(&after);
    return e;
}

/* Deletes the share records of processes that `r` shows no row or call of. */
static int prune_shares(struct bpf_state *b, const struct refs *r)
{
    int fd = bpf_map__fd(b->skel->maps.shares);
    struct u64_set tgids = {0};
    int e = map_walk(fd, sizeof(uint32_t), sizeof(struct hp_share), take_u32_key, &tgids);
    for (size_t i = 0; i < tgids.n; i++) {
        uint32_t tgid = (uint32_t)tgids.v[i];
        if (!set_has(&r->tgids, tgid))
            process_shares_drop(b->skel, tgid);
    }
    free(tgids.v);
    return e;
}

int bpf_state_prune_stacks(struct bpf_state *b, size_t *pruned)
{
    struct u64_set ids = {0};
    struct refs before;
    size_t done = 0;
    struct hp_stack *kept = malloc(PRUNE_BATCH * sizeof(*kept));
    uint64_t *gone = malloc(PRUNE_BATCH * sizeof(*gone));
    int e = kept && gone ? 0 : -ENOMEM;
    /* The stacks first: one stored after this walk is not a candidate. */
    if (e == 0)
        e = map_walk(bpf_map__fd(b->skel->maps.stacks), sizeof(uint64_t), sizeof(struct hp_stack),
                     take_u64_key, &ids);
    if (e == 0)
        e = read_refs(b, &before);
    if (e == 0) {
        size_t n = 0;
        for (size_t i = 0; i < ids.n; i++)
            if (!set_has(&before.stacks, ids.v[i]))
                ids.v[n++] = ids.v[i];
        for (size_t i = 0; i < n && e == 0; i += PRUNE_BATCH)
            e = prune_batch(b, ids.v + i, n - i < PRUNE_BATCH ? n - i : PRUNE_BATCH, kept, gone,
                            &done);
        refs_free(&before);
    }
    /* Shares last, against what names stacks after the deletions. */
    if (e == 0 && (e = read_refs(b, &before)) == 0) {
        e = prune_shares(b, &before);
        refs_free(&before);
    }
    free(ids.v);
    free(kept);
    free(gone);
    __atomic_add_fetch(&b->stacks_pruned, done, __ATOMIC_RELAXED);
    if (pruned)
        *pruned = done;
    return e;
}

void process_shares_set_bounds(struct heapprof *skel)
{
    skel->rodata->stack_share = hp_process_share(bpf_map__max_entries(skel->maps.stacks));
    skel->rodata->row_share = hp_process_share(bpf_map__max_entries(skel->maps.counts));
    skel->rodata->live_share = hp_process_share(bpf_map__max_entries(skel->maps.live));
    skel->rodata->stack_owner_share = hp_owner_share(bpf_map__max_entries(skel->maps.stacks));
    skel->rodata->row_owner_share = hp_owner_share(bpf_map__max_entries(skel->maps.counts));
    skel->rodata->live_owner_share = hp_owner_share(bpf_map__max_entries(skel->maps.live));
}

/* Adds `s`'s counts, times `sign`, to the record of its owner (none for
 * root, as in bpf/process_share.bpf.h); deletes the record once empty. */
static int owner_add(struct heapprof *skel, const struct hp_share *s, int sign)
{
    if (s->uid == 0)
        return 0;
    int fd = bpf_map__fd(skel->maps.owner_shares);
    struct hp_share o = {.uid = s->uid};
    bpf_map_lookup_elem(fd, &s->uid, &o); /* none yet: zeros */
    o.stacks += sign * s->stacks;
    o.rows += sign * s->rows;
    o.live += sign * s->live;
    if (o.stacks <= 0 && o.rows <= 0 && o.live <= 0)
        return bpf_map_delete_elem(fd, &s->uid) && errno != ENOENT ? -errno : 0;
    return bpf_map_update_elem(fd, &s->uid, &o, BPF_ANY) ? -errno : 0;
}

void process_shares_drop(struct heapprof *skel, uint32_t tgid)
{
    int fd = bpf_map__fd(skel->maps.shares);
    struct hp_share s;
    /* Read, then deleted: what the process adds in between is not taken out
     * of its owner's (errs towards less room, and the process is going). */
    if (bpf_map_lookup_elem(fd, &tgid, &s) == 0 && bpf_map_delete_elem(fd, &tgid) == 0)
        owner_add(skel, &s, -1);
}

/* The real uid of process `tgid` (the first of /proc/PID/status's Uid:
 * line), or 0 when it cannot be read: a process gone adds nothing more. */
static uint32_t real_uid(uint32_t tgid)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%u/status", tgid);
    FILE *f = fopen(path, "re");
    unsigned uid = 0;
    bool found = false;
    while (f && !found && fgets(line, sizeof(line), f))
        found = sscanf(line, "Uid: %u", &uid) == 1;
    if (f)
        fclose(f);
    return found ? uid : 0;
}

/* What process_shares_count adds each key of a walk to. */
struct tally {
    struct heapprof *skel;
    int shares_fd;
    bool live; /* the walk is over the live map, else over the counts */
};

/* walk_fn of process_shares_count: one more row or live entry for the key's process. */
static int tally_key(const void *key, const void *value, void *ctx)
{
    (void)value;
    const struct tally *t = ctx;
    uint32_t tgid;
    memcpy(&tgid, key, sizeof(tgid)); /* both keys start with the tgid */
    struct hp_share s = {0};
    if (bpf_map_lookup_elem(t->shares_fd, &tgid, &s) != 0)
        s.uid = real_uid(tgid); /* the first entry of this process */
    struct hp_share one = {.uid = s.uid};
    if (t->live)
        s.live++, one.live = 1;
    else
        s.rows++, one.rows = 1;
    int e = bpf_map_update_elem(t->shares_fd, &tgid, &s, BPF_ANY) ? -errno : 0;
    return e ? e : owner_add(t->skel, &one, 1);
}

int process_shares_count(struct heapprof *skel)
{
    struct tally t = {.skel = skel, .shares_fd = bpf_map__fd(skel->maps.shares)};
    int e = map_walk(bpf_map__fd(skel->maps.counts), sizeof(struct hp_count_key),
                     sizeof(struct hp_counts), tally_key, &t);
    t.live = true;
    if (e == 0)
        e = map_walk(bpf_map__fd(skel->maps.live), sizeof(struct hp_live_key),
                     sizeof(struct hp_live), tally_key, &t);
    return e;
}
