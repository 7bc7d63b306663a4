/*
 * test_bpf_maps.c - the map readers of bpf_maps.c on the real BPF object
 * (loaded here, as root, without pinning): a map that cannot be walked is
 * an error, never an empty map. The counts map's descriptor is replaced by
 * one of /dev/null, which BPF_MAP_GET_NEXT_KEY refuses; the readers used
 * to stop their walk there and answer 0 as if the map were empty.
 */
#include "bpf_state.h"
#include "check.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <bpf/libbpf.h>

#include "heapprof.skel.h"

/* The loaded object the tests read. */
static struct bpf_state bpf;

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

int main(void)
{
    char err[1024];
    CHECK(geteuid() == 0); /* loading BPF needs root: scripts/test.sh runs the tests as root */
    int e = bpf_state_load(&bpf, 524288, LAYOUT_AUTO, NULL, NULL, err, sizeof(err));
    if (e) {
        fprintf(stderr, "load the BPF programs: %s\n", err);
        return 1;
    }
    RUN_TEST(walks_that_fail_are_errors_not_empty_maps);
    bpf_state_close(&bpf);
    return check_exit_code();
}
