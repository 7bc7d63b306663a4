"""The views of a profile beyond one process's cumulative counts: every
profiled process in one profile with pid and comm labels; the min_age leak
view (only allocations still alive and older than a duration); and the last
profile of a process that exited, kept after its exit. All at
--sample-interval 1, so every figure is exact."""

import unittest

import heapprof_harness as h

# exact.c's alloc_small: 1000 x malloc(100), kept.
SMALL = [1000, 100000, 1000, 100000]
# rounds.c: round 1 round1_alloc 300 x malloc(1000) kept; round 2 frees 100 of
# them and round2_alloc 40 x malloc(5000) kept.
FIRST = [300, 300000, 300, 300000]
FIRST_AFTER_ROUND2 = [200, 200000, 200, 200000]
SECOND = [40, 200000, 40, 200000]
# How long round 1 may take to show under min_age=2s: 2 s, and a margin for
# the machine being slow.
AGE_TIMEOUT_S = 10.0


def totals_for_pid(profile, pid):
    """Totals per leaf of the samples labelled pid=`pid` in an all-process profile."""
    return h.totals_by_leaf([s for s in profile.samples if s.labels.get("pid") == str(pid)])


def totals(d, path):
    """Totals per leaf of the profile at path."""
    return h.totals_by_leaf(h.decode(d.profile(path)).samples)


class ViewsTest(unittest.TestCase):
    def test_all_processes_in_one_profile_labelled_by_pid(self):
        with h.Daemon("--sample-interval", "1") as d, h.Workload("exact") as a, \
                h.Workload("rounds") as b:
            for w in (a, b):
                d.profile(f"/debug/pprof/heap?pid={w.pid}")
            a.run()
            b.run()
            p = h.decode(d.profile("/debug/pprof/heap"))
            unlabelled = [s for s in p.samples if set(s.labels) != {"pid", "comm"}]
            h.check(not unlabelled, f"samples without exactly a pid and a comm label:\n"
                                    f"{h.describe(unlabelled)}")
            for w, comm in ((a, "exact"), (b, "rounds")):
                comms = {s.labels["comm"] for s in p.samples if s.labels["pid"] == str(w.pid)}
                h.check_equal(comms, {comm}, f"comm labels of the samples of pid {w.pid}")
            h.check_equal(totals_for_pid(p, a.pid).get("alloc_small"), SMALL,
                          "exact's alloc_small in the all-process profile")
            h.check_equal(totals_for_pid(p, b.pid).get("round1_alloc"), FIRST,
                          "rounds' round1_alloc in the all-process profile")
            h.check("alloc_small" not in totals_for_pid(p, b.pid),
                    "one process's functions under another's pid")
            a.finish()

    def test_min_age_shows_only_allocations_older_than_it(self):
        with h.Daemon("--sample-interval", "1") as d, h.Workload("rounds") as w:
            d.profile(f"/debug/pprof/heap?pid={w.pid}")
            w.run()             # round 1
            old = f"/debug/pprof/heap?pid={w.pid}&min_age=2s"
            seen = totals(d, old)
            h.check("round1_alloc" not in seen, f"round 1, just now, under min_age=2s: {seen}")

            def round1_aged():
                seen.clear()
                seen.update(totals(d, old))
                return seen.get("round1_alloc") == FIRST

            d.wait_until(round1_aged, AGE_TIMEOUT_S, lambda: f"round 1 under min_age=2s: {seen}")
            w.run()             # round 2, just now
            older = totals(d, old)
            h.check_equal(older.get("round1_alloc"), FIRST_AFTER_ROUND2,
                          "round 1's blocks still alive, under min_age=2s")
            h.check("round2_alloc" not in older, f"round 2 is younger than 2 s but shown: {older}")
            every = totals(d, f"/debug/pprof/heap?pid={w.pid}&min_age=1ms")
            h.check_equal(every.get("round2_alloc"), SECOND, "round 2 under min_age=1ms")
            none = h.decode(d.profile(f"/debug/pprof/heap?pid={w.pid}&min_age=1h")).samples
            h.check(not none, f"nothing is an hour old, yet: {none}")
            for bad in ("1y", "", "-5s", "5", "s", "99999999h"):
                status, body = d.get(f"/debug/pprof/heap?pid={w.pid}&min_age={bad}")
                if bad == "5":
                    h.check_equal(status, 200, "min_age=5 (plain seconds)")
                else:
                    h.check_equal(status, 400, f"min_age={bad!r}")
            status, _ = d.get(f"/debug/pprof/heap?pid={w.pid}&min_age=1s&seconds=1")
            h.check_equal(status, 400, "min_age with seconds")

    def test_the_last_profile_of_an_exited_process_stays_readable(self):
        with h.Daemon("--sample-interval", "1") as d:
            w = h.Workload("exact")
            d.profile(f"/debug/pprof/heap?pid={w.pid}")
            w.run()
            before = totals(d, f"/debug/pprof/heap?pid={w.pid}")
            w.finish()
            # Its maps as read at attach (or at a scan) name the frames.
            d.wait_detached(w.pid, "the exited workload")
            p = h.decode(d.profile(f"/debug/pprof/heap?pid={w.pid}"))
            h.check(any("exited" in c for c in p.comments),
                    f"the kept profile says the process exited: comments {p.comments}")
            after = h.totals_by_leaf(p.samples)
            h.check_equal(after, before, "totals per leaf of the exited process")
            h.check_equal(d.get(f"/debug/pprof/allocs?pid={w.pid}")[0], 200, "allocs of the exited")
            status, text = d.get(f"/debug/pprof/heap?pid={w.pid}&debug=1")
            h.check(status == 200 and text.startswith(b"heap profile:"), "debug=1 of the exited")
            status, _ = d.get(f"/debug/pprof/heap?pid={h.nonexistent_pid()}")
            h.check_equal(status, 404, "a process never profiled")


if __name__ == "__main__":
    h.main()
