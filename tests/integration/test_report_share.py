"""Each process's share of the maps every profiled process shares
(hp_process_share in bpf/hp_limits.h): a process that makes more stacks and
keeps more sampled allocations alive than its share holds only its share,
the excess is counted in /metrics, and another process still records its
own share in full. The report functions of the in-process sampler, which a
process can call with made-up arguments, and the uprobe sampler's stack
walk, which reads memory the process controls, store through the same
path; this drives it with the uprobe sampler at --sample-interval 1.

Then the stacks map is pruned: once a process's counts are forgotten, the
stacks only it named are deleted."""

import unittest

import heapprof_harness as h

# many_stacks.c: 200 depths x 10 blocks of 64 bytes, all kept. Stacks are
# cut at 127 frames, so it makes about 125 distinct stacks.
MANY_STACKS_ALLOCATIONS = 2000
PER_DEPTH = 10
# Map sizes for the test and the shares they give (an eighth each).
MAX_STACKS = 512
MAX_COUNTS = 512
MAX_LIVE = 1024
STACK_SHARE = MAX_STACKS // 8
ROW_SHARE = MAX_COUNTS // 8
LIVE_SHARE = MAX_LIVE // 8
# How long the daemon may take to forget an exited process's counts.
FORGET_TIMEOUT_S = 30.0


def inuse_objects(prof):
    return sum(s.values[2] for s in prof.samples)


def stacks_stored(m):
    """The entries of the stacks map, from one /metrics answer."""
    return m.labelled[("heapprofd_map_entries", (("map", "stacks"),))]


class ReportShareTest(unittest.TestCase):
    def test_a_process_holds_only_its_share_and_another_still_records(self):
        with h.Daemon("--sample-interval", "1", "--max-stacks", str(MAX_STACKS),
                      "--max-counts", str(MAX_COUNTS), "--max-live", str(MAX_LIVE)) as d, \
                h.Workload("many_stacks") as a, h.Workload("many_stacks") as b:
            d.profile(f"/debug/pprof/heap?pid={a.pid}")
            d.profile(f"/debug/pprof/heap?pid={b.pid}")
            a.run()
            b.run()
            pa = h.decode(d.profile(f"/debug/pprof/heap?pid={a.pid}"))
            pb = h.decode(d.profile(f"/debug/pprof/heap?pid={b.pid}"))
            m = d.metrics()

            for name, prof in (("first", pa), ("second", pb)):
                stacks = len(prof.samples)
                h.check(stacks <= min(STACK_SHARE, ROW_SHARE),
                        f"{name} process: {stacks} stacks, over its share of {STACK_SHARE}")
                # The second process gets its whole share although the first
                # asked for more than the maps hold.
                h.check(stacks >= min(STACK_SHARE, ROW_SHARE) - 2,
                        f"{name} process: {stacks} stacks, short of its share of {STACK_SHARE}")
                h.check_equal(inuse_objects(prof), LIVE_SHARE, f"{name} process: inuse_objects")
            refused = m["heapprofd_samples_dropped_process_stack_share_total"]
            untracked = m["heapprofd_allocations_untracked_process_live_share_total"]
            recorded = m["heapprofd_samples_total"]
            h.check(refused > 0 and untracked > 0, f"the shares should have refused some: {m}")
            # No map filled: what the shares refused is all that was lost.
            for full in ("samples_dropped_stack_map_full", "samples_dropped_counts_map_full",
                         "allocations_untracked_live_map_full", "samples_dropped_pending_map_full"):
                h.check_equal(m[f"heapprofd_{full}_total"], 0, full)
            h.check_equal(recorded + refused, 2 * MANY_STACKS_ALLOCATIONS,
                          "recorded + refused samples")
            h.check_equal(inuse_objects(pa) + inuse_objects(pb), recorded - untracked,
                          "inuse_objects of both profiles")

            # Forgetting the first process's counts takes the stacks only it named.
            stacks_before = stacks_stored(m)
            a.finish()
            d.wait_until(lambda: stacks_stored(d.metrics()) <
                         stacks_before, FORGET_TIMEOUT_S, "stacks of the exited process pruned")
            after = d.metrics()
            h.check(after["heapprofd_stacks_pruned_total"] > 0, f"stacks pruned: {after}")
            h.check(stacks_stored(after) <= STACK_SHARE,
                    f"only the second process's stacks are left: {after}")
            # The second process's profile is whole.
            h.check_equal(inuse_objects(h.decode(d.profile(f"/debug/pprof/heap?pid={b.pid}"))),
                          LIVE_SHARE, "second process's inuse_objects after the prune")
            b.finish()
            d.check_alive()



if __name__ == "__main__":
    h.main()
