/*
 * bpf_maps.c - reads and writes the maps of the loaded BPF object: the
 * counts, live allocations and stacks behind a profile, the statistics,
 * and what the daemon keeps there (targets to adopt, code ranges, unwind
 * tables). See bpf_state.h; loading and pinning are in bpf_state.c.
 *
 * Hash maps are read in batches by map_walk() (map_walk.c), the one walk:
 * entries changed meanwhile (a free in the target, a process forgotten)
 * may be seen as they were or as they are, so callers take the counts as
 * a snapshot, not a transaction.
 */
#include "bpf_state.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "array_grow.h"
#include "heapprof.skel.h"
#include "map_walk.h"
#include "process_shares.h"
#include "row_index.h"

int bpf_state_persist_target(struct bpf_state *b, uint32_t slot, uint32_t pid,
                             uint64_t start_time, uint32_t exe_ino)
{
    struct hp_persisted_target pt = {.pid = pid, .exe_ino = exe_ino, .start_time = start_time};
    int fd = bpf_map__fd(b->skel->maps.persisted_targets);
    return bpf_map_update_elem(fd, &slot, &pt, BPF_ANY) ? -errno : 0;
}

size_t bpf_state_persisted_targets(struct bpf_state *b, struct hp_persisted_target *out,
                                   size_t cap)
{
    return bpf_persisted_targets_of(bpf_map__fd(b->skel->maps.persisted_targets), out, cap);
}

size_t bpf_persisted_targets_of(int fd, struct hp_persisted_target *out, size_t cap)
{
    size_t n = 0;
    for (uint32_t i = 0; i < HP_MAX_TARGETS && n < cap; i++) {
        struct hp_persisted_target pt;
        if (bpf_map_lookup_elem(fd, &i, &pt) == 0 && pt.pid)
            out[n++] = pt;
    }
    return n;
}

int bpf_state_set_image(struct bpf_state *b, uint32_t slot, const struct hp_image *img)
{
    int fd = bpf_map__fd(b->skel->maps.images);
    return bpf_map_update_elem(fd, &slot, img, BPF_ANY) ? -errno : 0;
}

/* Rows written per batch syscall: bounds the key array we build. */
#define ROW_BATCH 8192

int bpf_state_write_unwind_rows(struct bpf_state *b, uint32_t first,
                                const struct hp_unwind_row *rows, size_t n)
{
    int fd = bpf_map__fd(b->skel->maps.unwind_rows);
    uint32_t *keys = malloc(ROW_BATCH * sizeof(*keys));
    if (!keys)
        return -ENOMEM;
    int e = 0;
    for (size_t done = 0; done < n && e == 0;) {
        uint32_t count = (uint32_t)(n - done < ROW_BATCH ? n - done : ROW_BATCH);
        for (uint32_t i = 0; i < count; i++)
            keys[i] = first + (uint32_t)done + i;
        LIBBPF_OPTS(bpf_map_batch_opts, opts);
        if (bpf_map_update_batch(fd, keys, rows + done, &count, &opts) != 0)
            e = -errno;
        done += count;
    }
    free(keys);
    return e;
}

int bpf_state_set_unwind_proc(struct bpf_state *b, uint32_t tgid,
                              const struct hp_unwind_proc *proc)
{
    int fd = bpf_map__fd(b->skel->maps.unwind_procs);
    return bpf_map_update_elem(fd, &tgid, proc, BPF_ANY) ? -errno : 0;
}

void bpf_state_delete_unwind_proc(struct bpf_state *b, uint32_t tgid)
{
    bpf_map_delete_elem(bpf_map__fd(b->skel->maps.unwind_procs), &tgid);
}

/* A growing array of stack counts, for the walks that collect them. */
struct counts_vec {
    struct stack_counts *v;
    size_t len, cap;
    uint32_t tgid;      /* the process whose entries are wanted */
    uint64_t before_ns; /* live entries made before this only */
};

/* Appends `sc`; -ENOMEM. */
static int push_counts(struct counts_vec *cv, struct stack_counts sc)
{
    struct stack_counts *nv = array_grow(cv->v, &cv->cap, cv->len + 1, sizeof(*nv), 64);
    if (!nv)
        return -ENOMEM;
    cv->v = nv;
    cv->v[cv->len++] = sc;
    return 0;
}

/*
 * Whether process `tgid` may have count rows or live entries, and how many
 * rows it has made (*rows). Every one is counted in its share record (made
 * before the first, and counted again from pinned maps at load): a process
 * without one has none, and the walks of maps sized for all processes,
 * which visit every bucket, are spared. Most short-lived processes never
 * have a sample.
 */
static bool may_have_entries(struct bpf_state *b, uint32_t tgid, size_t *rows)
{
    struct hp_share share;
    bool some = bpf_map_lookup_elem(bpf_map__fd(b->skel->maps.shares), &tgid, &share) == 0 &&
                (share.rows != 0 || share.live != 0);
    if (rows)
        *rows = some && share.rows > 0 ? (size_t)share.rows : 0;
    return some;
}

/* What a walk of the whole counts map gathers: the rows of the wanted
 * process, and the stack ids of every process's rows for the index. */
struct counts_walk {
    struct counts_vec *want;
    struct row_list *lists;
    size_t n, cap;
    size_t last; /* the list the previous row went to: rows come grouped by bucket, not process */
};

/* walk_fn of walk_all_counts. */
static int take_row(const void *key, const void *value, void *ctx)
{
    struct counts_walk *w = ctx;
    const struct hp_count_key *k = key;
    if (w->want && k->tgid == w->want->tgid) {
        struct stack_counts sc = {.stack_id = k->stack_id};
        memcpy(&sc.counts, value, sizeof(sc.counts));
        int e = push_counts(w->want, sc);
        if (e)
            return e;
    }
    size_t i = w->last;
    if (i >= w->n || w->lists[i].tgid != k->tgid)
        for (i = 0; i < w->n && w->lists[i].tgid != k->tgid; i++)
            ;
    if (i == w->n) {
        struct row_list *nl = array_grow(w->lists, &w->cap, w->n + 1, sizeof(*nl), 16);
        if (!nl)
            return -ENOMEM;
        w->lists = nl;
        w->lists[w->n++] = (struct row_list){.tgid = k->tgid};
    }
    w->last = i;
    return row_list_add(&w->lists[i], k->stack_id);
}

/* Walks the whole counts map: the rows of cv->tgid into `cv` (NULL: none
 * wanted), and the index refreshed for every process. */
static int walk_all_counts(struct bpf_state *b, struct counts_vec *cv)
{
    struct counts_walk w = {.want = cv};
    int e = map_walk(bpf_map__fd(b->skel->maps.counts), sizeof(struct hp_count_key),
                     sizeof(struct hp_counts), take_row, &w);
    if (e) {
        for (size_t i = 0; i < w.n; i++)
            free(w.lists[i].ids);
        free(w.lists);
        return e;
    }
    row_index_replace(b->rows, w.lists, w.n);
    return 0;
}

/* The rows of `cv->tgid`, which has made `rows` of them, read by key from
 * the index; -ENOENT if the index does not know them all. */
static int read_indexed(struct bpf_state *b, size_t rows, struct counts_vec *cv)
{
    uint64_t *ids = NULL;
    size_t n = 0;
    int e = row_index_get(b->rows, cv->tgid, rows, &ids, &n);
    int fd = bpf_map__fd(b->skel->maps.counts);
    for (size_t i = 0; i < n && e == 0; i++) {
        struct hp_count_key k = {.tgid = cv->tgid, .stack_id = ids[i]};
        struct stack_counts sc = {.stack_id = ids[i]};
        if (bpf_map_lookup_elem(fd, &k, &sc.counts) == 0)
            e = push_counts(cv, sc);
    }
    free(ids);
    return e;
}

int bpf_state_read_counts(struct bpf_state *b, uint32_t tgid, struct stack_counts **out, size_t *n)
{
    struct counts_vec cv = {.tgid = tgid};
    size_t rows;
    *out = NULL;
    *n = 0;
    if (!may_have_entries(b, tgid, &rows) || rows == 0)
        return 0;
    int e = read_indexed(b, rows, &cv);
    if (e == -ENOENT) {
        /* Rows made since the index was last refreshed: one walk. */
        free(cv.v);
        cv = (struct counts_vec){.tgid = tgid};
        e = walk_all_counts(b, &cv);
    }
    if (e) {
        free(cv.v);
        return e;
    }
    *out = cv.v;
    *n = cv.len;
    return 0;
}

int stack_counts_by_id(const void *a, const void *b)
{
    uint64_t x = ((const struct stack_counts *)a)->stack_id;
    uint64_t y = ((const struct stack_counts *)b)->stack_id;
    return x < y ? -1 : x > y;
}

/* walk_fn of read_live: one entry per live allocation of the wanted process. */
static int take_live(const void *key, const void *value, void *ctx)
{
    struct counts_vec *cv = ctx;
    const struct hp_live_key *k = key;
    struct hp_live l;
    memcpy(&l, value, sizeof(l));
    if (k->tgid != cv->tgid || l.time_ns >= cv->before_ns)
        return 0;
    struct stack_counts sc = {
        .stack_id = l.stack_id,
        .counts = {.alloc_objects = l.w_objects,
                   .alloc_bytes = l.w_bytes,
                   .inuse_objects = (int64_t)l.w_objects,
                   .inuse_bytes = (int64_t)l.w_bytes},
    };
    return push_counts(cv, sc);
}

int bpf_state_read_live(struct bpf_state *b, uint32_t tgid, uint64_t before_ns,
                        struct stack_counts **out, size_t *n)
{
    struct counts_vec cv = {.tgid = tgid, .before_ns = before_ns};
    int e = map_walk(bpf_map__fd(b->skel->maps.live), sizeof(struct hp_live_key),
                     sizeof(struct hp_live), take_live, &cv);
    if (e) {
        free(cv.v);
        return e;
    }
    /* Sorted and merged per stack. */
    if (cv.len)
        qsort(cv.v, cv.len, sizeof(*cv.v), stack_counts_by_id);
    size_t m = 0;
    for (size_t i = 0; i < cv.len; i++) {
        struct stack_counts *last = m > 0 ? &cv.v[m - 1] : NULL;
        if (last && last->stack_id == cv.v[i].stack_id) {
            last->counts.alloc_objects += cv.v[i].counts.alloc_objects;
            last->counts.alloc_bytes += cv.v[i].counts.alloc_bytes;
            last->counts.inuse_objects += cv.v[i].counts.inuse_objects;
            last->counts.inuse_bytes += cv.v[i].counts.inuse_bytes;
        } else {
            cv.v[m++] = cv.v[i];
        }
    }
    *out = cv.v;
    *n = m;
    return 0;
}

int bpf_state_process_totals(struct bpf_state *b, const uint32_t *tgids, size_t n,
                             struct hp_counts *out)
{
    memset(out, 0, n * sizeof(*out));
    /* Each process's own rows: by key where the index knows them, so the
     * totals of n processes cost their rows, not n walks of the map. */
    for (size_t i = 0; i < n; i++) {
        struct stack_counts *sc;
        size_t m;
        int e = bpf_state_read_counts(b, tgids[i], &sc, &m);
        if (e)
            return e;
        for (size_t j = 0; j < m; j++) {
            out[i].alloc_objects += sc[j].counts.alloc_objects;
            out[i].alloc_bytes += sc[j].counts.alloc_bytes;
            out[i].inuse_objects += sc[j].counts.inuse_objects;
            out[i].inuse_bytes += sc[j].counts.inuse_bytes;
        }
        free(sc);
    }
    return 0;
}

int bpf_state_read_stack(struct bpf_state *b, uint64_t id, struct hp_stack *st)
{
    int fd = bpf_map__fd(b->skel->maps.stacks);
    if (bpf_map_lookup_elem(fd, &id, st) != 0)
        return -ENOENT;
    if (st->len > HP_MAX_FRAMES)
        st->len = HP_MAX_FRAMES;
    return 0;
}

/* A zeroed buffer of one value per possible CPU, the value of a per-CPU
 * array's element, into *out and the CPUs' count into *ncpu; 0 or -errno. */
static int percpu_buffer(uint64_t **out, int *ncpu)
{
    *ncpu = libbpf_num_possible_cpus();
    if (*ncpu <= 0)
        return *ncpu < 0 ? *ncpu : -EINVAL;
    *out = calloc((size_t)*ncpu, sizeof(uint64_t));
    return *out ? 0 : -ENOMEM;
}

int bpf_percpu_sum(int fd, uint32_t key, uint64_t *sum)
{
    uint64_t *percpu;
    int ncpu;
    int e = percpu_buffer(&percpu, &ncpu);
    if (e)
        return e;
    *sum = 0;
    if (bpf_map_lookup_elem(fd, &key, percpu) != 0)
        e = -errno; /* an array map has every index: this is not "empty" */
    for (int c = 0; c < ncpu && e == 0; c++)
        *sum += percpu[c];
    free(percpu);
    return e;
}

int bpf_state_read_stats(struct bpf_state *b, uint64_t out[HP_STAT_COUNT])
{
    int fd = bpf_map__fd(b->skel->maps.stats);
    int e = 0;
    for (uint32_t i = 0; i < HP_STAT_COUNT && e == 0; i++)
        e = bpf_percpu_sum(fd, i, &out[i]);
    return e;
}

int bpf_state_read_hits(struct bpf_state *b, uint32_t slot, uint64_t *hits)
{
    return bpf_percpu_sum(bpf_map__fd(b->skel->maps.target_hits), slot, hits);
}

int bpf_state_zero_hits(struct bpf_state *b, uint32_t slot)
{
    uint64_t *zero;
    int ncpu;
    int e = percpu_buffer(&zero, &ncpu);
    if (e)
        return e;
    e = bpf_map_update_elem(bpf_map__fd(b->skel->maps.target_hits), &slot, zero, BPF_ANY)
                ? -errno
                : 0;
    free(zero);
    return e;
}

/* walk_fn of map_fill: counts the keys. */
static int count_key(const void *key, const void *value, void *ctx)
{
    (void)key, (void)value;
    (*(size_t *)ctx)++;
    return 0;
}

int bpf_state_map_fill(struct bpf_state *b, struct map_fill *f)
{
    memset(f, 0, sizeof(*f));
    int e = map_walk(bpf_map__fd(b->skel->maps.counts), sizeof(struct hp_count_key),
                     sizeof(struct hp_counts), count_key, &f->counts);
    if (e == 0)
        e = map_walk(bpf_map__fd(b->skel->maps.live), sizeof(struct hp_live_key),
                     sizeof(struct hp_live), count_key, &f->live);
    if (e == 0)
        e = map_walk(bpf_map__fd(b->skel->maps.stacks), sizeof(uint64_t),
                     sizeof(struct hp_stack), count_key, &f->stacks);
    if (e == 0)
        e = map_walk(bpf_map__fd(b->skel->maps.pending), sizeof(struct hp_pending_key),
                     sizeof(struct hp_pending), count_key, &f->pending);
    return e;
}

/* The keys of the processes being forgotten, gathered by a walk and then
 * deleted in batches. */
struct doomed_keys {
    uint8_t *keys;
    size_t n, cap, key_size;
    const uint32_t *tgids; /* sorted */
    size_t ntgids;
    bool tgid_in_high_half; /* pending: the leading u64 is pid_tgid, tgid in its upper half */
};

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* walk_fn of forget_processes: keeps the keys of the doomed processes. */
static int gather_key(const void *key, const void *value, void *ctx)
{
    (void)value;
    struct doomed_keys *d = ctx;
    uint32_t owner;
    if (d->tgid_in_high_half) {
        uint64_t pid_tgid;
        memcpy(&pid_tgid, key, sizeof(pid_tgid));
        owner = (uint32_t)(pid_tgid >> 32);
    } else {
        memcpy(&owner, key, sizeof(owner));
    }
    if (!bsearch(&owner, d->tgids, d->ntgids, sizeof(owner), cmp_u32))
        return 0;
    uint8_t *nk = array_grow(d->keys, &d->cap, d->n + 1, d->key_size, 256);
    if (!nk)
        return -ENOMEM;
    d->keys = nk;
    memcpy(d->keys + d->n * d->key_size, key, d->key_size);
    d->n++;
    return 0;
}

/* Deletes the keys of the processes `tgids` (sorted) from hash map `fd`,
 * in one walk, adding how many to *deleted; -errno of the walk. */
static int delete_process_keys(int fd, size_t key_size, size_t value_size, const uint32_t *tgids,
                               size_t n, bool tgid_in_high_half, size_t *deleted)
{
    struct doomed_keys d = {.key_size = key_size, .tgids = tgids, .ntgids = n,
                            .tgid_in_high_half = tgid_in_high_half};
    int e = map_walk(fd, key_size, value_size, gather_key, &d);
    /* What was gathered goes even if the walk stopped early. */
    *deleted += map_delete_keys(fd, d.keys, d.n, key_size);
    free(d.keys);
    return e;
}

int bpf_state_set_reporting(struct bpf_state *b, uint32_t tgid, bool on)
{
    int fd = bpf_map__fd(b->skel->maps.reporting);
    uint32_t one = 1;
    int e = on ? bpf_map_update_elem(fd, &tgid, &one, BPF_ANY) : bpf_map_delete_elem(fd, &tgid);
    return e == 0 || (!on && errno == ENOENT) ? 0 : -errno;
}

/* Deletes the count rows of the processes `tgids` (sorted): by key for
 * those whose rows the index knows, with one walk for the rest; adds to
 * *deleted. */
static int delete_rows(struct bpf_state *b, const uint32_t *tgids, size_t n, size_t *deleted)
{
    int fd = bpf_map__fd(b->skel->maps.counts);
    uint32_t *unknown = malloc((n ? n : 1) * sizeof(*unknown));
    if (!unknown)
        return -ENOMEM;
    size_t nunknown = 0;
    int e = 0;
    for (size_t i = 0; i < n; i++) {
        size_t rows = 0, m = 0;
        uint64_t *ids = NULL;
        may_have_entries(b, tgids[i], &rows);
        if (row_index_get(b->rows, tgids[i], rows, &ids, &m) != 0) {
            unknown[nunknown++] = tgids[i];
            continue;
        }
        struct hp_count_key *keys = malloc((m ? m : 1) * sizeof(*keys));
        for (size_t j = 0; keys && j < m; j++)
            keys[j] = (struct hp_count_key){.tgid = tgids[i], .stack_id = ids[j]};
        if (keys)
            *deleted += map_delete_keys(fd, keys, m, sizeof(*keys));
        else
            unknown[nunknown++] = tgids[i];
        free(keys);
        free(ids);
    }
    if (nunknown)
        e = delete_process_keys(fd, sizeof(struct hp_count_key), sizeof(struct hp_counts),
                                unknown, nunknown, false, deleted);
    for (size_t i = 0; i < n; i++)
        row_index_forget(b->rows, tgids[i]);
    free(unknown);
    return e;
}

int bpf_state_forget_processes(struct bpf_state *b, const uint32_t *tgids, size_t n,
                               bool prune)
{
    size_t live = 0, rows = 0, pending = 0, with_entries = 0;
    int e = 0, e2 = 0, e3 = 0;
    uint32_t *doomed = malloc((n ? n : 1) * sizeof(*doomed));
    if (!doomed)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        if (may_have_entries(b, tgids[i], NULL))
            doomed[with_entries++] = tgids[i];
    qsort(doomed, with_entries, sizeof(*doomed), cmp_u32);
    if (with_entries) {
        e = delete_process_keys(bpf_map__fd(b->skel->maps.live), sizeof(struct hp_live_key),
                                sizeof(struct hp_live), doomed, with_entries, false, &live);
        e2 = delete_rows(b, doomed, with_entries, &rows);
    }
    /* Calls in flight are made before any share record: every process. */
    memcpy(doomed, tgids, n * sizeof(*doomed));
    qsort(doomed, n, sizeof(*doomed), cmp_u32);
    if (n)
        e3 = delete_process_keys(bpf_map__fd(b->skel->maps.pending),
                                 sizeof(struct hp_pending_key), sizeof(struct hp_pending), doomed,
                                 n, true, &pending);
    for (size_t i = 0; i < n; i++) {
        process_shares_drop(b->skel, tgids[i]);
        row_index_forget(b->rows, tgids[i]);
    }
    free(doomed);
    /* Stacks are named only by count rows and calls in flight: with the
     * processes' rows gone, the stacks only they named are garbage. One
     * prune for the batch, however many processes are in it; a prune
     * that fails leaves them to the next one. */
    if (rows && prune)
        bpf_state_prune_stacks(b, NULL);
    return e ? e : e2 ? e2 : e3;
}

int bpf_state_forget_process(struct bpf_state *b, uint32_t tgid)
{
    return bpf_state_forget_processes(b, &tgid, 1, true);
}

const char *bpf_state_stat_name(enum hp_stat s)
{
    static const char *const names[HP_STAT_COUNT] = {
        [HP_STAT_SAMPLES] = "samples",
        [HP_STAT_FREES_MATCHED] = "frees_matched",
        [HP_STAT_NESTED] = "nested_calls",
        [HP_STAT_STACK_COLLISION] = "stack_hash_collisions",
        [HP_STAT_STACK_DROPPED] = "samples_dropped_stack_map_full",
        [HP_STAT_COUNTS_FULL] = "samples_dropped_counts_map_full",
        [HP_STAT_LIVE_FULL] = "allocations_untracked_live_map_full",
        [HP_STAT_PENDING_FULL] = "samples_dropped_pending_map_full",
        [HP_STAT_STACK_TRUNCATED] = "stacks_truncated",
        [HP_STAT_STACK_READ_ERROR] = "stack_read_errors",
        [HP_STAT_UNWIND_FP_FRAMES] = "unwind_frames_by_frame_pointer",
        [HP_STAT_UNWIND_BAD_FP] = "unwind_stopped_bad_frame_pointer",
        [HP_STAT_UNWIND_UNSUPPORTED] = "unwind_stopped_unsupported_cfi",
        [HP_STAT_UNWIND_BAD_FRAME] = "unwind_stopped_bad_frame",
        [HP_STAT_UNWIND_CFI_STACKS] = "unwind_stacks_with_tables",
        [HP_STAT_UNWIND_COMPLETE] = "unwind_stacks_complete",
        [HP_STAT_UNWIND_NOT_CODE] = "unwind_stopped_return_outside_code",
        [HP_STAT_UNWIND_MM_BUSY] = "unwind_stopped_mm_busy",
        [HP_STAT_RETURNS_UNHIDDEN] = "return_addresses_unhidden",
        [HP_STAT_SHARE_STACKS] = "samples_dropped_process_stack_share",
        [HP_STAT_SHARE_LIVE] = "allocations_untracked_process_live_share",
        [HP_STAT_FREES_UNSEEN] = "frees_unseen",
        [HP_STAT_REPORTS_DROPPED] = "reports_dropped_unattached",
        [HP_STAT_FREES_RING] = "frees_through_ring",
        [HP_STAT_FREES_RING_LATER] = "frees_through_ring_of_an_earlier_life",
        [HP_STAT_FREE_RING_FULL] = "frees_trapped_ring_full",
        [HP_STAT_RETURNS_UNCHECKED] = "return_addresses_unchecked",
        [HP_STAT_OWNER_STACKS] = "samples_dropped_owner_stack_share",
        [HP_STAT_OWNER_LIVE] = "allocations_untracked_owner_live_share",
    };
    return (unsigned)s < HP_STAT_COUNT ? names[s] : "unknown";
}
