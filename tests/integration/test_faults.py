"""Faults and load: BPF maps filled to capacity (tiny sizes set for the
test) lose samples only where /metrics counts them, with exact accounting at
--sample-interval 1; many parallel clients while workloads allocate, start
and exit; a target SIGKILLed in the middle of a delta scrape; heapprofd
itself SIGKILLed and restarted on its pinned maps. Each ends with the daemon
serving and no wrong figures."""

import concurrent.futures
import os
import shutil
import signal
import time
import unittest

import heapprof_harness as h

# many_stacks.c: 200 depths x 10 blocks of 64 bytes, all kept.
MANY_STACKS_ALLOCATIONS = 2000
# Load test bounds: clients, and how long they hammer (seconds).
LOAD_CLIENTS = 24
LOAD_SECONDS = 8
# The daemon's resident memory after the load test may not pass this: the
# symbol cache, per-request buffers and libbpf/MHD state, with room to spare.
RSS_BOUND_KB = 256 * 1024


def unique_pin_dir(tag):
    """A pin directory of this test run's own, under the bpf filesystem."""
    return f"/sys/fs/bpf/heapprofd-test-{tag}-{os.getpid()}"


def check_answer(path, status, body):
    """A load-test answer is one of the statuses the API defines, and a 200
    profile is gzip."""
    h.check(status in (200, 400, 404, 503), f"GET {path}: status {status}")
    if status == 200 and "/debug/pprof/heap" in path and "debug=1" not in path:
        h.check(body[:2] == b"\x1f\x8b", f"GET {path}: 200 but not gzip")


def rss_kb(pid):
    """Resident memory of a process in KiB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class FaultsTest(unittest.TestCase):
    def test_full_maps_drop_only_what_metrics_count(self):
        with h.Daemon("--sample-interval", "1", "--max-stacks", "16", "--max-live", "64",
                      "--max-counts", "16") as d, h.Workload("many_stacks") as w:
            d.profile(f"/debug/pprof/heap?pid={w.pid}")
            w.run()
            prof = h.decode(d.profile(f"/debug/pprof/heap?pid={w.pid}"))
            m = d.metrics()
            w.finish()
            d.check_alive()
        recorded = m["heapprofd_samples_total"]
        dropped = (m["heapprofd_samples_dropped_stack_map_full_total"] +
                   m["heapprofd_samples_dropped_counts_map_full_total"] +
                   m["heapprofd_samples_dropped_pending_map_full_total"])
        untracked = m["heapprofd_allocations_untracked_live_map_full_total"]
        h.check(m["heapprofd_samples_dropped_stack_map_full_total"] > 0,
                f"a 16-entry stack map should overflow with 200 stacks: {m}")
        h.check(untracked > 0, f"a 64-entry live map should overflow with 2000 blocks: {m}")
        # Every allocation is either recorded or counted as dropped.
        h.check_equal(recorded + dropped, MANY_STACKS_ALLOCATIONS, "recorded + dropped samples")
        alloc = sum(s.values[0] for s in prof.samples)
        inuse = sum(s.values[2] for s in prof.samples)
        # The profile shows exactly what was recorded, and in-use misses exactly
        # the allocations the live map had no room for (none were freed).
        h.check_equal(alloc, recorded, "alloc_objects in the profile")
        h.check_equal(inuse, recorded - untracked, "inuse_objects in the profile")
        h.check(all(s.values[1] == 64 * s.values[0] for s in prof.samples),
                "every sample's alloc_space is 64 bytes per object")

    def test_parallel_clients_while_workloads_come_and_go(self):
        with h.Daemon("--sample-interval", "4096") as d:
            stop_at = time.monotonic() + LOAD_SECONDS
            churn = []
            # exits.c allocates 1000 bytes a millisecond and exits after argv[1] ms.
            workloads = [h.Workload("exits", "60000") for _ in range(2)]
            for w in workloads:
                w.go()
            pids = [w.pid for w in workloads]
            paths = ["/metrics", "/debug/pprof/", "/healthz", "/debug/pprof/heap?pid=abc",
                     f"/debug/pprof/heap?pid={h.nonexistent_pid()}"]

            def client(i):
                answered = 0
                while time.monotonic() < stop_at:
                    for path in paths + [f"/debug/pprof/heap?pid={p}" for p in pids] + \
                            [f"/debug/pprof/allocs?pid={pids[0]}&debug=1"]:
                        status, body = d.get(path)
                        check_answer(path, status, body)
                        answered += 1
                return answered

            with concurrent.futures.ThreadPoolExecutor(LOAD_CLIENTS) as pool:
                futures = [pool.submit(client, i) for i in range(LOAD_CLIENTS)]
                # Meanwhile processes start, get profiled and exit.
                while time.monotonic() < stop_at:
                    w = h.Workload("exits", "300")
                    w.go()
                    d.get(f"/debug/pprof/heap?pid={w.pid}")
                    churn.append(w)
                    time.sleep(0.4)  # the pace of new targets, not a wait for the daemon
                answered = sum(f.result() for f in futures)
            for w in workloads + churn:
                w.kill()
            d.check_alive()
            rss = rss_kb(d.proc.pid)
            print(f"load: {answered} answers from {LOAD_CLIENTS} clients in {LOAD_SECONDS} s, "
                  f"{len(churn)} short-lived targets, daemon RSS {rss} KiB", flush=True)
            h.check(rss < RSS_BOUND_KB or h.SANITIZED,
                    f"daemon RSS {rss} KiB after the load test, bound {RSS_BOUND_KB} KiB")
            h.check(d.get("/healthz")[0] == 200, "still healthy after the load")

    def test_target_killed_during_a_delta_scrape(self):
        with h.Daemon("--sample-interval", "1") as d:
            w = h.Workload("exits", "60000")
            w.go()
            d.profile(f"/debug/pprof/heap?pid={w.pid}")
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                scrape = pool.submit(d.get, f"/debug/pprof/heap?pid={w.pid}&seconds=2")
                h.wait_delta_window_open(d, scrape)  # killed inside the window
                os.kill(w.pid, signal.SIGKILL)
                status, body = scrape.result()
            w.kill()
            # The window ended after the process: either its last counts or "gone".
            h.check(status in (200, 404), f"delta scrape of a killed target: {status} {body[:200]!r}")
            if status == 200:
                h.decode(body)
            # The reaper detaches it at its next scan and keeps its last profile,
            # which says the process is gone.
            d.wait_detached(w.pid, "the target killed during a delta scrape")
            status, body = d.get(f"/debug/pprof/heap?pid={w.pid}")
            h.check_equal(status, 200, "profile of the killed target afterwards")
            h.check("exited" in h.pprof(body, "-raw"), "the kept profile says the process exited")
            d.check_alive()

    def test_daemon_killed_and_restarted_keeps_the_counts(self):
        pin = unique_pin_dir("kill")
        cleanup = None
        try:
            w = h.Workload("exact")
            cleanup = w.kill
            first = h.Daemon("--sample-interval", "1", "--pin-dir", pin)
            first.__enter__()
            try:
                first.profile(f"/debug/pprof/heap?pid={w.pid}")
                w.run()
                before = h.totals_by_leaf(h.decode(
                    first.profile(f"/debug/pprof/heap?pid={w.pid}")).samples)
            finally:
                os.kill(first.proc.pid, signal.SIGKILL)
                first.proc.wait()
            h.check(before, "no samples before the kill")
            with h.Daemon("--sample-interval", "1", "--pin-dir", pin) as second:
                h.check("adopted 1 processes" in second.stderr(),
                        f"the restarted daemon did not adopt the workload:\n{second.stderr()}")
                after = h.totals_by_leaf(h.decode(
                    second.profile(f"/debug/pprof/heap?pid={w.pid}")).samples)
                h.check_equal(after, before, "totals per leaf after SIGKILL and restart")
            w.finish()
            cleanup = None
        finally:
            if cleanup:
                cleanup()
            shutil.rmtree(pin, ignore_errors=True)


if __name__ == "__main__":
    h.main()
