"""The HTTP interface at its edges: status codes and one-line reasons for
missing processes (404), malformed parameters (400) and unknown paths (404);
/healthz, the index and /metrics; many concurrent requests; processes that
exit or are killed while profiled (404 afterwards, daemon unharmed); and
delta profiles (seconds=1) that cover only their window. One daemon with
--sample-interval 1 serves all of it."""

import concurrent.futures
import contextlib
import re
import time

import heapprof_harness as h

# Shared by the tests: the daemon, and a live exact workload that has run to
# `done` (a valid pid for requests whose other parameters are wrong).
STATE = {}
# How long a workload that allocates every millisecond may take to be seen
# making a few (or a thousand) allocations at --sample-interval 1.
SAMPLES_TIMEOUT_S = 10.0


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


def test_healthz_answers_200_ok():
    status, body = daemon().get("/healthz")
    h.check(status == 200 and body.strip() == b"ok",
            f"GET /healthz: expected 200 'ok', got {status} {body!r}")


def test_a_pid_that_does_not_exist_is_404_with_a_one_line_reason():
    pid = h.nonexistent_pid()
    for endpoint in ("heap", "allocs"):
        check_status(f"/debug/pprof/{endpoint}?pid={pid}", 404)


def test_each_malformed_parameter_is_400_with_a_one_line_reason():
    errors = []
    for endpoint in ("heap", "allocs"):
        for query in malformed_queries(live_pid()):
            try:
                check_status(f"/debug/pprof/{endpoint}?{query}", 400)
            except h.Failure as e:
                errors.append(str(e))
    h.check(not errors, "\n".join(errors))


def test_an_unknown_parameter_is_ignored():
    path = f"/debug/pprof/heap?pid={live_pid()}&nosuchparameter=1"
    h.decode(daemon().profile(path))


def test_unknown_paths_are_404():
    for path in ("/nosuchpath", "/debug/pprof/nosuchprofile", "/debug/pprof/heap/x"):
        check_status(path, 404)


def test_index_lists_the_profiled_pid():
    r = daemon().request("/debug/pprof/")
    h.check_equal(r.status, 200, "GET /debug/pprof/: status")
    h.check(r.headers.get("content-type", "").startswith("text/html"),
            f"GET /debug/pprof/: content type {r.headers.get('content-type')!r}, "
            f"expected text/html")
    h.check(re.search(rf"\b{live_pid()}\b", r.text()),
            f"GET /debug/pprof/: pid {live_pid()} not listed:\n{r.text()[:1000]}")


def test_metrics_are_prometheus_text():
    m = daemon().metrics()  # fails unless it is valid Prometheus text
    h.check(m.get("heapprofd_targets", 0) >= 1,
            f"heapprofd_targets with the live workload attached: {m.get('heapprofd_targets')}")


def test_debug_1_is_legacy_text():
    status, body = daemon().get(f"/debug/pprof/heap?pid={live_pid()}&debug=1")
    h.check(status == 200 and body.startswith(b"heap profile:"),
            f"debug=1: expected 200 starting 'heap profile:', got {status} {body[:200]!r}")


def test_concurrent_requests_are_all_answered():
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


def test_a_delta_profile_does_not_hold_up_other_requests():
    pid = live_pid()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        start = time.monotonic()
        delta = pool.submit(daemon().get, f"/debug/pprof/heap?pid={pid}&seconds=2")
        # Time for the delta request to start its window. Nothing shows that
        # it has; had it not, the requests below would still be timed, only
        # not against it: a weaker check, never a wrong one.
        time.sleep(0.3)
        slow = []
        for path in ("/healthz", f"/debug/pprof/heap?pid={pid}", "/metrics"):
            t = time.monotonic()
            status, _ = daemon().get(path, timeout=10)
            took = time.monotonic() - t
            # Far below the 2 s window: a request queued behind it would take ~1.7 s.
            if status != 200 or took > 0.5:
                slow.append(f"GET {path}: {status} after {took:.2f} s")
        status, _ = delta.result(timeout=30)
        elapsed = time.monotonic() - start
    h.check(not slow, "during a seconds=2 delta profile: " + "; ".join(slow))
    h.check(status == 200 and elapsed >= 1.9,
            f"seconds=2: expected 200 after about 2 s, got {status} after {elapsed:.2f} s")


def test_a_process_killed_mid_profile_is_404_and_the_daemon_keeps_serving():
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
        check_status(f"/debug/pprof/heap?pid={w.pid}", 404)
    d.check_alive("after a profiled process was killed")
    check_status("/healthz", 200, one_line=False)
    # A new workload is still profiled exactly.
    with h.Workload("exact") as w2:
        d.profile(f"/debug/pprof/heap?pid={w2.pid}")
        w2.run()
        totals = h.totals_by_leaf(h.decode(d.profile(f"/debug/pprof/heap?pid={w2.pid}")).samples)
        w2.finish()
    h.check_equal(totals.get("alloc_small"), [1000, 100000, 1000, 100000],
                  "exact after a killed process: alloc_small totals")
    h.check_equal(totals.get("alloc_freed"), [500, 32000, 0, 0],
                  "exact after a killed process: alloc_freed totals")


def test_a_process_that_exits_by_itself_is_404_afterwards():
    d = daemon()
    with h.Workload("exits", 300) as w:
        d.profile(f"/debug/pprof/heap?pid={w.pid}")  # attaches
        w.go()
        try:
            status = w.proc.wait(10)
        except Exception:
            raise h.Failure("exits 300 did not exit within 10 s") from None
        h.check_equal(status, 0, "exits 300: exit status")
        check_status(f"/debug/pprof/heap?pid={w.pid}", 404)
    d.check_alive("after a profiled process exited")


def test_a_delta_profile_covers_only_its_seconds():
    d = daemon()

    def alloc_forever(body):
        """alloc_forever's totals in a profile."""
        return h.totals_by_leaf(h.decode(body).samples).get("alloc_forever", [0, 0, 0, 0])

    with h.Workload("exits", 30000) as w:
        d.profile(f"/debug/pprof/heap?pid={w.pid}")  # attaches
        w.go()
        # Allocations before the window, which must not count in it.
        before = [0]

        def history():
            before[:] = alloc_forever(d.profile(f"/debug/pprof/heap?pid={w.pid}"))
            return before[0] >= 1000

        d.wait_until(history, SAMPLES_TIMEOUT_S,
                     lambda: f"1000 allocations before the window (so far {before[0]})")
        start = time.monotonic()
        delta = alloc_forever(d.profile(f"/debug/pprof/heap?pid={w.pid}&seconds=1", timeout=30))
        elapsed = time.monotonic() - start
        after = alloc_forever(d.profile(f"/debug/pprof/heap?pid={w.pid}"))
        w.kill()
    h.check(elapsed >= 0.9, f"seconds=1 answered after {elapsed:.2f} s, expected about 1 s")
    # About 1000 allocations a second; loose bounds, the rate depends on scheduling.
    h.check(300 <= delta[0] <= 3000,
            f"alloc_forever alloc_objects in a 1 s delta: {delta[0]}, expected 300..3000 "
            f"(delta {delta}, cumulative before {before}, after {after})")
    # The window lies between the two cumulative profiles, so at interval 1 the
    # delta can hold no more than what was allocated between them.
    h.check(delta[0] <= after[0] - before[0],
            f"the 1 s delta counts {delta[0]} allocations, but only {after[0] - before[0]} "
            f"happened between the cumulative profiles around it ({before[0]} -> {after[0]})")
    h.check_equal(delta[1], delta[0] * 1000,
                  "alloc_forever alloc_space in the delta (1000 bytes each)")


if __name__ == "__main__":
    h.run([
        test_healthz_answers_200_ok,
        test_a_pid_that_does_not_exist_is_404_with_a_one_line_reason,
        test_each_malformed_parameter_is_400_with_a_one_line_reason,
        test_an_unknown_parameter_is_ignored,
        test_unknown_paths_are_404,
        test_index_lists_the_profiled_pid,
        test_metrics_are_prometheus_text,
        test_debug_1_is_legacy_text,
        test_concurrent_requests_are_all_answered,
        test_a_delta_profile_does_not_hold_up_other_requests,
        test_a_process_killed_mid_profile_is_404_and_the_daemon_keeps_serving,
        test_a_process_that_exits_by_itself_is_404_afterwards,
        test_a_delta_profile_covers_only_its_seconds,
    ], around=daemon_and_live_workload)
