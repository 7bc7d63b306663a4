"""How long a process stays attached (docs/usage.md, "How long a process is
profiled"): a process only requests named is let go --idle-detach after the
last one, its probes gone from its memory and its last profile kept for the
next request; a delta profile (seconds=) of a process nothing else holds
attaches it for the window only; --pid and rule targets stay; the index and
/metrics say why each target is held and until when; and a process that
exits is never a 404 in between: a request 10 ms after its exit, or while
it is a zombie, gets its last profile.

Whether probes are in a process is read from its memory: the kernel writes
an int3 at each probed instruction of the allocator's text, so the bytes of
the process's libc mapping differ from the file's exactly there. The tests
that look for them ask for the uprobe sampler; the in-process sampler's
detach is checked in test_inprocess.py."""

import os
import threading
import time
import unittest

import heapprof_harness as h

# --idle-detach of these tests: short, so that a let-go is seen in seconds;
# the daemon looks for idle targets once a second.
IDLE_S = 2
# How long after its deadline an idle target may take to go: the reaper's
# 1 s tick and the probes' removal (an RCU grace period, tens of ms).
IDLE_SLACK_S = 3.0


def held_reasons(d, pid):
    """The reasons /metrics gives for `pid` (heapprofd_target_held)."""
    m = d.metrics()
    return sorted(dict(labels)["reason"] for (name, labels), v in m.labelled.items()
                  if name == "heapprofd_target_held" and dict(labels)["pid"] == str(pid)
                  and v == 1)


def detach_in(d, pid):
    """/metrics' heapprofd_target_detach_in_seconds of `pid`."""
    m = d.metrics()
    for (name, labels), v in m.labelled.items():
        if name == "heapprofd_target_detach_in_seconds" and dict(labels)["pid"] == str(pid):
            return v
    raise h.Failure(f"no heapprofd_target_detach_in_seconds for pid {pid}")


class LifetimeTest(unittest.TestCase):
    def test_a_process_only_requests_named_is_let_go_after_idle_detach(self):
        with h.Daemon("--sampler", "uprobe", "--idle-detach", f"{IDLE_S}s", "--sample-interval", "1") as d, \
                h.Workload("exits", 60000) as w:
            h.check_equal(h.allocator_breakpoints(w.pid), [], "probes before any request")
            d.profile(f"/debug/pprof/heap?pid={w.pid}")
            w.go()
            t = d.index_entry(w.pid)
            h.check(t is not None, f"pid {w.pid} is not in the index after a request")
            h.check_equal(t["held_by"], ["request"], "held_by in the JSON index")
            h.check(0 < t["detach_in_seconds"] <= IDLE_S,
                    f"detach_in_seconds {t['detach_in_seconds']}, expected in (0, {IDLE_S}]")
            h.check_equal(held_reasons(d, w.pid), ["request"], "heapprofd_target_held reasons")
            h.check(len(h.allocator_breakpoints(w.pid)) > 0, "no probes in the process while attached")
            # A second request a second later pushes the deadline back.
            time.sleep(1.0)
            d.profile(f"/debug/pprof/heap?pid={w.pid}")
            last_request = time.monotonic()
            h.check(detach_in(d, w.pid) > IDLE_S - 0.5,
                    f"after a second request the deadline is {detach_in(d, w.pid):.2f} s away")
            took = d.wait_detached(w.pid, "an idle target", IDLE_S + IDLE_SLACK_S)
            gone_after = time.monotonic() - last_request
            h.check(gone_after >= IDLE_S,
                    f"let go {gone_after:.2f} s after the last request, before --idle-detach {IDLE_S}s"
                    f" (waited {took:.2f} s)")
            h.check_equal(h.allocator_breakpoints(w.pid), [], "probes in the process after it was let go")
            h.check_equal(d.metric("heapprofd_idle_detached_total"), 1.0, "idle_detached_total")

            # The next request gets the profile it had when let go, and attaches again.
            body = d.profile(f"/debug/pprof/heap?pid={w.pid}")
            text = h.pprof(body, "-comments")
            h.check("detached after 2 s without a request" in text,
                    f"the answer after an idle detach is not the kept profile; comments:\n{text}")
            kept = h.totals_by_leaf(h.decode(body).samples).get("alloc_forever", [0])[0]
            h.check(kept > 0, "the kept profile has no alloc_forever samples")
            h.check(d.index_entry(w.pid) is not None, "not attached again by the next request")
            h.check(len(h.allocator_breakpoints(w.pid)) > 0, "no probes after the next request")
            fresh = h.totals_by_leaf(h.decode(d.profile(f"/debug/pprof/heap?pid={w.pid}")).samples)
            h.check(fresh.get("alloc_forever", [0])[0] < kept,
                    f"the profile after attaching again counts {fresh} allocations, not only the "
                    f"new ones (the kept profile had {kept})")

    def test_a_window_attaches_only_for_its_seconds(self):
        with h.Daemon("--sampler", "uprobe", "--sample-interval", "1") as d, h.Workload("exits", 60000) as w:
            w.go()
            result = {}

            def scrape():
                result["body"] = d.profile(f"/debug/pprof/allocs?pid={w.pid}&seconds=2", timeout=30)

            t = threading.Thread(target=scrape)
            t.start()
            d.wait_until(lambda: d.index_entry(w.pid) is not None, 10, "attached for the window")
            during = d.index_entry(w.pid)
            h.check_equal(during["held_by"], ["window"], "held_by during the window")
            h.check(0 <= during["detach_in_seconds"] <= 2,
                    f"detach_in_seconds {during['detach_in_seconds']} during a 2 s window")
            h.check(len(h.allocator_breakpoints(w.pid)) > 0, "no probes during the window")
            t.join(30)
            h.check("body" in result, "the seconds=2 request did not answer")
            # Let go before the answer: nothing else held it.
            h.check(d.index_entry(w.pid) is None, "still attached after its window")
            h.check_equal(h.allocator_breakpoints(w.pid), [], "probes after the window")
            delta = h.totals_by_leaf(h.decode(result["body"]).samples).get("alloc_forever", [0])
            h.check(0 < delta[0] <= 2100, f"alloc_forever in a 2 s window: {delta}")
            h.check_equal(d.metric("heapprofd_idle_detached_total"), 1.0, "idle_detached_total")

    def test_a_window_on_a_held_process_leaves_it_held(self):
        with h.Daemon("--sample-interval", "1") as d, h.Workload("exits", 60000) as w:
            d.profile(f"/debug/pprof/heap?pid={w.pid}")
            w.go()
            before = d.index_entry(w.pid)["detach_in_seconds"]
            d.profile(f"/debug/pprof/allocs?pid={w.pid}&seconds=1", timeout=30)
            after = d.index_entry(w.pid)
            h.check(after is not None, "a window let go of a process a request holds")
            h.check_equal(after["held_by"], ["request"], "held_by after the window")
            # seconds= is not a request for the process: it does not extend the hold.
            h.check(after["detach_in_seconds"] <= before,
                    f"a window pushed the request's deadline from {before} to "
                    f"{after['detach_in_seconds']}")

    def test_idle_detach_0_keeps_a_requested_process_and_pid_and_rule_targets_stay(self):
        comm = f"hplt{os.getpid()}"
        with h.Workload("exits", 60000) as w, h.Workload(h.workload_alias("exits", comm), 60000) as r:
            with h.Daemon("--idle-detach", "0") as d:
                d.profile(f"/debug/pprof/heap?pid={w.pid}")
                t = d.index_entry(w.pid)
                h.check(t["detach_in_seconds"] is None,
                        f"detach_in_seconds with --idle-detach 0: {t['detach_in_seconds']}")
                h.check_equal(detach_in(d, w.pid), float("inf"), "detach_in_seconds in /metrics")
            with h.Daemon("--idle-detach", "1s", "--pid", str(w.pid), "--comm", comm) as d:
                d.profile(f"/debug/pprof/heap?pid={r.pid}")
                h.check_equal(d.index_entry(w.pid)["held_by"], ["pid"], "held_by of a --pid process")
                h.check_equal(d.index_entry(r.pid)["held_by"], ["rule", "request"],
                              "held_by of a rule's process that a request named")
                # Past the request's idle time (1 s, and the reaper's tick), both stay.
                h.check_throughout(lambda: d.index_entry(w.pid) and d.index_entry(r.pid),
                                   1 + IDLE_SLACK_S, "--pid and rule targets stay attached")
                h.check_equal(d.index_entry(r.pid)["held_by"], ["rule"], "held_by once idle")

    def test_a_request_10_ms_after_exit_gets_the_last_profile(self):
        with h.Daemon("--sample-interval", "1") as d:
            for reaped in (False, True):
                with h.Workload("exits", 300) as w:
                    d.profile(f"/debug/pprof/heap?pid={w.pid}")
                    w.go()
                    # Wait for the exit without reaping it: a zombie, or else reaped.
                    os.waitid(os.P_PID, w.pid, os.WEXITED | (0 if reaped else os.WNOWAIT))
                    time.sleep(0.010)
                    what = "reaped" if reaped else "a zombie"
                    status, body = d.get(f"/debug/pprof/heap?pid={w.pid}")
                    h.check_equal(status, 200, f"a request 10 ms after the exit ({what})")
                    text = h.pprof(body, "-comments")
                    h.check(f"process {w.pid} exited" in text,
                            f"the answer 10 ms after the exit ({what}) is not its last profile; "
                            f"comments:\n{text}")
                    got = h.totals_by_leaf(h.decode(body).samples).get("alloc_forever", [0])
                    h.check(got[0] > 0, f"the last profile ({what}) has no alloc_forever: {got}")
                    if reaped:
                        w.proc.returncode = 0  # reaped here, not by Popen

    def test_a_selector_holds_its_processes_as_a_request_does(self):
        """comm= attaches through the same path as pid=: each process it picks
        is held by `request` and let go after --idle-detach; with seconds= for
        the window only; and one that exits is in the next answer at once,
        labelled by its pid and comm (its last profile, kept at the exit)."""
        comm = f"hpls{os.getpid()}"
        path = h.workload_alias("exits", comm)
        with h.Daemon("--sampler", "uprobe", "--idle-detach", f"{IDLE_S}s", "--sample-interval", "1") as d, \
                h.Workload(path, 60000) as a, h.Workload(path, 300) as b:
            d.profile(f"/debug/pprof/heap?comm={comm}")
            for w in (a, b):
                h.check_equal(d.index_entry(w.pid)["held_by"], ["request"],
                              f"held_by of pid {w.pid} after ?comm=")
            for w in (a, b):
                d.wait_detached(w.pid, "a process a selector named, idle", IDLE_S + IDLE_SLACK_S)
                h.check_equal(h.allocator_breakpoints(w.pid), [], f"probes in pid {w.pid} once idle")
            h.check_equal(d.metric("heapprofd_idle_detached_total"), 2.0, "idle_detached_total")

            result = {}

            def scrape():
                result["body"] = d.profile(f"/debug/pprof/allocs?comm={comm}&seconds=2", timeout=30)

            t = threading.Thread(target=scrape)
            t.start()
            d.wait_until(lambda: all(d.index_entry(w.pid) for w in (a, b)), 10,
                         "both attached for the window")
            for w in (a, b):
                h.check_equal(d.index_entry(w.pid)["held_by"], ["window"],
                              f"held_by of pid {w.pid} during ?comm=&seconds=2")
            a.go()
            t.join(30)
            h.check("body" in result, "the ?comm=&seconds=2 request did not answer")
            for w in (a, b):
                h.check(d.index_entry(w.pid) is None, f"pid {w.pid} still attached after its window")
                h.check_equal(h.allocator_breakpoints(w.pid), [], f"probes in pid {w.pid} after it")
            window = h.decode(result["body"])
            h.check_equal({s.labels.get("pid") for s in window.samples}, {str(a.pid)},
                          "the pids of the window's samples")

            d.profile(f"/debug/pprof/heap?comm={comm}")  # held again
            b.go()
            os.waitid(os.P_PID, b.pid, os.WEXITED | os.WNOWAIT)
            time.sleep(0.010)
            p = h.decode(d.profile(f"/debug/pprof/heap?comm={comm}"))
            h.check(any(f"process {b.pid} ({comm}) exited" in c for c in p.comments),
                    f"10 ms after pid {b.pid} exited, ?comm= does not merge its last profile: "
                    f"{p.comments}")
            mine = [s for s in p.samples if s.labels.get("pid") == str(b.pid)]
            h.check(mine and all(s.labels.get("comm") == comm for s in mine),
                    f"the exited pid's samples, labelled pid and comm: {[s.labels for s in mine]}")


if __name__ == "__main__":
    h.main()
