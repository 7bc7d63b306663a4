"""Forked children that free everything before they exit show nothing in
use (issue 26, item 2).

tests/workloads/forkfree.c forks 200 children, 8 at a time, each of which
allocates and frees blocks of 16 B to 64 KiB for about 100 ms, frees what
it holds and exits. Each child is attached as its profiled parent's fork
(FORK_GRACE_NS after it, by the attacher), and its last profile is kept at
its exit. For every child that was attached, that kept profile must have
0 objects and 0 bytes in use: exact, since every free of a sampled block
must take it out. Run on both samplers, at interval 1 (every allocation
sampled) and at the default interval.

The children live about 100 ms: a child attached late, or never, is
allowed (the bursts issue makes attaches faster); each run prints how many
were attached, and at least one must be, or nothing was checked. Those
that exit during their attach are no error: attach_errors_total stays 0
and nothing is logged of them (counted in attach_raced_total); nor are
children that exec during their attach (a run of its own). A child that
exited leaves nothing to take out: no detach stop is reported for it
(inprocess_stop_seconds{at="detach"} stays 0).

Cost: about 85 s (5 runs of 13-20 s).
"""

import unittest

import heapprof_harness as h

WAVES = 25
PER_WAVE = 8


def run(sampler, interval, program=None):
    """Runs the 200 children under a daemon (each exec'ing `program`, an
    argv, after 0-100 ms, if given); returns ({pid: (objects, bytes) in use} of the
    attached ones, the number of children)."""
    args = ["--sampler", sampler] + (["--sample-interval", str(interval)] if interval else [])
    inuse, children = {}, 0
    with h.Daemon(*args) as d, \
            h.Workload("forkfree", WAVES, PER_WAVE, *(program or [])) as w:
        d.profile(f"/debug/pprof/heap?pid={w.pid}")  # attaches the parent
        for i in range(WAVES):
            w.go()
            line = w._expect_line(30, "wave")
            h.check(line.startswith("wave "), f"forkfree said {line!r}")
            kids = [int(p) for p in line.split()[1:]]
            children += len(kids)
            line = w._expect_line(30, "exited")
            h.check_equal(line, "exited", f"wave {i}: children that failed")
            # Each child's exit is handled (its profile kept) before its
            # detach is counted.
            d.wait_until(lambda: not set(kids) & d.profiled_pids() and d.settled(), 30,
                         f"wave {i}: children detached")
            for pid in kids if not program else []:
                status, body = d.get(f"/debug/pprof/heap?pid={pid}")
                if status == 404:
                    continue  # never attached
                h.check_equal(status, 200, f"child {pid}: kept profile: {body[:200]!r}")
                samples = h.decode(body).samples
                inuse[pid] = (sum(s.values[2] for s in samples),
                              sum(s.values[3] for s in samples))
        w.go()
        w.wait_done()
        w.finish()
        m = d.metrics()
        log = d.stderr()
    # Children that exit during their attach are no error (issue 26, item 4).
    raced = {dict(labels)["reason"]: v for (name, labels), v in m.labelled.items()
             if name == "heapprofd_attach_raced_total"}
    print(f"  {sampler}: attach_errors_total {m['heapprofd_attach_errors_total']:g}, "
          f"raced {raced}, fork_attach_seconds mean "
          f"{m['heapprofd_fork_attach_seconds_sum'] / max(1, m['heapprofd_fork_attach_seconds_count']):.3f} s",
          flush=True)
    h.check_equal(m["heapprofd_attach_errors_total"], 0, "attach_errors_total")
    h.check_equal(m["heapprofd_fork_attach_seconds_count"], m["heapprofd_forks_attached_total"],
                  "fork_attach_seconds_count against forks_attached_total")
    # Without execs, every child exits before any detach: no detach stopped
    # a thread, and no attach's figure may be shown as a detach's.
    if not program:
        h.check_equal(m.labelled.get(("heapprofd_inprocess_stop_seconds", (("at", "detach"),))),
                      0, "inprocess_stop_seconds{at=\"detach\"} with no detach that stopped "
                      "a thread")
    alarms = [line for line in log.splitlines()
              if "sampler not used" in line or "is not profiled" in line]
    h.check(not alarms, f"{sampler}: false alarms in the log: {alarms[:5]}")
    return inuse, children


class ForkChildrenTest(unittest.TestCase):
    def check_children(self, sampler, interval):
        inuse, children = run(sampler, interval)
        left = {pid: v for pid, v in inuse.items() if v != (0, 0)}
        print(f"  {sampler}, interval {interval or 'default'}: {len(inuse)} of {children} "
              f"children attached, {len(left)} with something in use"
              + (f": {dict(list(left.items())[:8])}" if left else ""), flush=True)
        h.check(inuse, f"{sampler}: no child was attached: nothing checked")
        h.check(not left, f"{sampler}, interval {interval}: children that freed everything "
                          f"show (objects, bytes) in use: {left}")

    def test_children_that_exec_during_their_attach_are_no_error(self):
        """Each child execs `sleep 0.05` after 0-100 ms, often while it is
        being attached: attach_errors_total stays 0, no fallback nor
        unprofiled child is logged (run() checks), the races are counted
        apart."""
        _, children = run("inprocess", None, program=["/bin/sleep", "0.05"])
        h.check_equal(children, WAVES * PER_WAVE, "children forked")

    def test_uprobe_children_at_interval_1_show_nothing_in_use(self):
        self.check_children("uprobe", 1)

    def test_uprobe_children_at_the_default_interval_show_nothing_in_use(self):
        self.check_children("uprobe", None)

    def test_inprocess_children_at_interval_1_show_nothing_in_use(self):
        self.check_children("inprocess", 1)

    def test_inprocess_children_at_the_default_interval_show_nothing_in_use(self):
        self.check_children("inprocess", None)


if __name__ == "__main__":
    h.main()
