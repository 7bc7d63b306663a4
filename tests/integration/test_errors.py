"""The HTTP interface at its edges: status codes and one-line reasons for
missing processes (404), malformed parameters (400) and unknown paths (404);
/healthz, the index and /metrics; many concurrent requests; processes that
exit or are killed while profiled (their last profile at once, never a 404
in between; the daemon unharmed); and
delta profiles that cover exactly their window and hold up no other request
(the window's opening is seen in /metrics: heapprofd_delta_windows_open). One daemon with
--sample-interval 1 serves all of it."""

import concurrent.futures
import contextlib
import re
import time
import unittest

import heapprof_harness as h

# Shared by the tests: the daemon, and a live exact workload that has run to
# `done` (a valid pid for requests whose other parameters are wrong).
STATE = {}
# How long a workload that allocates every millisecond may take to be seen
# making a few (or a thousand) allocations at --sample-interval 1.
SAMPLES_TIMEOUT_S = 10.0
# The window of the delta profiles here: what the tests do inside it takes
# milliseconds; the rest is room for a loaded machine (the tests check the
# order of events, never how long they took).
DELTA_S = 5


@contextlib.contextmanager
def daemon_and_live_workload():
    """Starts heapprofd --sample-interval 1 and a live, profiled exact workload."""
    with h.Daemon("--sample-interval", "1") as d, h.Workload("exact") as live:
        d.profile(f"/debug/pprof/heap?pid={live.pid}")  # attaches
        live.run()
        STATE.update(daemon=d, live=live)
        yield
        d.check_alive("after all tests")


def daemon():
    """The shared daemon."""
    return STATE["daemon"]


def live_pid():
    """The pid of the shared live workload."""
    return STATE["live"].pid


def check_status(path, want, one_line=True):
    """GETs path; fails unless the status is want (and the body one line if asked)."""
    status, body = daemon().get(path)
    h.check(status == want, f"GET {path}: expected {want}, got {status}, body {body[:300]!r}")
    if one_line:
        h.check_one_line_reason(body, f"GET {path} ({status})")
    return body


def malformed_queries(pid):
    """Queries that must be answered 400: each has one bad parameter."""
    return [
        "pid=abc", "pid=-1", "pid=", "pid=1x", "pid=99999999999",
        f"pid={pid}&seconds=abc", f"pid={pid}&seconds=0", f"pid={pid}&seconds=99999999999",
        f"pid={pid}&debug=abc",
    ]


def check_last_profile(pid, what):
    """Fails unless a request for `pid`, which exited, gets its kept last
    profile at once (the exit event or the request itself keeps it)."""
    body = daemon().profile(f"/debug/pprof/heap?pid={pid}")
    comments = h.pprof(body, "-comments")
    h.check(f"process {pid} exited" in comments,
            f"{what}: the answer right after the exit is not the kept last profile; "
            f"comments:\n{comments}")


def setUpModule():
    unittest.enterModuleContext(daemon_and_live_workload())



class ErrorsTest(unittest.TestCase):
    def test_healthz_answers_200_ok(self):
        status, body = daemon().get("/healthz")
        h.check(status == 200 and body.strip() == b"ok",
                f"GET /healthz: expected 200 'ok', got {status} {body!r}")

    def test_a_pid_that_does_not_exist_is_404_with_a_one_line_reason(self):
        pid = h.nonexistent_pid()
        for endpoint in ("heap", "allocs"):
            check_status(f"/debug/pprof/{endpoint}?pid={pid}", 404)

    def test_each_malformed_parameter_is_400_with_a_one_line_reason(self):
        errors = []
        for endpoint in ("heap", "allocs"):
            for query in malformed_queries(live_pid()):
                try:
                    check_status(f"/debug/pprof/{endpoint}?{query}", 400)
                except h.Failure as e:
                    errors.append(str(e))
        h.check(not errors, "\n".join(errors))

    def test_an_unknown_parameter_is_ignored(self):
        path = f"/debug/pprof/heap?pid={live_pid()}&nosuchparameter=1"
        h.decode(daemon().profile(path))

    def test_unknown_paths_are_404(self):
        for path in ("/nosuchpath", "/debug/pprof/nosuchprofile", "/debug/pprof/heap/x"):
            check_status(path, 404)

    def test_index_lists_the_profiled_pid(self):
        r = daemon().request("/debug/pprof/")
        h.check_equal(r.status, 200, "GET /debug/pprof/: status")
        h.check(r.headers.get("content-type", "").startswith("text/html"),
                f"GET /debug/pprof/: content type {r.headers.get('content-type')!r}, "
                f"expected text/html")
        h.check(re.search(rf"\b{live_pid()}\b", r.text()),
                f"GET /debug/pprof/: pid {live_pid()} not listed:\n{r.text()[:1000]}")

    def test_metrics_are_prometheus_text(self):
        m = daemon().metrics()  # fails unless it is valid Prometheus text
        h.check(m.get("heapprofd_targets", 0) >= 1,
                f"heapprofd_targets with the live workload attached: {m.get('heapprofd_targets')}")

    def test_debug_1_is_legacy_text(self):
        status, body = daemon().get(f"/debug/pprof/heap?pid={live_pid()}&debug=1")
        h.check(status == 200 and body.startswith(b"heap profile:"),
                f"debug=1: expected 200 starting 'heap profile:', got {status} {body[:200]!r}")

    def test_concurrent_requests_are_all_answered(self):
        pid, missing = live_pid(), h.nonexistent_pid()
        mix = [
            ("/healthz", 200),
            (f"/debug/pprof/heap?pid={pid}", 200),
            ("/debug/pprof/heap?pid=abc", 400),
            ("/nosuchpath", 404),
            (f"/debug/pprof/allocs?pid={pid}", 200),
            (f"/debug/pprof/heap?pid={missing}", 404),
            ("/metrics", 200),
            (f"/debug/pprof/heap?pid={pid}&debug=1", 200),
            ("/debug/pprof/", 200),
            (f"/debug/pprof/heap?pid={pid}&seconds=0", 400),
        ]
        threads, per_thread = 16, 10

        def worker(i):
            wrong = []
            for j in range(per_thread):
                path, want = mix[(i + j) % len(mix)]
                try:
                    status, body = daemon().get(path, timeout=60)
                except Exception as e:  # refused, reset, timed out
                    wrong.append(f"GET {path}: {type(e).__name__}: {e}")
                    continue
                if status != want or (want == 200 and not body):
                    wrong.append(f"GET {path}: expected {want}, got {status} ({len(body)} bytes)")
            return wrong

        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            results = list(pool.map(worker, range(threads)))
        wrong = [w for ws in results for w in ws]
        h.check(not wrong, f"{len(wrong)} of {threads * per_thread} concurrent requests went "
                           f"wrong:\n" + "\n".join(wrong[:20]))
        daemon().check_alive("after concurrent requests")
        check_status("/healthz", 200, one_line=False)

    def test_a_delta_profile_does_not_hold_up_other_requests(self):
        """While a delta profile is in its window, other requests are answered:
        each before the delta returns (an order, not a time: a request queued
        behind the delta would come after it, however fast the machine)."""
        pid = live_pid()
        d = daemon()
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            start = time.monotonic()
            delta = pool.submit(d.get, f"/debug/pprof/heap?pid={pid}&seconds={DELTA_S}")
            h.wait_delta_window_open(d, delta)
            for path in ("/healthz", f"/debug/pprof/heap?pid={pid}", "/metrics"):
                status, _ = d.get(path)
                h.check_equal(status, 200, f"GET {path} during a seconds={DELTA_S} delta profile")
                h.check(not delta.done(),
                        f"GET {path} was answered only after the seconds={DELTA_S} delta profile "
                        f"that it should not wait for")
            status, _ = delta.result()
            elapsed = time.monotonic() - start
        h.check(status == 200 and elapsed >= DELTA_S - 0.1,
                f"seconds={DELTA_S}: expected 200 after {DELTA_S} s at least, got {status} "
                f"after {elapsed:.2f} s")

    def test_a_process_killed_mid_profile_keeps_its_last_profile_and_the_daemon_keeps_serving(self):
        d = daemon()
        with h.Workload("exits", 60000) as w:
            d.profile(f"/debug/pprof/heap?pid={w.pid}")  # attaches
            w.go()
            # exits.c allocates every millisecond: samples come at once.
            seen = []

            def sampled():
                seen[:] = h.decode(d.profile(f"/debug/pprof/heap?pid={w.pid}")).samples
                return h.totals_by_leaf(seen).get("alloc_forever", [0])[0] > 0

            d.wait_until(sampled, SAMPLES_TIMEOUT_S,
                         lambda: f"exits: alloc_forever samples; samples:\n{h.describe(seen)}")
            w.kill()
            check_last_profile(w.pid, "a process killed mid-profile")
        d.check_alive("after a profiled process was killed")
        check_status("/healthz", 200, one_line=False)
        # A new workload is still profiled exactly.
        with h.Workload("exact") as w2:
            d.profile(f"/debug/pprof/heap?pid={w2.pid}")
            w2.run()
            profile = h.decode(d.profile(f"/debug/pprof/heap?pid={w2.pid}"))
            totals = h.totals_by_leaf(profile.samples)
            w2.finish()
        h.check_equal(totals.get("alloc_small"), [1000, 100000, 1000, 100000],
                      "exact after a killed process: alloc_small totals")
        h.check_equal(totals.get("alloc_freed"), [500, 32000, 0, 0],
                      "exact after a killed process: alloc_freed totals")

    def test_a_process_that_exits_by_itself_keeps_its_last_profile(self):
        d = daemon()
        with h.Workload("exits", 300) as w:
            d.profile(f"/debug/pprof/heap?pid={w.pid}")  # attaches
            w.go()
            try:
                status = w.proc.wait(10)
            except Exception:
                raise h.Failure("exits 300 did not exit within 10 s") from None
            h.check_equal(status, 0, "exits 300: exit status")
            check_last_profile(w.pid, "a process that exited by itself")
        d.check_alive("after a profiled process exited")

    def test_a_delta_profile_covers_only_its_seconds(self):
        """rounds.c's first round before the window, its second inside it (the
        window is known to be open, from /metrics, before the round starts, and
        still open once it is done): the delta holds exactly the second round's
        allocations, and in-use values as at the end."""
        d = daemon()
        with h.Workload("rounds") as w, concurrent.futures.ThreadPoolExecutor(1) as pool:
            d.profile(f"/debug/pprof/heap?pid={w.pid}")  # attaches
            w.run()  # round 1: 300 x malloc(1000), before the window
            start = time.monotonic()
            delta = pool.submit(d.profile, f"/debug/pprof/heap?pid={w.pid}&seconds={DELTA_S}")
            h.wait_delta_window_open(d, delta)
            w.run()  # round 2: frees 100 of round 1's blocks, 40 x malloc(5000)
            h.check(d.metric("heapprofd_delta_windows_open") == 1 and not delta.done(),
                    f"the seconds={DELTA_S} window closed before rounds.c's second round was done "
                    f"({time.monotonic() - start:.1f} s after the request): the machine is too "
                    f"loaded for the window this test gives it")
            body = delta.result()
            elapsed = time.monotonic() - start
            w.finish()
        h.check(elapsed >= DELTA_S - 0.1,
                f"seconds={DELTA_S} answered after {elapsed:.2f} s, expected {DELTA_S} s at least")
        totals = h.totals_by_leaf(h.decode(body).samples)
        want = {"round1_alloc": [0, 0, 200, 200000], "round2_alloc": [40, 200000, 40, 200000]}
        h.check_equal({fn: v for fn, v in totals.items() if any(v)}, want,
                      "the delta's totals per leaf [alloc_objects, alloc_space, inuse_objects, "
                      "inuse_space]: round 2's allocations alone, in-use as at the end")


if __name__ == "__main__":
    h.main()
