"""Frameless leaves: the allocating function of the nofp workload
(tests/workloads/nofp_leaf.c, built with -O2 -fomit-frame-pointer, using
%rbp as a general register) must still be the leaf frame of every sample,
with exact totals at --sample-interval 1. (Its callers need the .eh_frame
unwinder: a frame-pointer walk cannot get past a function that uses %rbp.)"""

import heapprof_harness as h

LEAF = "leaf_without_fp"
# 100 x malloc(200), kept: [alloc_objects, alloc_space, inuse_objects, inuse_space].
EXPECTED = [100, 20000, 100, 20000]


def profile_nofp():
    """Runs nofp under heapprofd --sample-interval 1; returns the decoded heap
    profile taken after `done`."""
    with h.Daemon("--sample-interval", "1") as d, h.Workload("nofp") as w:
        d.profile(f"/debug/pprof/heap?pid={w.pid}")  # attaches; may be empty
        w.run()
        body = d.profile(f"/debug/pprof/heap?pid={w.pid}")
        w.finish()
        d.check_alive()
    return h.decode(body)


nofp = h.Once(profile_nofp)


def test_every_sample_has_the_frameless_function_as_leaf():
    samples = nofp().samples
    h.check(samples, "the profile has no samples")
    bad = [s for s in samples if s.leaf() != LEAF]
    h.check(not bad, f"samples whose leaf is not {LEAF}:\n" + h.describe(bad))


def test_the_frameless_function_is_counted_exactly():
    got = h.totals_by_leaf(nofp().samples).get(LEAF)
    h.check_equal(got, EXPECTED, f"{LEAF} totals [alloc_objects, alloc_space, "
                                 f"inuse_objects, inuse_space]")


if __name__ == "__main__":
    h.run([
        test_every_sample_has_the_frameless_function_as_leaf,
        test_the_frameless_function_is_counted_exactly,
    ])
