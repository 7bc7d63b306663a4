"""Frameless leaves: the allocating function of the nofp workload
(tests/workloads/nofp_leaf.c, built with -O2 -fomit-frame-pointer, using
%rbp as a general register) must still be the leaf frame of every sample,
with exact totals at --sample-interval 1, and the unwinder (.eh_frame CFI,
not frame pointers, which cannot get past a function that uses %rbp) must
find its callers caller_with_fp and main."""

import unittest

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


class NofpTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.nofp = profile_nofp()

    def test_every_sample_has_the_frameless_function_as_leaf(self):
        samples = self.nofp.samples
        h.check(samples, "the profile has no samples")
        bad = [s for s in samples if s.leaf() != LEAF]
        h.check(not bad, f"samples whose leaf is not {LEAF}:\n" + h.describe(bad))

    def test_the_frameless_function_is_counted_exactly(self):
        got = h.totals_by_leaf(self.nofp.samples).get(LEAF)
        h.check_equal(got, EXPECTED, f"{LEAF} totals [alloc_objects, alloc_space, "
                                     f"inuse_objects, inuse_space]")

    def test_callers_of_the_frameless_function_are_unwound(self):
        ours = [s for s in self.nofp.samples if s.leaf() == LEAF]
        bad = [s for s in ours if s.frames[1:3] != ["caller_with_fp", "main"]]
        h.check(not bad, f"samples whose stack does not go {LEAF} <- caller_with_fp <- main "
                         f"(a frame-pointer walk loses caller_with_fp here):\n" + h.describe(bad))


if __name__ == "__main__":
    h.main()
