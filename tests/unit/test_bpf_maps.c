/*
 * test_bpf_maps.c - the map readers of bpf_maps.c on the real BPF object
 * (loaded here, as root, without pinning): a map that cannot be walked is
 * an error, never an empty map. The counts map's descriptor is replaced by
 * one of /dev/null, which BPF_MAP_GET_NEXT_KEY refuses; the readers used
 * to stop their walk there and answer 0 as if the map were empty. Also the
 * daemon's half of the per-process shares: stacks that nothing names are
 * pruned, and the shares of adopted maps are counted again; an owner's
 * record loses what a process held when the process's record goes.
 */
#include "bpf_state.h"
#include "check.h"

#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "heapprof.skel.h"
#include "process_shares.h"

/* The loaded object the tests read. */
static struct bpf_state bpf;

/* Two processes the tests make entries for (no such processes need exist). */
#define TGID_A 4000001u
#define TGID_B 4000002u

/* Stores a one-frame stack under `id`. */
static void put_stack(uint64_t id)
{
    struct hp_stack st = {.len = 1, .frames = {id * 16}};
    CHECK_INT_EQ(bpf_map_update_elem(bpf_map__fd(bpf.skel->maps.stacks), &id, &st, BPF_ANY), 0);
}

static bool has_stack(uint64_t id)
{
    struct hp_stack st;
    return bpf_state_read_stack(&bpf, id, &st) == 0;
}

/* A count row of process `tgid` for stack `id`. */
static void put_row(uint32_t tgid, uint64_t id)
{
    struct hp_count_key k = {.tgid = tgid, .stack_id = id};
    struct hp_counts c = {.alloc_objects = 1};
    CHECK_INT_EQ(bpf_map_update_elem(bpf_map__fd(bpf.skel->maps.counts), &k, &c, BPF_ANY), 0);
}

static void put_live(uint32_t tgid, uint64_t ptr, uint64_t id)
{
    struct hp_live_key k = {.tgid = tgid, .ptr = ptr};
    struct hp_live l = {.stack_id = id, .size = 1};
    CHECK_INT_EQ(bpf_map_update_elem(bpf_map__fd(bpf.skel->maps.live), &k, &l, BPF_ANY), 0);
}

static bool get_share(uint32_t tgid, struct hp_share *s)
{
    return bpf_map_lookup_elem(bpf_map__fd(bpf.skel->maps.shares), &tgid, s) == 0;
}

/* A share record that says the process has a count row, as the BPF side
 * counts it: without one, reads and forgets skip the walks. */
static void put_share(uint32_t tgid)
{
    struct hp_share s = {.stacks = 1, .rows = 1};
    CHECK_INT_EQ(bpf_map_update_elem(bpf_map__fd(bpf.skel->maps.shares), &tgid, &s, BPF_ANY), 0);
}

/* Stacks named by a count row or a call in flight stay; the others go, and
 * so do the shares of processes with neither. Forgetting a process takes
 * its rows, its calls, its share and then the stacks only it named. */
static void stacks_nothing_names_are_pruned(void)
{
    for (uint64_t id = 1; id <= 4; id++)
        put_stack(id);
    put_row(TGID_A, 1);
    struct hp_pending_key pk = {.pid_tgid = (uint64_t)TGID_A << 32 | 7, .sp = 0x1000};
    struct hp_pending p = {.stack_id = 2, .size = 1};
    CHECK_INT_EQ(bpf_map_update_elem(bpf_map__fd(bpf.skel->maps.pending), &pk, &p, BPF_ANY), 0);
    put_share(TGID_A);
    put_share(TGID_B);

    size_t pruned = 0;
    CHECK_INT_EQ(bpf_state_prune_stacks(&bpf, &pruned), 0);
    CHECK_INT_EQ(pruned, 2);
    CHECK(has_stack(1) && has_stack(2));
    CHECK(!has_stack(3) && !has_stack(4));
    struct hp_share s;
    CHECK(get_share(TGID_A, &s));
    CHECK(!get_share(TGID_B, &s));

    CHECK_INT_EQ(bpf_state_forget_process(&bpf, TGID_A), 0);
    CHECK(!has_stack(1) && !has_stack(2));
    CHECK(!get_share(TGID_A, &s));
    struct map_fill f;
    CHECK_INT_EQ(bpf_state_map_fill(&bpf, &f), 0);
    CHECK_INT_EQ(f.stacks + f.counts + f.pending, 0);
}

/* The shares map is not pinned: counted again from adopted counts and live
 * maps, each process gets its rows and live entries. */
static void shares_are_counted_from_the_maps(void)
{
    put_row(TGID_A, 1);
    put_row(TGID_A, 2);
    put_row(TGID_B, 1);
    for (uint64_t ptr = 1; ptr <= 3; ptr++)
        put_live(TGID_A, ptr * 64, 1);
    CHECK_INT_EQ(process_shares_count(bpf.skel), 0);
    struct hp_share a = {0}, b = {0};
    CHECK(get_share(TGID_A, &a) && get_share(TGID_B, &b));
    CHECK_INT_EQ(a.rows, 2);
    CHECK_INT_EQ(a.live, 3);
    CHECK_INT_EQ(b.rows, 1);
    CHECK_INT_EQ(b.live, 0);
    CHECK_INT_EQ(bpf_state_forget_process(&bpf, TGID_A), 0);
    CHECK_INT_EQ(bpf_state_forget_process(&bpf, TGID_B), 0);
    CHECK(!get_share(TGID_A, &a) && !get_share(TGID_B, &b));
}

/* The owner's record of uid `uid`; false if there is none. */
static bool get_owner(uint32_t uid, struct hp_share *s)
{
    return bpf_map_lookup_elem(bpf_map__fd(bpf.skel->maps.owner_shares), &uid, s) == 0;
}

/* An owner's record is the sum of its processes' (bpf/process_share.bpf.h):
 * forgetting a process, or pruning its record, takes what it held out of
 * its owner's, and the owner's record goes with its last process. */
static void owners_lose_what_a_forgotten_process_held(void)
{
    const uint32_t uid = 4242, ta = TGID_A, tb = TGID_B;
    int shares = bpf_map__fd(bpf.skel->maps.shares);
    struct hp_share a = {.stacks = 2, .rows = 3, .live = 4, .uid = uid};
    struct hp_share b = {.stacks = 1, .rows = 0, .live = 0, .uid = uid};
    struct hp_share sum = {.stacks = 3, .rows = 3, .live = 4, .uid = uid};
    CHECK_INT_EQ(bpf_map_update_elem(shares, &ta, &a, BPF_ANY), 0);
    CHECK_INT_EQ(bpf_map_update_elem(shares, &tb, &b, BPF_ANY), 0);
    int owners = bpf_map__fd(bpf.skel->maps.owner_shares);
    CHECK_INT_EQ(bpf_map_update_elem(owners, &uid, &sum, BPF_ANY), 0);

    CHECK_INT_EQ(bpf_state_forget_process(&bpf, TGID_A), 0);
    struct hp_share o = {0};
    CHECK(get_owner(uid, &o));
    CHECK_INT_EQ(o.stacks, 1);
    CHECK_INT_EQ(o.rows, 0);
    CHECK_INT_EQ(o.live, 0);
    /* B has no row or call: a prune drops its record, and the owner's. */
    CHECK_INT_EQ(bpf_state_prune_stacks(&bpf, NULL), 0);
    CHECK(!get_share(TGID_B, &o));
    CHECK(!get_owner(uid, &o));
}

static void walks_that_fail_are_errors_not_empty_maps(void)
{
    struct bpf_state *b = &bpf;
    struct map_fill f;
    struct stack_counts *counts = NULL;
    size_t n = 0;
    uint32_t tgid = (uint32_t)getpid();
    struct hp_counts totals;

    /* Whole maps first: empty, but walkable. */
    CHECK_INT_EQ(bpf_state_map_fill(b, &f), 0);
    CHECK_INT_EQ(bpf_state_read_counts(b, tgid, &counts, &n), 0);
    free(counts);

    put_share(tgid); /* else there is nothing to walk for */
    int fd = bpf_map__fd(b->skel->maps.counts);
    int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
    CHECK(null >= 0 && dup2(null, fd) == fd);
    close(null);
    CHECK(bpf_state_map_fill(b, &f) < 0);
    counts = NULL;
    CHECK(bpf_state_read_counts(b, tgid, &counts, &n) < 0);
    free(counts);
    CHECK(bpf_state_process_totals(b, &tgid, 1, &totals) < 0);
    CHECK(bpf_state_forget_process(b, tgid) < 0);
}

/* A process whose share record says it has no rows and no live entries
 * is read and forgotten without a walk: its reads are empty. */
static void processes_without_entries_are_not_walked(void)
{
    put_row(TGID_A, 1);
    struct hp_share none = {.stacks = 1};
    uint32_t tgid = TGID_A;
    CHECK_INT_EQ(bpf_map_update_elem(bpf_map__fd(bpf.skel->maps.shares), &tgid, &none, BPF_ANY), 0);
    struct stack_counts *counts = NULL;
    size_t n = 1;
    CHECK_INT_EQ(bpf_state_read_counts(&bpf, TGID_A, &counts, &n), 0);
    CHECK_INT_EQ(n, 0);
    free(counts);
    put_share(TGID_A); /* with its row counted, it is read and forgotten */
    CHECK_INT_EQ(bpf_state_read_counts(&bpf, TGID_A, &counts, &n), 0);
    CHECK_INT_EQ(n, 1);
    free(counts);
    CHECK_INT_EQ(bpf_state_forget_process(&bpf, TGID_A), 0);
    struct map_fill f;
    CHECK_INT_EQ(bpf_state_map_fill(&bpf, &f), 0);
    CHECK_INT_EQ(f.counts, 0);
}

/* Sets the share record of `tgid` to say it made `rows` count rows. */
static void set_rows(uint32_t tgid, int rows)
{
    struct hp_share s = {.stacks = 1, .rows = rows};
    CHECK_INT_EQ(bpf_map_update_elem(bpf_map__fd(bpf.skel->maps.shares), &tgid, &s, BPF_ANY), 0);
}

/* The rows of one process are read by key from the index while it knows
 * as many as the share record counts; a row made since (the count moved)
 * sends the read through one walk, which finds it. */
static void rows_made_after_a_read_are_read_too(void)
{
    struct stack_counts *counts = NULL;
    size_t n = 0;
    put_row(TGID_A, 1);
    put_row(TGID_A, 2);
    put_row(TGID_B, 1);
    set_rows(TGID_A, 2);
    set_rows(TGID_B, 1);
    CHECK_INT_EQ(bpf_state_read_counts(&bpf, TGID_A, &counts, &n), 0);
    CHECK_INT_EQ(n, 2);
    free(counts);
    put_row(TGID_A, 3);
    set_rows(TGID_A, 3);
    CHECK_INT_EQ(bpf_state_read_counts(&bpf, TGID_A, &counts, &n), 0);
    CHECK_INT_EQ(n, 3);
    free(counts);
    CHECK_INT_EQ(bpf_state_read_counts(&bpf, TGID_B, &counts, &n), 0);
    CHECK_INT_EQ(n, 1);
    free(counts);
    uint32_t both[2] = {TGID_A, TGID_B};
    CHECK_INT_EQ(bpf_state_forget_processes(&bpf, both, 2, true), 0);
    struct map_fill f;
    CHECK_INT_EQ(bpf_state_map_fill(&bpf, &f), 0);
    CHECK_INT_EQ(f.counts, 0);
    /* Forgotten: a process of the same pid starts with no rows. */
    put_row(TGID_A, 4);
    set_rows(TGID_A, 1);
    CHECK_INT_EQ(bpf_state_read_counts(&bpf, TGID_A, &counts, &n), 0);
    CHECK_INT_EQ(n, 1);
    CHECK_INT_EQ(counts[0].stack_id, 4);
    free(counts);
    CHECK_INT_EQ(bpf_state_forget_process(&bpf, TGID_A), 0);
}

/* A walk spans many batches: more rows than one batch holds are all seen,
 * and forgotten. */
static void walks_see_every_batch(void)
{
    enum { ROWS = 20000 }; /* over two batches of map_walk.c's 8192 */
    for (uint64_t id = 1; id <= ROWS; id++)
        put_row(TGID_B, id);
    set_rows(TGID_B, ROWS);
    struct map_fill f;
    CHECK_INT_EQ(bpf_state_map_fill(&bpf, &f), 0);
    CHECK_INT_EQ(f.counts, ROWS);
    struct hp_counts totals;
    uint32_t tgid = TGID_B;
    CHECK_INT_EQ(bpf_state_process_totals(&bpf, &tgid, 1, &totals), 0);
    CHECK_INT_EQ(totals.alloc_objects, ROWS);
    CHECK_INT_EQ(bpf_state_forget_process(&bpf, TGID_B), 0);
    CHECK_INT_EQ(bpf_state_map_fill(&bpf, &f), 0);
    CHECK_INT_EQ(f.counts, 0);
}

int main(void)
{
    char err[1024];
    CHECK(geteuid() == 0); /* loading BPF needs root: scripts/test.sh runs the tests as root */
    int e = bpf_state_load(&bpf, 524288, LAYOUT_AUTO, NULL, NULL, err, sizeof(err));
    if (e) {
        fprintf(stderr, "load the BPF programs: %s\n", err);
        return 1;
    }
    RUN_TEST(stacks_nothing_names_are_pruned);
    RUN_TEST(shares_are_counted_from_the_maps);
    RUN_TEST(owners_lose_what_a_forgotten_process_held);
    RUN_TEST(processes_without_entries_are_not_walked);
    RUN_TEST(rows_made_after_a_read_are_read_too);
    RUN_TEST(walks_see_every_batch);
    RUN_TEST(walks_that_fail_are_errors_not_empty_maps); /* last: it breaks the counts map */
    bpf_state_close(&bpf);
    return check_exit_code();
}
