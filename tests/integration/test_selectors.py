"""Profiles of a service rather than a pid: `comm=`, `exe=`, `cgroup=` and
`unit=` on the profile endpoints answer the merged profile of every process
they match (attached on demand), each sample labelled pid and comm, with
the last profile of a matching process that exited merged in; and `pid=`
with a selector is a guard: a process that does not match it is refused
with 409 and not attached, so a stale pid target never attaches a stranger
that got its pid. All at --sample-interval 1: every figure is exact.

The names a test matches are made for this run (a symlink to a workload,
a cgroup named after this run's pid), so other processes never match them.
"""

import os
import shutil
import tempfile
import unittest

import heapprof_harness as h

TAG = str(os.getpid() % 100000)
EXACT = h.EXACT_EXPECTED
# The kept last profile of an exited process is there once the daemon's
# reaper (every second) has noticed the exit; headroom for a loaded machine.
KEPT_TIMEOUT_S = 5.0


def twice(totals):
    """Each leaf's totals doubled: two runs of exact.c."""
    return {fn: [2 * v for v in values] for fn, values in totals.items()}


def check_totals(got, expected, what):
    """Fails unless got has the expected leaves and totals (others all zero)."""
    wrong = [f"{fn}: expected {want}, got {got.get(fn)}"
             for fn, want in expected.items() if got.get(fn) != want]
    extra = [f"{fn}: {v}" for fn, v in got.items() if fn not in expected and any(v)]
    h.check(not wrong and not extra, f"{what}: wrong totals: {wrong}; unexpected: {extra}")


def by_pid(profile):
    """Totals per leaf of each pid label of a profile."""
    pids = {s.labels.get("pid") for s in profile.samples}
    return {pid: h.totals_by_leaf([s for s in profile.samples if s.labels.get("pid") == pid])
            for pid in pids}


def attach_counts(d):
    """(attached_total, targets) from /metrics."""
    m = d.metrics()
    return m["heapprofd_attached_total"], m["heapprofd_targets"]


class Named:
    """A directory with symlinks that give exact.c names of this run's own."""

    def __enter__(self):
        self.dir = tempfile.mkdtemp(prefix="heapprofd-selectors-")
        return self

    def __exit__(self, exc_type, exc, tb):
        shutil.rmtree(self.dir, ignore_errors=True)
        return False

    def program(self, name, copy=False):
        """exact.c as `name` (comm comes from the name exec'd); a copy is an
        executable of its own (/proc/PID/exe names the file itself)."""
        path = os.path.join(self.dir, name)
        exact = os.path.join(h.WORKLOADS, "exact")
        if copy:
            shutil.copy2(exact, path)
        else:
            os.symlink(exact, path)
        return os.path.realpath(path)


class SelectorsTest(unittest.TestCase):
    def test_comm_merges_two_processes_exactly_with_per_pid_labels(self):
        comm = f"hpsel{TAG}"
        with Named() as n, h.Daemon("--sample-interval", "1") as d:
            prog = n.program(comm, copy=True)  # an exe of its own too
            with h.Workload(os.path.join(n.dir, comm)) as a, \
                    h.Workload(os.path.join(n.dir, comm)) as b, h.Workload("exact") as other:
                before, _ = attach_counts(d)
                first = h.decode(d.profile(f"/debug/pprof/heap?comm={comm}"))  # attaches both
                h.check(not first.samples, f"nothing allocated yet: {h.describe(first.samples)}")
                after, targets = attach_counts(d)
                h.check_equal(after - before, 2, "processes the first ?comm= request attached")
                h.check(other.pid not in d.profiled_pids(), "a process of another name attached")
                a.run()
                b.run()
                other.run()
                p = h.decode(d.profile(f"/debug/pprof/heap?comm={comm}"))
                check_totals(h.totals_by_leaf(p.samples), twice(EXACT), f"?comm={comm}, merged")
                labels = {frozenset(s.labels.items()) for s in p.samples}
                h.check_equal({dict(lb)["pid"] for lb in labels}, {str(a.pid), str(b.pid)},
                              "the pid labels")
                h.check_equal({dict(lb)["comm"] for lb in labels}, {comm}, "the comm labels")
                h.check(all(set(dict(lb)) == {"pid", "comm"} for lb in labels),
                        f"samples without exactly a pid and a comm label: {labels}")
                for pid, totals in by_pid(p).items():
                    check_totals(totals, EXACT, f"?comm={comm}, the samples of pid {pid}")
                h.check(any(f"processes matching comm={comm}" in c for c in p.comments),
                        f"no comment says what the profile is of: {p.comments}")
                allocs = h.decode(d.profile(f"/debug/pprof/allocs?exe={prog}"))
                check_totals(h.totals_by_leaf(allocs.samples), twice(EXACT), f"allocs?exe={prog}")
                for form in ("debug=1", "format=folded", "format=text"):
                    r = d.request(f"/debug/pprof/heap?comm={comm}&{form}")
                    h.check_equal(r.status, 200, f"?comm= with {form}: {r.body[:200]!r}")
                b.finish()

                seen = []

                def kept_merged():
                    seen[:] = [h.decode(d.profile(f"/debug/pprof/heap?comm={comm}"))]
                    return any(f"process {b.pid} ({comm}) exited" in c for c in seen[0].comments)

                d.wait_until(kept_merged, KEPT_TIMEOUT_S,
                             f"the last profile of exited pid {b.pid} in ?comm={comm}")
                kept = seen[0]
                check_totals(h.totals_by_leaf(kept.samples), twice(EXACT),
                             f"?comm={comm} once pid {b.pid} exited")
                check_totals(by_pid(kept).get(str(b.pid), {}), EXACT, f"exited pid {b.pid}")
                h.check_equal(attach_counts(d)[0], after, "attaches after the first request")
                a.finish()

    def test_unit_and_cgroup_pick_the_processes_of_a_cgroup_made_for_the_test(self):
        unit = f"heapprofd-sel-{TAG}.service"
        with tempfile.TemporaryDirectory(prefix="heapprofd-selectors-") as tmp, \
                h.cgroup_for_test(tmp, unit) as (disk, path), \
                h.Daemon("--sample-interval", "1") as d, \
                h.Workload("exact") as inside, h.Workload("exact") as outside:
            with open(os.path.join(disk, "cgroup.procs"), "w") as f:
                f.write(f"{inside.pid}\n")
            with open(f"/proc/{inside.pid}/cgroup") as f:
                h.check(f"0::{path}\n" in f.read(), f"pid {inside.pid} is not in {path}")
            d.profile(f"/debug/pprof/heap?unit={unit}")  # attaches
            inside.run()
            outside.run()
            h.check(outside.pid not in d.profiled_pids(), "the process outside the unit attached")
            for query in (f"unit={unit}", f"unit={unit[:-len('.service')]}", f"cgroup={path}",
                          f"cgroup={path}&comm=exact&unit={unit}"):
                p = h.decode(d.profile(f"/debug/pprof/heap?{query}"))
                h.check_equal(set(by_pid(p)), {str(inside.pid)}, f"the pids of ?{query}")
                check_totals(h.totals_by_leaf(p.samples), EXACT, f"?{query}")
            for query in (f"unit={unit}&comm=other", "unit=heapprofd-no-such.service"):
                p = h.decode(d.profile(f"/debug/pprof/heap?{query}"))
                h.check(not p.samples, f"?{query} matches nothing: {h.describe(p.samples)}")
                h.check(any("no process that this caller may profile matches" in c
                            for c in p.comments), f"?{query}: comments {p.comments}")

    def test_a_pid_with_a_guard_it_does_not_match_is_refused_and_not_attached(self):
        with h.Daemon("--sample-interval", "1") as d, h.Workload("exact") as w:
            exe = os.path.realpath(os.path.join(h.WORKLOADS, "exact"))
            before = attach_counts(d)
            for guard, reason in ((f"comm=hpsel{TAG}", "its comm is exact"),
                                  ("exe=/usr/bin/redis-server", f"its exe is {exe}"),
                                  ("cgroup=/heapprofd-no-such", "its cgroup is"),
                                  ("unit=heapprofd-no-such.service", "is not in unit"),
                                  (f"comm=exact&exe=/usr/bin/redis-server", f"its exe is {exe}")):
                r = d.request(f"/debug/pprof/heap?pid={w.pid}&{guard}")
                h.check_equal(r.status, 409, f"pid {w.pid} with {guard}: {r.text()!r}")
                h.check_one_line_reason(r.body, "409 body")
                h.check(f"process {w.pid} does not match" in r.text() and reason in r.text(),
                        f"409 reason for {guard}: {r.text()!r}")
            h.check_equal(attach_counts(d), before, "(attached_total, targets) after the 409s")
            h.check(w.pid not in d.profiled_pids(), "a refused pid is in the index")
            h.check("audit: attach" not in d.stderr(), f"an audit line of an attach: {d.stderr()}")
            p = h.decode(d.profile(f"/debug/pprof/heap?pid={w.pid}&exe={exe}&comm=exact"))
            h.check(not p.samples, "a guard that matches: the profile of a process just attached")
            w.run()
            got = h.totals_by_leaf(h.decode(d.profile(f"/debug/pprof/heap?pid={w.pid}&exe={exe}"))
                                   .samples)
            check_totals(got, EXACT, f"pid {w.pid} with the guard of its own exe")
            h.check_equal(d.get(f"/debug/pprof/heap?pid={h.nonexistent_pid()}&comm=exact")[0], 404,
                          "a guard on a pid no process has")

    def test_a_reused_pid_scraped_with_its_exe_guard_is_refused(self):
        with Named() as n, h.Daemon("--sample-interval", "1") as d:
            first_exe = n.program(f"hpsela{TAG}", copy=True)
            with h.Workload(first_exe) as old:
                pid = old.pid
                d.profile(f"/debug/pprof/heap?pid={pid}&exe={first_exe}")  # attaches
                old.run()
                old.finish()
            # At once, within the reaper's second: another program at the same pid.
            with h.SpawnedWorkload(pid, "rounds") as stranger:
                before = attach_counts(d)
                r = d.request(f"/debug/pprof/heap?pid={pid}&exe={first_exe}")
                h.check_equal(r.status, 409, f"the reused pid {pid} with its old exe: {r.text()!r}")
                h.check(f"its exe is {os.path.realpath(os.path.join(h.WORKLOADS, 'rounds'))}"
                        in r.text(), f"409 reason: {r.text()!r}")
                h.check_equal(attach_counts(d)[0], before[0], "attached_total after the 409")
                # The old process's target goes once the reaper sees its exit;
                # the stranger never takes its place.
                d.wait_detached(pid, "the first process at the reused pid")
                stranger.run()
                h.check_equal(d.request(f"/debug/pprof/heap?pid={pid}&exe={first_exe}").status, 409,
                              "the reused pid, asked again")
                h.check(pid not in d.profiled_pids(), f"the stranger at pid {pid} was attached")
                h.check_equal(attach_counts(d), (before[0], 0), "(attached_total, targets) at the end")

    def test_bad_selectors_are_refused_with_a_reason(self):
        with h.Daemon() as d:
            for query, reason in (("comm=a&comm=b", "comm given twice"),
                                  ("exe=bin/redis", "bad exe"),
                                  ("cgroup=system.slice", "bad cgroup"),
                                  ("unit=a/b.service", "bad unit"),
                                  ("unit=", "bad unit"),
                                  ("comm=", "bad comm")):
                r = d.request(f"/debug/pprof/heap?{query}")
                h.check_equal(r.status, 400, f"?{query}: {r.text()!r}")
                h.check_one_line_reason(r.body, f"?{query}")
                h.check(reason in r.text(), f"?{query}: reason {r.text()!r}")


if __name__ == "__main__":
    h.main()
