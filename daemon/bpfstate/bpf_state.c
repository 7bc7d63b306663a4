/*
 * bpf_state.c - loads heapprof.bpf.c with the sampling tables for the best
 * probe layout the kernel takes, and pins the maps that outlive a daemon
 * (see bpf_state.h). The maps are read and written in bpf_maps.c.
 *
 * Pinned maps from an earlier daemon are checked before they are reused:
 * their layout against ours, then what they were made with (state version,
 * sample interval). Maps made with other settings would be misread only
 * for processes they still hold that still run; without such a process
 * they are removed and made afresh (stale_pins_gone).
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
#include "new_fail_size.h"
#include "proc_info.h"
#include "process_shares.h"
#include "row_index.h"
#include "sampling_tables.h"
#include "uprobe_link.h"
#include "verifier_error.h"

/* The magic number of a bpf filesystem (linux/magic.h BPF_FS_MAGIC). */
#define HP_BPF_FS_MAGIC 0xcafe4a11

/* The maps whose contents must outlive the daemon: the counts, the stacks
 * they name, the live sampled pointers (for in-use), the counters, and what
 * they were made with and for whom. */
static const char *const pinned_maps[] = {"counts", "stacks",         "live",
                                          "stats",  "meta",           "persisted_targets"};
#define N_PINNED (sizeof(pinned_maps) / sizeof(pinned_maps[0]))

/* Makes sure `dir` exists on a bpf filesystem, mounting one at
 * /sys/fs/bpf when nothing is mounted there (systemd does; containers and
 * minimal hosts may not), and locks it; returns the lock's descriptor. */
static int prepare_pin_dir(const char *dir, char *err, size_t errlen)
{
    struct statfs fs;
    if (statfs("/sys/fs/bpf", &fs) != 0 || (unsigned long)fs.f_type != HP_BPF_FS_MAGIC) {
        if (mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0700") != 0) {
            int e = errno;
            snprintf(err, errlen, "mount bpffs on /sys/fs/bpf: %s", strerror(e));
            return -e;
        }
    }
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        int e = errno;
        snprintf(err, errlen, "create pin directory %s: %s", dir, strerror(e));
        return -e;
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "open pin directory %s: %s", dir, strerror(e));
        return -e;
    }
    /* Two daemons on one directory would adopt each other's processes. */
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        if (e == EWOULDBLOCK)
            snprintf(err, errlen, "pin directory %s is in use by another heapprofd: give each "
                     "its own --pin-dir", dir);
        else
            snprintf(err, errlen, "lock pin directory %s: %s", dir, strerror(e));
        close(fd);
        return -e;
    }
    return fd;
}

/* The path of pinned map `name` in `dir`; -ENAMETOOLONG. */
static int pin_path(const char *dir, const char *name, char *path, size_t len)
{
    int n = snprintf(path, len, "%s/%s", dir, name);
    return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/* Tells libbpf where each map to keep is pinned (and to reuse it if it is). */
static int set_pin_paths(struct heapprof *skel, const char *dir)
{
    for (size_t i = 0; i < N_PINNED; i++) {
        char path[512];
        struct bpf_map *m = bpf_object__find_map_by_name(skel->obj, pinned_maps[i]);
        int e = m ? pin_path(dir, pinned_maps[i], path, sizeof(path)) : -ENOENT;
        if (e == 0)
            e = bpf_map__set_pin_path(m, path);
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

/* What the maps pinned in a directory are to us. */
enum pins_verdict {
    PINS_USABLE,         /* none yet, or ours to reuse */
    PINS_OTHER_SETTINGS, /* made with another interval or other map sizes */
    PINS_OTHER_VERSION,  /* another layout or state version: we cannot read them */
};

/* Compares one pinned map with ours; false (and why in `why`) if it differs. */
static enum pins_verdict compare_pinned(struct bpf_map *map, const char *path, char *why,
                                        size_t whylen)
{
    int fd = bpf_obj_get(path);
    if (fd < 0)
        return PINS_USABLE; /* not pinned yet */
    struct bpf_map_info info = {0};
    uint32_t len = sizeof(info);
    int e = bpf_obj_get_info_by_fd(fd, &info, &len);
    close(fd);
    if (e == 0 && info.type == bpf_map__type(map) && info.key_size == bpf_map__key_size(map) &&
        info.value_size == bpf_map__value_size(map) && info.map_flags == bpf_map__map_flags(map)) {
        if (info.max_entries == bpf_map__max_entries(map))
            return PINS_USABLE;
        snprintf(why, whylen, "the map pinned at %s holds %u entries, not %u (another --max-%s)",
                 path, info.max_entries, bpf_map__max_entries(map), bpf_map__name(map));
        return PINS_OTHER_SETTINGS;
    }
    snprintf(why, whylen, "the map pinned at %s has another layout than this heapprofd's "
             "(another version?)", path);
    return PINS_OTHER_VERSION;
}

/* Checks the pinned maps' meta (state version, interval) against ours. */
static enum pins_verdict compare_meta(const char *dir, uint64_t sample_interval, char *why,
                                      size_t whylen)
{
    char path[512];
    struct hp_meta m = {0};
    uint32_t zero = 0;
    int fd = pin_path(dir, "meta", path, sizeof(path)) == 0 ? bpf_obj_get(path) : -1;
    if (fd < 0)
        return PINS_USABLE;
    int e = bpf_map_lookup_elem(fd, &zero, &m);
    close(fd);
    if (e != 0 || m.magic == 0)
        return PINS_USABLE; /* never written: a daemon that stopped before its first attach */
    if (m.magic != HP_STATE_MAGIC || m.version != HP_STATE_VERSION) {
        snprintf(why, whylen, "the maps pinned in %s are of another heapprofd version (state "
                 "version %u, ours %u)", dir, m.version, HP_STATE_VERSION);
        return PINS_OTHER_VERSION;
    }
    if (m.sample_interval != sample_interval) {
        snprintf(why, whylen, "the maps pinned in %s were made with --sample-interval %llu, "
                 "not %llu", dir, (unsigned long long)m.sample_interval,
                 (unsigned long long)sample_interval);
        return PINS_OTHER_SETTINGS;
    }
    return PINS_USABLE;
}

/*
 * Checks that maps pinned in `dir` by an earlier daemon have the type,
 * sizes and flags ours have, and were made with our interval, before
 * libbpf is asked to reuse them, so that a mismatch is reported as such
 * (libbpf only says -EINVAL). The first mismatch is described in `why`.
 */
static int check_pinned_maps(const char *dir, const struct bpf_map_sizes *sizes,
                             uint64_t sample_interval, enum pins_verdict *verdict, char *why,
                             size_t whylen)
{
    struct heapprof *skel = heapprof__open();
    if (!skel)
        return errno ? -errno : -EINVAL;
    apply_sizes(skel, sizes);
    int e = set_pin_paths(skel, dir);
    *verdict = PINS_USABLE;
    struct bpf_map *map;
    bpf_object__for_each_map(map, skel->obj)
    {
        const char *path = bpf_map__pin_path(map);
        if (e || !path || *verdict == PINS_OTHER_VERSION)
            continue;
        enum pins_verdict v = compare_pinned(map, path, why, whylen);
        *verdict = v > *verdict ? v : *verdict;
    }
    heapprof__destroy(skel);
    if (e == 0 && *verdict == PINS_USABLE)
        *verdict = compare_meta(dir, sample_interval, why, whylen);
    return e;
}

/* Writes into `list` the pinned processes that still run (the ones their
 * maps would be misread for); returns how many. */
static size_t pinned_live_processes(const char *dir, char *list, size_t len)
{
    char path[512];
    int fd = pin_path(dir, "persisted_targets", path, sizeof(path)) == 0 ? bpf_obj_get(path) : -1;
    list[0] = '\0';
    if (fd < 0)
        return 0;
    struct hp_persisted_target *pt = calloc(HP_MAX_TARGETS, sizeof(*pt));
    size_t n = pt ? bpf_persisted_targets_of(fd, pt, HP_MAX_TARGETS) : 0, live = 0;
    close(fd);
    for (size_t i = 0; i < n; i++) {
        if (!proc_is_same_process((pid_t)pt[i].pid, pt[i].start_time, pt[i].exe_ino))
            continue; /* gone, or another program now: adoption would forget it */
        size_t used = strlen(list);
        if (used + 16 < len)
            snprintf(list + used, len - used, "%s%u", live ? ", " : "", pt[i].pid);
        live++;
    }
    free(pt);
    return live;
}

/* Removes the maps pinned in `dir`; -errno of the first that would not go. */
static int unpin_all(const char *dir)
{
    int first = 0;
    for (size_t i = 0; i < N_PINNED; i++) {
        char path[512];
        int e = pin_path(dir, pinned_maps[i], path, sizeof(path));
        if (e == 0 && unlink(path) != 0 && errno != ENOENT)
            e = -errno;
        first = first ? first : e;
    }
    return first;
}

/*
 * Pinned maps made with other settings: if a process they hold still runs,
 * reusing them would misread its counts, and dropping them would lose
 * them, so we refuse (-EEXIST); if none does, they are removed and made
 * afresh, which `notice` says.
 */
static int stale_pins_gone(const char *dir, const char *why, struct bpf_state *b, char *err,
                           size_t errlen)
{
    char pids[256];
    size_t live = pinned_live_processes(dir, pids, sizeof(pids));
    if (live) {
        snprintf(err, errlen, "%s; the maps in %s hold the counts of %zu running process%s "
                 "(pid %s): use the settings they were made with, or remove %s to lose those "
                 "counts", why, dir, live, live == 1 ? "" : "es", pids, dir);
        return -EEXIST;
    }
    int e = unpin_all(dir);
    if (e) {
        snprintf(err, errlen, "%s; remove them to start afresh: %s", why, strerror(-e));
        return e;
    }
    snprintf(b->notice, sizeof(b->notice), "%s; the maps in %s hold no running process: "
             "removed them, starting afresh", why, dir);
    return 0;
}

/* Prepares and locks `dir` and settles what is pinned there; on failure
 * the error is in `err` and the daemon must not start (b->refused). */
static int use_pin_dir(struct bpf_state *b, const char *dir, uint64_t sample_interval,
                       const struct bpf_map_sizes *sizes, char *err, size_t errlen)
{
    char why[384];
    enum pins_verdict verdict;
    int fd = prepare_pin_dir(dir, err, errlen);
    if (fd < 0)
        return fd;
    int e = check_pinned_maps(dir, sizes, sample_interval, &verdict, why, sizeof(why));
    if (e)
        snprintf(err, errlen, "check the maps pinned in %s: %s", dir, strerror(-e));
    else if (verdict == PINS_OTHER_VERSION) {
        snprintf(err, errlen, "%s: remove %s to start afresh, or use --pin-dir", why, dir);
        e = -EEXIST;
    } else if (verdict == PINS_OTHER_SETTINGS) {
        e = stale_pins_gone(dir, why, b, err, errlen);
    }
    if (e) {
        close(fd);
        return e;
    }
    b->pin_lock_fd = fd;
    return 0;
}

/* Records our state version and interval in a new pinned meta map. */
static int write_meta(struct heapprof *skel, uint64_t sample_interval)
{
    int fd = bpf_map__fd(skel->maps.meta);
    uint32_t zero = 0;
    struct hp_meta m = {0};
    if (bpf_map_lookup_elem(fd, &zero, &m) != 0)
        return -errno;
    if (m.magic != 0)
        return 0; /* reused maps: check_pinned_maps compared them already */
    m.magic = HP_STATE_MAGIC;
    m.version = HP_STATE_VERSION;
    m.sample_interval = sample_interval;
    return bpf_map_update_elem(fd, &zero, &m, BPF_ANY) ? -errno : 0;
}

/* Opens and loads the skeleton with programs set up for `layout`. */
static int load_for(struct heapprof **out, uint64_t sample_interval, enum probe_layout layout,
                    const char *pin_dir, const struct bpf_map_sizes *sizes,
                    const struct kernel_features *kf)
{
    /* The tests load the object against a kernel BTF that lacks a field
     * (tests/integration/test_kernel_fields.py). */
    LIBBPF_OPTS(bpf_object_open_opts, open_opts, .btf_custom_path = kernel_features_btf_path());
    struct heapprof *skel = heapprof__open_opts(&open_opts);
    if (!skel)
        return errno ? -errno : -EINVAL;
    apply_sizes(skel, sizes);
    int e = pin_dir ? set_pin_paths(skel, pin_dir) : 0;
    if (e) {
        heapprof__destroy(skel);
        return e;
    }
    skel->rodata->sample_interval = sample_interval;
    sampling_fill_log2_table((__u32 *)skel->rodata->log2_table);
    sampling_fill_weight_table((__u64 *)skel->rodata->weight_table);
    process_shares_set_bounds(skel);
    new_fail_size_set(skel);
    /* Debian's libbpf knows neither attach type: the numbers go in as they are. */
    enum bpf_attach_type multi = (enum bpf_attach_type)HP_BPF_TRACE_UPROBE_MULTI;
    enum bpf_attach_type session = (enum bpf_attach_type)HP_BPF_TRACE_UPROBE_SESSION;
    bpf_program__set_autoload(skel->progs.hp_session, layout == LAYOUT_SESSION);
    /* The drain of the in-process sampler's ring of frees needs syscall
     * programs and bpf_loop (5.17+), probed: not the layout. Without it,
     * frees of sampled pointers trap. 6.1 has both, but not uprobe_multi. */
    bpf_program__set_autoload(skel->progs.hp_drain_frees,
                              kf->has[KF_SYSCALL_PROGS] && kf->has[KF_BPF_LOOP]);
    if (layout == LAYOUT_SESSION)
        bpf_program__set_expected_attach_type(skel->progs.hp_session, session);
    if (layout != LAYOUT_CLASSIC) {
        bpf_program__set_expected_attach_type(skel->progs.hp_entry, multi);
        bpf_program__set_expected_attach_type(skel->progs.hp_return, multi);
        bpf_program__set_expected_attach_type(skel->progs.hp_report, multi);
    }
    e = heapprof__load(skel);
    if (e == 0 && pin_dir && (e = write_meta(skel, sample_interval)) == 0)
        process_shares_count(skel); /* adopted maps; on failure, shares start at 0 */
    if (e) {
        heapprof__destroy(skel);
        return e;
    }
    *out = skel;
    return 0;
}

/* 0 if links of `layout` can be made with the programs in `skel`, else why not. */
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
        return 0;
    }
}

/* Loads the programs for layout `l` into `b`; 0 or -errno. */
static int try_layout(struct bpf_state *b, enum probe_layout l, uint64_t sample_interval,
                      const char *pin_dir, const struct bpf_map_sizes *sizes, const char **step)
{
    struct heapprof *skel;
    *step = "load";
    int e = load_for(&skel, sample_interval, l, pin_dir, sizes, &b->kernel);
    if (e)
        return e;
    *step = "attach a test link";
    e = layout_works(skel, l);
    if (e) {
        heapprof__destroy(skel);
        return e;
    }
    b->skel = skel;
    b->sample_interval = sample_interval;
    b->layout = l;
    b->capacity.stacks = bpf_map__max_entries(skel->maps.stacks);
    b->capacity.counts = bpf_map__max_entries(skel->maps.counts);
    b->capacity.live = bpf_map__max_entries(skel->maps.live);
    b->capacity.pending = bpf_map__max_entries(skel->maps.pending);
    return 0;
}

/* The classic layout's perf-event uprobes are refused without
 * CAP_SYS_ADMIN (EACCES at each attach), which the packaged unit does not
 * grant: said once at start, where the kernel makes that the layout
 * (Debian 12's 6.1), rather than only by each attach's 403. */
static void note_classic_needs_sys_admin(struct bpf_state *b)
{
    if (b->layout != LAYOUT_CLASSIC || verifier_caps_have_sys_admin())
        return;
    size_t used = strlen(b->notice);
    snprintf(b->notice + used, sizeof(b->notice) - used,
             "%sthe classic layout attaches perf-event uprobes, which Linux %s refuses without "
             "CAP_SYS_ADMIN: every attach will fail (docs/operations.md#capabilities)",
             used ? "; " : "", b->kernel.release);
}

/* The best layout the probed features allow: a layout whose links the
 * kernel refuses is not loaded at all (its verification is the cost). */
static enum probe_layout best_layout(const struct kernel_features *kf)
{
    /* Nothing could be probed (no privileges): every layout is tried, so
     * that the error says why each failed. */
    if (!kf->probed || kf->has[KF_UPROBE_SESSION])
        return LAYOUT_SESSION;
    return kf->has[KF_UPROBE_MULTI] ? LAYOUT_MULTI : LAYOUT_CLASSIC;
}

/* Frees the index of rows (a failed load, or the object closed). */
static void drop_row_index(struct bpf_state *b)
{
    if (b->rows)
        row_index_destroy(b->rows);
    free(b->rows);
    b->rows = NULL;
}

int bpf_state_load(struct bpf_state *b, uint64_t sample_interval, enum probe_layout want,
                   const char *pin_dir, const struct bpf_map_sizes *sizes, char *err,
                   size_t errlen)
{
    memset(b, 0, sizeof(*b));
    verifier_quiet_libbpf();
    b->pin_lock_fd = -1;
    b->rows = malloc(sizeof(*b->rows));
    if (!b->rows) {
        snprintf(err, errlen, "%s", strerror(ENOMEM));
        return -ENOMEM;
    }
    row_index_init(b->rows);
    if (pin_dir && !*pin_dir)
        pin_dir = NULL;
    int e = pin_dir ? use_pin_dir(b, pin_dir, sample_interval, sizes, err, errlen) : 0;
    if (e) {
        b->refused = true;
        drop_row_index(b);
        return e;
    }
    kernel_features_probe(&b->kernel);
    kernel_features_missing(&b->kernel, b->gave_up, sizeof(b->gave_up));
    /* Every layout tried says why it failed: the first errno is returned. */
    char tried[768] = "";
    int first = 0;
    enum probe_layout from = want == LAYOUT_AUTO ? best_layout(&b->kernel) : want;
    enum probe_layout to = want == LAYOUT_AUTO ? LAYOUT_CLASSIC : want;
    for (enum probe_layout l = from; l <= to; l++) {
        const char *step;
        struct verifier_verdict v;
        verifier_capture_begin();
        e = try_layout(b, l, sample_interval, pin_dir, sizes, &step);
        verifier_capture_end(&v);
        if (e == 0) {
            note_classic_needs_sys_admin(b);
            return 0;
        }
        char why[320];
        if (l < best_layout(&b->kernel)) /* asked for with --probe-layout, past the probe */
            snprintf(why, sizeof(why), "%s (Linux %s has no %s links)", strerror(-e),
                     b->kernel.release, l == LAYOUT_SESSION ? "uprobe session (6.13)"
                                                            : "uprobe_multi (6.6)");
        else
            verifier_explain(e, &v, b->kernel.release, why, sizeof(why));
        size_t used = strlen(tried);
        snprintf(tried + used, sizeof(tried) - used, "%s%s: %s: %s", used ? "; " : "",
                 bpf_state_layout_name(l), step, why);
        first = first ? first : e;
    }
    snprintf(err, errlen, "load BPF programs on Linux %s (%s); HEAPPROFD_DEBUG_BPF=1 shows "
             "the verifier log", b->kernel.release, tried);
    if (b->pin_lock_fd >= 0)
        close(b->pin_lock_fd);
    b->pin_lock_fd = -1;
    drop_row_index(b);
    return first;
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
    drop_row_index(b);
}

struct bpf_program *bpf_state_entry_program(struct bpf_state *b)
{
    return b->skel->progs.hp_entry;
}

struct bpf_program *bpf_state_return_program(struct bpf_state *b)
{
    return b->skel->progs.hp_return;
}

struct bpf_program *bpf_state_report_program(struct bpf_state *b)
{
    return b->skel->progs.hp_report;
}

int bpf_state_report_fd(struct bpf_state *b)
{
    return bpf_program__fd(b->skel->progs.hp_report);
}

int bpf_state_drain_fd(struct bpf_state *b)
{
    return bpf_program__fd(b->skel->progs.hp_drain_frees);
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
