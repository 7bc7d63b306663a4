"""The in-process sampler's paths for sampled calls (docs/sampler.md, "Frees
through a ring" and "The optimized report function"):

- exact totals at --sample-interval 1 stay exact when frees of sampled
  pointers go through the ring and are drained later: frees spread over
  several drains, addresses freed and handed out again before a drain saw
  the free, reallocs, a burst of frees larger than the ring (the rest
  trap, counted), and children forked with entries still in the ring,
  each with its own exact totals (tests/workloads/ring_exact.c);
- a parent on the optimized report path (a [uprobes-trampoline] in its
  maps) forks 1,000 children that allocate at once: none crashes
  (tests/workloads/fork_storm.c).

Without the MADV_WIPEONFORK page (the installer's madvise left out), every
one of the 1,000 children dies of SIGSEGV, and so do ring_exact's children:
the tests tell the two apart.

Cost: ~5 s for the first (2.5 s of it waiting for the ring to be turned
on), ~3 s for the second on 2 cores (1,000 processes that each allocate
for 200 ms).
"""

import os
import re
import signal
import time
import unittest

import heapprof_harness as h

# ring_exact.c, per leaf: [alloc_objects, alloc_space, inuse_objects, inuse_space]
#   keep_blocks   10 rounds x 50 x malloc(200), kept
#   churn         10 x 300 x malloc(64), freed at once (the address comes back)
#   grow          10 x 20 x (malloc(16), realloc to 1000), kept: free(old) + malloc(new)
#   freed_later   10 x 100 x malloc(128), each freed a round (40 ms: drains between) later
#   burst         BURST x malloc(48), then all freed: more than the ring holds
PARENT_EXPECTED = {
    "keep_blocks": [500, 100000, 500, 100000],
    "churn": [3000, 192000, 0, 0],
    "grow": [400, 203200, 200, 200000],
    "freed_later": [1000, 128000, 0, 0],
    "burst": [10000, 480000, 0, 0],
}
# Each child, once profiled: child_work() calls keep_blocks(300, 100),
# churn(32, 200) and grow(8, 500, 10).
CHILD_EXPECTED = {
    "keep_blocks": [100, 30000, 100, 30000],
    "churn": [200, 6400, 0, 0],
    "grow": [20, 5080, 10, 5000],
}
CHILDREN = 3
STORM_CHILDREN = 1000
# FREE_RING_AFTER_MS and a drain's 100 ms, with room.
RING_AFTER_S = 2.5


def check_totals(d, pid, expected, what):
    """Fails unless the heap profile of `pid` has exactly `expected` per leaf."""
    profile = h.decode(d.profile(f"/debug/pprof/heap?pid={pid}"))
    totals = h.totals_by_leaf(profile.samples)
    wrong = [f"  {fn}: expected {want}, got {totals.get(fn)}"
             for fn, want in expected.items() if totals.get(fn) != want]
    if wrong:
        raise h.Failure(f"{what} (pid {pid}): totals per leaf differ:\n" + "\n".join(wrong)
                        + f"\nall totals: {totals}\nheapprofd stderr:\n{d.stderr()}")


class FreeRingTest(unittest.TestCase):
    def test_exact_totals_stay_exact_with_frees_drained_later_forks_and_reallocs(self):
        children = []
        try:
            self.exact_with_children(children)
        finally:
            for pid in children:  # they hold the workload's stdout open
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def exact_with_children(self, children):
        with h.Daemon("--sample-interval", "1") as d, h.Workload("ring_exact") as w:
            d.profile(f"/debug/pprof/heap?pid={w.pid}")  # attaches
            h.check_equal(d.index_entry(w.pid)["sampler"], "inprocess", "the parent's sampler")
            # Frees go through the ring once a process has been profiled for
            # FREE_RING_AFTER_MS (2 s, daemon/inject/free_ring.h); before,
            # they trap. Its children, forked later, trap theirs (they live
            # less than that): both paths are checked.
            time.sleep(RING_AFTER_S)
            w.go()
            for _ in range(CHILDREN):
                line = w._expect_line(30, "child")
                m = re.fullmatch(r"child (\d+)", line)
                h.check(m is not None, f"expected 'child PID', got {line!r}")
                children.append(int(m.group(1)))
            w.wait_done()
            # A child of a profiled process is attached by the daemon; each
            # waits for SIGUSR1 before its work, sent once it is profiled.
            for pid in children:
                d.wait_until(lambda: pid in d.profiled_pids(), 15, f"child {pid} profiled")
                entry = d.index_entry(pid)
                h.check_equal(entry["sampler"], "inprocess", f"child {pid}'s sampler")
                os.kill(pid, signal.SIGUSR1)
            done = set()
            while len(done) < CHILDREN:
                line = w._expect_line(30, "child-done")
                m = re.fullmatch(r"child-done (\d+)", line)
                h.check(m is not None, f"expected 'child-done PID', got {line!r}")
                done.add(int(m.group(1)))
            h.check_equal(done, set(children), "children done")
            check_totals(d, w.pid, PARENT_EXPECTED, "parent")
            for pid in children:
                check_totals(d, pid, CHILD_EXPECTED, "child")
            m = d.metrics()
            ring = m.get("heapprofd_frees_through_ring_total", 0)
            earlier = m.get("heapprofd_frees_through_ring_of_an_earlier_life_total", 0)
            full = m.get("heapprofd_frees_trapped_ring_full_total", 0)
            # Every free but those of the burst past the ring's 8192 entries
            # can go through the ring: most of the ~9,800 frees must. Those
            # of churn() find a later life of their address (the next
            # malloc got it back before the drain): skipped, as they must be.
            h.check(ring + earlier >= 8192, f"frees through the ring: {ring} applied, {earlier} "
                                            f"of an earlier life (expected most of the frees)")
            h.check(earlier >= 1, f"ring frees of an address given out again before the drain: "
                                  f"{earlier} (churn() makes 3,000)")
            h.check(full >= 1, f"frees that found the ring full: {full} (the burst of 10,000 "
                               f"frees is larger than the ring)")
            h.check_equal(m.get("heapprofd_free_ring_drain_errors_total"), 0.0,
                          "free_ring_drain_errors_total")
            w.finish()
            d.check_alive()

    def test_children_of_a_process_on_the_optimized_path_never_crash(self):
        with h.Daemon("--sample-interval", "1") as d, \
                h.Workload("fork_storm", STORM_CHILDREN) as w:
            h.check_equal(d.metric("heapprofd_uprobe_nop5_optimized"), 1.0,
                          "heapprofd_uprobe_nop5_optimized (this kernel, 6.18, optimizes)")
            d.profile(f"/debug/pprof/heap?pid={w.pid}")  # attaches
            w.go()
            h.check_equal(w._expect_line(30, "warm"), "warm", "after the warm-up")
            h.check("[uprobes-trampoline]" in w.maps(),
                    "the parent reports through the optimized probe: a [uprobes-trampoline] "
                    f"in its maps; maps:\n{w.maps()}")
            w._send_line("fork")
            line = w._expect_line(300, "children")
            m = re.fullmatch(r"children (\d+) exited-0 (\d+) crashed (\d+)", line)
            h.check(m is not None, f"expected the children's statuses, got {line!r}")
            forked, ok, crashed = (int(g) for g in m.groups())
            h.check_equal(forked, STORM_CHILDREN, "children forked")
            h.check_equal((ok, crashed), (STORM_CHILDREN, 0), "children exited 0, crashed")
            w.wait_done()
            w.finish()
            d.check_alive()


if __name__ == "__main__":
    h.main()
