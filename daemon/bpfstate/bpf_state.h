/*
 * bpf_state.h - the one module that owns heapprofd's BPF object: loads it
 * with the sampling tables and pins its lasting maps (bpf_state.c), hands
 * out its programs for attaching, and reads and cleans its maps
 * (bpf_maps.c). Everything else reaches the maps through here.
 *
 * The map syscalls are thread-safe, so the functions here may be called from
 * several HTTP requests at once; none keeps state between calls.
 */
#ifndef HEAPPROF_BPF_STATE_H
#define HEAPPROF_BPF_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "heapprof.h"
#include "kernel_features.h"
#include "unwind_row.h"

struct heapprof;    /* the skeleton */
struct row_index;   /* row_index.h: which rows each process has */
struct bpf_program;

/* How probes are attached, best first; the kernel decides which we get. */
enum probe_layout {
    LAYOUT_AUTO = 0,   /* the best this kernel supports */
    LAYOUT_SESSION,    /* one uprobe session link per process and object (6.13+) */
    LAYOUT_MULTI,      /* uprobe_multi entry and return links (6.6+) */
    LAYOUT_CLASSIC,    /* a perf-event uprobe and uretprobe per function */
};

/* The loaded BPF object. */
struct bpf_state {
    struct heapprof *skel;
    uint64_t sample_interval;
    enum probe_layout layout;
    struct map_capacity {
        uint32_t stacks, counts, live, pending;
    } capacity; /* the sizes the maps got */
    int pin_lock_fd; /* the pin directory, locked while we use it; -1: not pinned */
    bool refused;    /* load failed for the pin directory: the daemon must not start */
    char notice[512]; /* what loading did that the operator should know ("" if nothing) */
    struct kernel_features kernel; /* what the kernel's BPF accepts, probed before loading */
    char gave_up[768]; /* the features missing and what each costs ("" if none) */
    uint64_t stacks_pruned; /* stacks deleted by bpf_state_prune_stacks (atomic adds) */
    struct row_index *rows; /* the stack ids of each process's count rows (owned) */
};

/* Map sizes (0: the default of bpf/hp_limits.h), for tuning and for the
 * tests that fill maps on purpose. */
struct bpf_map_sizes {
    uint32_t stacks, counts, live, pending;
};

/*
 * Opens and loads the programs for `want` (LAYOUT_AUTO: the best the kernel
 * supports, probed first with kernel_features, then found by trying);
 * -errno (the first layout's) with a reason in `err` naming each layout
 * tried on failure: a verifier rejection names the program, the kernel and
 * the verifier's last line. b->kernel and b->gave_up say what the kernel
 * lacks, loaded or not.
 * With a `pin_dir` (NULL or "": none), the maps that hold the profiles are
 * pinned there and adopted from a previous daemon. Maps of another version
 * or layout are refused (-EEXIST); maps made with another sample interval
 * or map sizes are refused only while a process they hold still runs, and
 * else removed and made afresh (said in b->notice). Any failure about the
 * pin directory sets b->refused.
 */
int bpf_state_load(struct bpf_state *b, uint64_t sample_interval, enum probe_layout want,
                   const char *pin_dir, const struct bpf_map_sizes *sizes, char *err,
                   size_t errlen);

/* "session", "multi" or "classic". */
const char *bpf_state_layout_name(enum probe_layout l);

/* The file descriptors of the programs, for uprobe_link_create(). */
int bpf_state_entry_fd(struct bpf_state *b);
int bpf_state_return_fd(struct bpf_state *b);
int bpf_state_session_fd(struct bpf_state *b);
/* Destroys the object (detaching nothing: links are owned by targets). */
void bpf_state_close(struct bpf_state *b);

/* The entry and return programs, for classic attachment with libbpf. */
struct bpf_program *bpf_state_entry_program(struct bpf_state *b);
struct bpf_program *bpf_state_return_program(struct bpf_state *b);
/* The in-process sampler's report probe: a program and its fd (loaded for
 * uprobe_multi links except in the classic layout). */
struct bpf_program *bpf_state_report_program(struct bpf_state *b);
int bpf_state_report_fd(struct bpf_state *b);
/* The program that applies the frees read from an in-process sampler's
 * ring (BPF_PROG_TYPE_SYSCALL, run with BPF_PROG_TEST_RUN); -1 where it
 * is not loaded (the classic layout): then the ring is not used. */
int bpf_state_drain_fd(struct bpf_state *b);

/* Remembers (pid 0: forgets) the process in `slot` across restarts. */
int bpf_state_persist_target(struct bpf_state *b, uint32_t slot, uint32_t pid,
                              uint64_t start_time, uint32_t exe_ino);
/* The processes remembered by a previous daemon; returns how many. */
size_t bpf_state_persisted_targets(struct bpf_state *b, struct hp_persisted_target *out,
                                   size_t cap);
/* The same from a persisted_targets map opened by its descriptor (a pinned
 * one, before it is reused). */
size_t bpf_persisted_targets_of(int fd, struct hp_persisted_target *out, size_t cap);

/* Sets image slot `slot` (ranges of the probed functions of one process). */
int bpf_state_set_image(struct bpf_state *b, uint32_t slot, const struct hp_image *img);

/* Writes `n` unwind rows at index `first` of the shared rows array. */
int bpf_state_write_unwind_rows(struct bpf_state *b, uint32_t first,
                                const struct hp_unwind_row *rows, size_t n);
/* Sets or deletes the unwind mappings of process `tgid`. */
int bpf_state_set_unwind_proc(struct bpf_state *b, uint32_t tgid,
                              const struct hp_unwind_proc *proc);
void bpf_state_delete_unwind_proc(struct bpf_state *b, uint32_t tgid);

/* One (stack, counts) pair of a process. */
struct stack_counts {
    uint64_t stack_id;
    struct hp_counts counts;
};

/* Orders stack counts by stack id (for qsort and bsearch). */
int stack_counts_by_id(const void *a, const void *b);

/* All counts of process `tgid`; *out is malloc'd (free it). */
int bpf_state_read_counts(struct bpf_state *b, uint32_t tgid, struct stack_counts **out,
                          size_t *n);

/*
 * The sampled allocations of process `tgid` still alive and made before
 * `before_ns` (CLOCK_MONOTONIC, as bpf_ktime_get_ns), summed per stack:
 * alloc and in-use both hold their weights (the leak view, min_age=).
 * *out is malloc'd (free it).
 */
int bpf_state_read_live(struct bpf_state *b, uint32_t tgid, uint64_t before_ns,
                        struct stack_counts **out, size_t *n);

/* The counts of each of the `n` processes in `tgids` summed over their
 * stacks into out[i] (fixed point), in one walk of the counts map. */
int bpf_state_process_totals(struct bpf_state *b, const uint32_t *tgids, size_t n,
                             struct hp_counts *out);

/* The frames of stack `id` into `st`; -ENOENT if it is not stored. */
int bpf_state_read_stack(struct bpf_state *b, uint64_t id, struct hp_stack *st);

/* The sum over CPUs of entry `key` of the per-CPU array map `fd` (a
 * counter); -errno if it could not be read. */
int bpf_percpu_sum(int fd, uint32_t key, uint64_t *sum);

/* The probe hits counted for image slot `slot` (every CPU's), and zeroing
 * them before the slot is given to a process. */
int bpf_state_read_hits(struct bpf_state *b, uint32_t slot, uint64_t *hits);
int bpf_state_zero_hits(struct bpf_state *b, uint32_t slot);

/* Whether the in-process sampler's reports of process `tgid` count (the
 * `reporting` map); 0 or -errno. */
int bpf_state_set_reporting(struct bpf_state *b, uint32_t tgid, bool on);

/* The per-CPU statistics summed, indexed by enum hp_stat. */
int bpf_state_read_stats(struct bpf_state *b, uint64_t out[HP_STAT_COUNT]);

/* Entries in use in each map (counts, live, stacks, pending); -errno if a
 * map could not be walked. */
struct map_fill {
    size_t counts, live, stacks, pending;
};
int bpf_state_map_fill(struct bpf_state *b, struct map_fill *f);

/* Deletes every counts, live and pending entry of process `tgid` and its
 * share record, then, if it had count rows, prunes the stacks (below);
 * -errno if a map could not be walked (what was found is deleted even so). */
int bpf_state_forget_process(struct bpf_state *b, uint32_t tgid);

/* The same for the `n` processes `tgids` at once: one walk of each map for
 * the whole batch, so a burst of exits costs one pass, not one per
 * process; the stacks are pruned once, and only with `prune`. */
int bpf_state_forget_processes(struct bpf_state *b, const uint32_t *tgids, size_t n,
                               bool prune);

/*
 * Deletes the stacks that no count row and no call in flight names (left
 * by forgotten processes, or stored for a sample that was then dropped),
 * and the share records of processes with neither; the number of stacks
 * deleted into *pruned (may be NULL). A stack that a sample names between
 * the walk and the deletion is stored again. Called by
 * bpf_state_forget_process(); safe to call at any time, from any thread.
 * 0 or -errno.
 */
int bpf_state_prune_stacks(struct bpf_state *b, size_t *pruned);

/* The name of a statistic, for /metrics and profile comments. */
const char *bpf_state_stat_name(enum hp_stat s);

#endif
