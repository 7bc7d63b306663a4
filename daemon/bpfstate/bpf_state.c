/*
 * bpf_state.c - loads heapprof.bpf.c with the sampling tables and reads and
 * cleans its maps (see bpf_state.h).
 */
#include "bpf_state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "heapprof.skel.h"
#include "sampling_tables.h"
#include "uprobe_link.h"

/* Silences libbpf's own chatter; load errors are reported through `err`. */
static int quiet_libbpf(enum libbpf_print_level level, const char *fmt, va_list ap)
{
    if (level == LIBBPF_WARN && getenv("HEAPPROFD_DEBUG_BPF"))
        return vfprintf(stderr, fmt, ap);
    return 0;
}

/* The magic number of a bpf filesystem (linux/magic.h BPF_FS_MAGIC). */
#define HP_BPF_FS_MAGIC 0xcafe4a11

/* Makes sure `dir` exists on a bpf filesystem, mounting one at
 * /sys/fs/bpf when nothing is mounted there (systemd does; containers and
 * minimal hosts may not), and locks it; returns the lock's descriptor. */
static int prepare_pin_dir(const char *dir, char *err, size_t errlen)
{
    struct statfs fs;
    if (statfs("/sys/fs/bpf", &fs) != 0 || (unsigned long)fs.f_type != HP_BPF_FS_MAGIC) {
        if (mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0700") != 0) {
            snprintf(err, errlen, "mount bpffs on /sys/fs/bpf: %s", strerror(errno));
            return -errno;
        }
    }
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "create pin directory %s: %s", dir, strerror(errno));
        return -errno;
    }
    /* Two daemons on one directory would adopt each other's processes. */
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        snprintf(err, errlen, "pin directory %s is in use by another heapprofd (%s): give each "
                 "its own --pin-dir", dir, strerror(e));
        if (fd >= 0)
            close(fd);
        return -EEXIST;
    }
    return fd;
}

/* Pins the maps whose contents must outlive the daemon: the counts, the
 * stacks they name, the live sampled pointers (for in-use), the counters,
 * and what they were made with. */
static int set_pin_paths(struct heapprof *skel, const char *dir)
{
    struct bpf_map *pinned[] = {skel->maps.counts, skel->maps.stacks, skel->maps.live,
                                skel->maps.stats, skel->maps.meta, skel->maps.persisted_targets};
    for (size_t i = 0; i < sizeof(pinned) / sizeof(pinned[0]); i++) {
        char path[512];
        snprintf(path, sizeof(path), "%s/%s", dir, bpf_map__name(pinned[i]));
        int e = bpf_map__set_pin_path(pinned[i], path);
        if (e)
            return e;
    }
    return 0;
}

/* Gives the maps the sizes asked for (0 keeps the default). */
static void apply_sizes(struct heapprof *skel, const struct bpf_map_sizes *sizes)
{
    if (!sizes)
        return;
    if (sizes->stacks)
        bpf_map__set_max_entries(skel->maps.stacks, sizes->stacks);
    if (sizes->counts)
        bpf_map__set_max_entries(skel->maps.counts, sizes->counts);
    if (sizes->live)
        bpf_map__set_max_entries(skel->maps.live, sizes->live);
    if (sizes->pending)
        bpf_map__set_max_entries(skel->maps.pending, sizes->pending);
}

/*
 * Checks that maps pinned in `dir` by an earlier daemon have the type,
 * sizes and flags ours have, before libbpf is asked to reuse them, so that
 * a mismatch is reported as such (libbpf only says -EINVAL).
 */
static int check_pinned_maps(const char *dir, const struct bpf_map_sizes *sizes, char *err,
                             size_t errlen)
{
    struct heapprof *skel = heapprof__open();
    if (!skel)
        return errno ? -errno : -EINVAL;
    apply_sizes(skel, sizes);
    int e = set_pin_paths(skel, dir);
    struct bpf_map *map;
    bpf_object__for_each_map(map, skel->obj)
    {
        const char *path = bpf_map__pin_path(map);
        if (e || !path)
            continue;
        int fd = bpf_obj_get(path);
        if (fd < 0)
            continue; /* not pinned yet */
        struct bpf_map_info info = {0};
        uint32_t len = sizeof(info);
        int ok = bpf_obj_get_info_by_fd(fd, &info, &len) == 0 &&
                 info.type == bpf_map__type(map) && info.key_size == bpf_map__key_size(map) &&
                 info.value_size == bpf_map__value_size(map) &&
                 info.max_entries == bpf_map__max_entries(map) &&
                 info.map_flags == bpf_map__map_flags(map);
        close(fd);
        if (!ok) {
            snprintf(err, errlen, "the map pinned at %s has another layout than this "
                     "heapprofd's (another version?): remove %s to start afresh, or use --pin-dir",
                     path, dir);
            e = -EEXIST;
        }
    }
    heapprof__destroy(skel);
    return e;
}

/* Checks the pinned maps' meta against ours, or writes it when they are new. */
static int check_meta(struct heapprof *skel, uint64_t sample_interval, const char *dir,
                      char *err, size_t errlen)
{
    int fd = bpf_map__fd(skel->maps.meta);
    uint32_t zero = 0;
    struct hp_meta m = {0};
    if (bpf_map_lookup_elem(fd, &zero, &m) != 0)
        return -errno;
    if (m.magic == 0) {
        m.magic = HP_STATE_MAGIC;
        m.version = HP_STATE_VERSION;
        m.sample_interval = sample_interval;
        return bpf_map_update_elem(fd, &zero, &m, BPF_ANY) ? -errno : 0;
    }
    if (m.magic != HP_STATE_MAGIC || m.version != HP_STATE_VERSION) {
        snprintf(err, errlen, "the maps pinned in %s are of another heapprofd version (state "
                 "version %u, ours %u); remove %s to start afresh, or use --pin-dir",
                 dir, m.version, HP_STATE_VERSION, dir);
        return -EEXIST;
    }
    if (m.sample_interval != sample_interval) {
        snprintf(err, errlen, "the maps pinned in %s were made with --sample-interval %llu, not "
                 "%llu: use that interval, or remove %s to start afresh",
                 dir, (unsigned long long)m.sample_interval,
                 (unsigned long long)sample_interval, dir);
        return -EEXIST;
    }
    return 0;
}

/* Opens and loads the skeleton with programs set up for `layout`. */
static int load_for(struct heapprof **out, uint64_t sample_interval, enum probe_layout layout,
                    const char *pin_dir, const struct bpf_map_sizes *sizes)
{
    struct heapprof *skel = heapprof__open();
    if (!skel)
        return errno ? -errno : -EINVAL;
    apply_sizes(skel, sizes);
    if (pin_dir && set_pin_paths(skel, pin_dir) != 0) {
        heapprof__destroy(skel);
        return -EINVAL;
    }
    skel->rodata->sample_interval = sample_interval;
    sampling_fill_log2_table((__u32 *)skel->rodata->log2_table);
    sampling_fill_weight_table((__u64 *)skel->rodata->weight_table);
    /* Debian's libbpf knows neither attach type: the numbers go in as they are. */
    enum bpf_attach_type multi = (enum bpf_attach_type)HP_BPF_TRACE_UPROBE_MULTI;
    enum bpf_attach_type session = (enum bpf_attach_type)HP_BPF_TRACE_UPROBE_SESSION;
    bpf_program__set_autoload(skel->progs.hp_session, layout == LAYOUT_SESSION);
    if (layout == LAYOUT_SESSION)
        bpf_program__set_expected_attach_type(skel->progs.hp_session, session);
    if (layout != LAYOUT_CLASSIC) {
        bpf_program__set_expected_attach_type(skel->progs.hp_entry, multi);
        bpf_program__set_expected_attach_type(skel->progs.hp_return, multi);
    }
    int e = heapprof__load(skel);
    if (e) {
        heapprof__destroy(skel);
        return e;
    }
    *out = skel;
    return 0;
}

/* Whether links of `layout` can be made with the programs in `skel`. */
static int layout_works(struct heapprof *skel, enum probe_layout layout)
{
    switch (layout) {
    case LAYOUT_SESSION:
        return uprobe_link_supported(bpf_program__fd(skel->progs.hp_session),
                                     HP_BPF_TRACE_UPROBE_SESSION);
    case LAYOUT_MULTI:
        return uprobe_link_supported(bpf_program__fd(skel->progs.hp_entry),
                                     HP_BPF_TRACE_UPROBE_MULTI);
    default:
        return 1;
    }
}

int bpf_state_load(struct bpf_state *b, uint64_t sample_interval, enum probe_layout want,
                   const char *pin_dir, const struct bpf_map_sizes *sizes, char *err,
                   size_t errlen)
{
    memset(b, 0, sizeof(*b));
    libbpf_set_print(quiet_libbpf);
    if (pin_dir && !*pin_dir)
        pin_dir = NULL;
    b->pin_lock_fd = -1;
    if (pin_dir) {
        int fd = prepare_pin_dir(pin_dir, err, errlen);
        if (fd < 0)
            return fd;
        int e = check_pinned_maps(pin_dir, sizes, err, errlen);
        if (e) {
            close(fd);
            return e;
        }
        b->pin_lock_fd = fd;
    }
    enum probe_layout first = want == LAYOUT_AUTO ? LAYOUT_SESSION : want;
    enum probe_layout last = want == LAYOUT_AUTO ? LAYOUT_CLASSIC : want;
    int e = -EINVAL;
    for (enum probe_layout l = first; l <= last; l++) {
        struct heapprof *skel;
        e = load_for(&skel, sample_interval, l, pin_dir, sizes);
        if (e == 0 && pin_dir) {
            int m = check_meta(skel, sample_interval, pin_dir, err, errlen);
            if (m) {
                heapprof__destroy(skel);
                close(b->pin_lock_fd);
                b->pin_lock_fd = -1;
                return m;
            }
        }
        if (e == 0 && !layout_works(skel, l)) {
            heapprof__destroy(skel);
            e = -EOPNOTSUPP;
        }
        if (e == 0) {
            b->skel = skel;
            b->sample_interval = sample_interval;
            b->layout = l;
            b->capacity.stacks = bpf_map__max_entries(skel->maps.stacks);
            b->capacity.counts = bpf_map__max_entries(skel->maps.counts);
            b->capacity.live = bpf_map__max_entries(skel->maps.live);
            b->capacity.pending = bpf_map__max_entries(skel->maps.pending);
            return 0;
        }
    }
    snprintf(err, errlen,
             "load BPF programs for the %s probe layout: %s (needs root with CAP_BPF and "
             "CAP_PERFMON, and a kernel with BTF; HEAPPROFD_DEBUG_BPF=1 shows the verifier log)",
             want == LAYOUT_AUTO ? "classic" : bpf_state_layout_name(want), strerror(-e));
    if (b->pin_lock_fd >= 0)
        close(b->pin_lock_fd);
    b->pin_lock_fd = -1;
    return e;
}

const char *bpf_state_layout_name(enum probe_layout l)
{
    switch (l) {
    case LAYOUT_SESSION:
        return "session";
    case LAYOUT_MULTI:
        return "multi";
    case LAYOUT_CLASSIC:
        return "classic";
    default:
        return "auto";
    }
}

void bpf_state_close(struct bpf_state *b)
{
    if (b->skel)
        heapprof__destroy(b->skel);
    b->skel = NULL;
    if (b->pin_lock_fd >= 0)
        close(b->pin_lock_fd);
    b->pin_lock_fd = -1;
}

struct bpf_program *bpf_state_entry_program(struct bpf_state *b)
{
    return b->skel->progs.hp_entry;
}

struct bpf_program *bpf_state_return_program(struct bpf_state *b)
{
    return b->skel->progs.hp_return;
}

int bpf_state_entry_fd(struct bpf_state *b)
{
    return bpf_program__fd(b->skel->progs.hp_entry);
}

int bpf_state_return_fd(struct bpf_state *b)
{
    return bpf_program__fd(b->skel->progs.hp_return);
}

int bpf_state_session_fd(struct bpf_state *b)
{
    return bpf_program__fd(b->skel->progs.hp_session);
}

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
    int fd = bpf_map__fd(b->skel->maps.persisted_targets);
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

/* Appends `sc` to the growing array v[0..*len). */
static int push_counts(struct stack_counts **v, size_t *len, size_t *cap, struct stack_counts sc)
{
    if (*len == *cap) {
        size_t ncap = *cap ? *cap * 2 : 64;
        struct stack_counts *nv = realloc(*v, ncap * sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        *v = nv;
        *cap = ncap;
    }
    (*v)[(*len)++] = sc;
    return 0;
}

int bpf_state_read_counts(struct bpf_state *b, uint32_t tgid, struct stack_counts **out, size_t *n)
{
    int fd = bpf_map__fd(b->skel->maps.counts);
    struct stack_counts *v = NULL;
    size_t len = 0, cap = 0;
    struct hp_count_key key, next;
    void *prev = NULL;
    while (bpf_map_get_next_key(fd, prev, &next) == 0) {
        key = next;
        prev = &key;
        struct stack_counts sc = {.stack_id = next.stack_id};
        if (next.tgid != tgid || bpf_map_lookup_elem(fd, &next, &sc.counts) != 0)
            continue; /* another process's, or deleted meanwhile */
        if (push_counts(&v, &len, &cap, sc) != 0) {
            free(v);
            return -ENOMEM;
        }
    }
    *out = v;
    *n = len;
    return 0;
}

int stack_counts_by_id(const void *a, const void *b)
{
    uint64_t x = ((const struct stack_counts *)a)->stack_id;
    uint64_t y = ((const struct stack_counts *)b)->stack_id;
    return x < y ? -1 : x > y;
}

int bpf_state_read_live(struct bpf_state *b, uint32_t tgid, uint64_t before_ns,
                        struct stack_counts **out, size_t *n)
{
    int fd = bpf_map__fd(b->skel->maps.live);
    struct stack_counts *v = NULL;
    size_t len = 0, cap = 0;
    struct hp_live_key key, next;
    void *prev = NULL;
    /* One entry per live allocation first, then sorted and merged per stack. */
    while (bpf_map_get_next_key(fd, prev, &next) == 0) {
        key = next;
        prev = &key;
        struct hp_live l;
        if (next.tgid != tgid || bpf_map_lookup_elem(fd, &next, &l) != 0 || l.time_ns >= before_ns)
            continue;
        struct stack_counts sc = {
            .stack_id = l.stack_id,
            .counts = {.alloc_objects = l.w_objects,
                       .alloc_bytes = l.w_bytes,
                       .inuse_objects = (int64_t)l.w_objects,
                       .inuse_bytes = (int64_t)l.w_bytes},
        };
        if (push_counts(&v, &len, &cap, sc) != 0) {
            free(v);
            return -ENOMEM;
        }
    }
    if (len)
        qsort(v, len, sizeof(*v), stack_counts_by_id);
    size_t m = 0;
    for (size_t i = 0; i < len; i++) {
        if (m > 0 && v[m - 1].stack_id == v[i].stack_id) {
            v[m - 1].counts.alloc_objects += v[i].counts.alloc_objects;
            v[m - 1].counts.alloc_bytes += v[i].counts.alloc_bytes;
            v[m - 1].counts.inuse_objects += v[i].counts.inuse_objects;
            v[m - 1].counts.inuse_bytes += v[i].counts.inuse_bytes;
        } else {
            v[m++] = v[i];
        }
    }
    *out = v;
    *n = m;
    return 0;
}

int bpf_state_process_totals(struct bpf_state *b, const uint32_t *tgids, size_t n,
                             struct hp_counts *out)
{
    int fd = bpf_map__fd(b->skel->maps.counts);
    struct hp_count_key key, next;
    void *prev = NULL;
    memset(out, 0, n * sizeof(*out));
    while (bpf_map_get_next_key(fd, prev, &next) == 0) {
        key = next;
        prev = &key;
        for (size_t i = 0; i < n; i++) {
            struct hp_counts c;
            if (tgids[i] != next.tgid || bpf_map_lookup_elem(fd, &next, &c) != 0)
                continue;
            out[i].alloc_objects += c.alloc_objects;
            out[i].alloc_bytes += c.alloc_bytes;
            out[i].inuse_objects += c.inuse_objects;
            out[i].inuse_bytes += c.inuse_bytes;
            break;
        }
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

int bpf_state_read_stats(struct bpf_state *b, uint64_t out[HP_STAT_COUNT])
{
    int fd = bpf_map__fd(b->skel->maps.stats);
    int ncpu = libbpf_num_possible_cpus();
    if (ncpu <= 0)
        return -EINVAL;
    uint64_t *percpu = calloc((size_t)ncpu, sizeof(uint64_t));
    if (!percpu)
        return -ENOMEM;
    for (uint32_t i = 0; i < HP_STAT_COUNT; i++) {
        out[i] = 0;
        if (bpf_map_lookup_elem(fd, &i, percpu) != 0)
            continue;
        for (int c = 0; c < ncpu; c++)
            out[i] += percpu[c];
    }
    free(percpu);
    return 0;
}

/* The number of keys in a hash map, by walking it. */
static size_t count_keys(int fd, size_t key_size)
{
    uint8_t key[64], next[64];
    size_t n = 0;
    if (key_size > sizeof(key))
        return 0;
    void *prev = NULL;
    while (bpf_map_get_next_key(fd, prev, next) == 0) {
        memcpy(key, next, key_size);
        prev = key;
        n++;
    }
    return n;
}

int bpf_state_map_fill(struct bpf_state *b, struct map_fill *f)
{
    f->counts = count_keys(bpf_map__fd(b->skel->maps.counts), sizeof(struct hp_count_key));
    f->live = count_keys(bpf_map__fd(b->skel->maps.live), sizeof(struct hp_live_key));
    f->stacks = count_keys(bpf_map__fd(b->skel->maps.stacks), sizeof(uint64_t));
    f->pending = count_keys(bpf_map__fd(b->skel->maps.pending), sizeof(struct hp_pending_key));
    return 0;
}

/* Deletes the keys of a hash map whose leading u32 (or, for pending, the
 * upper half of the leading u64) is `tgid`. Keys are gathered first, as
 * deleting while walking can restart the walk. */
static void delete_process_keys(int fd, size_t key_size, uint32_t tgid, int tgid_in_high_half)
{
    size_t cap = 256, n = 0;
    uint8_t *keys = malloc(cap * key_size);
    uint8_t cur[64], next[64];
    void *prev = NULL;
    if (!keys)
        return;
    while (bpf_map_get_next_key(fd, prev, next) == 0) {
        memcpy(cur, next, key_size);
        prev = cur;
        uint32_t owner;
        if (tgid_in_high_half) {
            uint64_t pid_tgid;
            memcpy(&pid_tgid, next, sizeof(pid_tgid));
            owner = (uint32_t)(pid_tgid >> 32);
        } else {
            memcpy(&owner, next, sizeof(owner));
        }
        if (owner != tgid)
            continue;
        if (n == cap) {
            uint8_t *nk = realloc(keys, cap * 2 * key_size);
            if (!nk)
                break;
            keys = nk;
            cap *= 2;
        }
        memcpy(keys + n * key_size, next, key_size);
        n++;
    }
    for (size_t i = 0; i < n; i++)
        bpf_map_delete_elem(fd, keys + i * key_size);
    free(keys);
}

void bpf_state_forget_process(struct bpf_state *b, uint32_t tgid)
{
    delete_process_keys(bpf_map__fd(b->skel->maps.live), sizeof(struct hp_live_key), tgid, 0);
    delete_process_keys(bpf_map__fd(b->skel->maps.counts), sizeof(struct hp_count_key), tgid, 0);
    delete_process_keys(bpf_map__fd(b->skel->maps.pending), sizeof(struct hp_pending_key), tgid,
                        1);
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
    };
    return (unsigned)s < HP_STAT_COUNT ? names[s] : "unknown";
}
