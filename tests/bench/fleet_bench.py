"""Plays a continuous-profiling backend against a fleet: N targets of S
stacks each (tests/workloads/fleet_worker), each scraped in turn every
--every seconds, as Parca or Alloy do.

    python3 tests/bench/fleet_bench.py build/heapprofd [--targets N] [--stacks S]
        [--every SECONDS] [--window SECONDS] [--exits] [--sigterm]

Prints: the daemon's CPU share over the window (of one core), each
scrape's median, 95th percentile and maximum, a scrape of one target timed
alone (each target's scrape, once, before the window), the merged profile
of all targets, the daemon's RSS and the memory of its BPF maps (memlock of
each map it holds, from /proc/PID/fdinfo). With --exits: every target
killed at once, and the time until the daemon has let go of all of them.
With --sigterm: the time from SIGTERM to the daemon's exit. At
--sample-interval 1 every block is a sample, so S stacks are S rows.
"""

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import heapprof_harness as h  # noqa: E402


def cpu_seconds(pid):
    """User and system CPU time of process `pid`, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid):
    """Resident memory of process `pid`, in MiB."""
    with open(f"/proc/{pid}/status") as f:
        kb = next(int(ln.split()[1]) for ln in f if ln.startswith("VmRSS"))
    return kb / 1024


def bpf_map_mib(pid):
    """The memory the kernel charges for the BPF maps process `pid` holds
    (memlock of each map's descriptor, each map once), in MiB."""
    seen, total = set(), 0
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                info = dict(ln.split(":", 1) for ln in f.read().splitlines() if ":" in ln)
        except OSError:
            continue
        if "map_id" in info and info["map_id"].strip() not in seen:
            seen.add(info["map_id"].strip())
            total += int(info.get("memlock", "0"))
    return total / (1 << 20)


def timed_get(d, path):
    """Seconds one profile took, failing unless it answered 200."""
    t0 = time.monotonic()
    d.profile(path, timeout=300)
    return time.monotonic() - t0


def pct(values, p):
    """The p-th percentile (nearest rank) of `values`."""
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("heapprofd")
    ap.add_argument("--targets", type=int, default=256)
    ap.add_argument("--stacks", type=int, default=500)
    ap.add_argument("--every", type=float, default=10.0, help="seconds between scrapes of a target")
    ap.add_argument("--window", type=float, default=30.0, help="seconds of scraping measured")
    ap.add_argument("--exits", action="store_true", help="then kill every target at once")
    ap.add_argument("--sigterm", action="store_true", help="then time SIGTERM to exit")
    ap.add_argument("--workloads", help="directory of fleet_worker (default: beside heapprofd)")
    ap.add_argument("--daemon-arg", action="append", default=[], help="passed to heapprofd")
    args = ap.parse_args()
    h.HEAPPROFD = os.path.abspath(args.heapprofd)
    h.WORKLOADS = os.path.abspath(args.workloads) if args.workloads else \
        os.path.join(os.path.dirname(h.HEAPPROFD), "tests", "workloads")
    stacks_cap = max(65536, 2 * args.targets * args.stacks)
    daemon = h.Daemon("--sample-interval", "1", "--max-targets", str(max(args.targets, 1)),
                      "--max-stacks", str(stacks_cap), *args.daemon_arg)
    workers = []
    d = daemon.__enter__()  # left by hand: --sigterm ends it on purpose
    if True:
        try:
            for _ in range(args.targets):
                w = h.Workload("fleet_worker", args.stacks)
                workers.append(w)
                d.profile(f"/debug/pprof/heap?pid={w.pid}", timeout=120)  # attaches
                w.go()
            for w in workers:
                w.wait_done()
            alone = [timed_get(d, f"/debug/pprof/heap?pid={w.pid}") for w in workers]
            if os.environ.get("FLEET_BENCH_PID_FILE"):  # written as the window starts: perf -p
                with open(os.environ["FLEET_BENCH_PID_FILE"], "w") as f:
                    f.write(str(d.proc.pid))
            cpu0, t0 = cpu_seconds(d.proc.pid), time.monotonic()
            scrapes = []
            gap = args.every / max(args.targets, 1)
            k = 0
            while time.monotonic() - t0 < args.window:
                due = t0 + k * gap
                if due > time.monotonic():
                    time.sleep(due - time.monotonic())
                scrapes.append(timed_get(d, f"/debug/pprof/heap?pid={workers[k % len(workers)].pid}"))
                k += 1
            wall = time.monotonic() - t0
            cpu = cpu_seconds(d.proc.pid) - cpu0
            merged = timed_get(d, "/debug/pprof/heap")
            rss, maps = rss_mib(d.proc.pid), bpf_map_mib(d.proc.pid)
            print(f"{args.targets} targets x {args.stacks} stacks, one scrape per target every "
                  f"{args.every:g} s for {wall:.0f} s ({len(scrapes)} scrapes): daemon CPU "
                  f"{100 * cpu / wall:.2f}% of a core; scrape median {statistics.median(scrapes) * 1e3:.1f}"
                  f" ms, p95 {pct(scrapes, 95) * 1e3:.1f} ms, max {max(scrapes) * 1e3:.1f} ms; "
                  f"first round median {statistics.median(alone) * 1e3:.1f} ms; merged profile "
                  f"{merged * 1e3:.0f} ms; daemon RSS {rss:.0f} MiB; BPF maps {maps:.0f} MiB")
            if args.exits:
                t0 = time.monotonic()
                for w in workers:
                    w.proc.kill()
                for w in workers:
                    w.proc.wait()
                d.wait_until(lambda: not d.profiled_pids() and d.settled(), 300, "every exit reaped")
                print(f"{args.targets} exits at once reaped in {time.monotonic() - t0:.2f} s")
            if args.sigterm:
                t0 = time.monotonic()
                d.proc.send_signal(signal.SIGTERM)
                d.proc.wait(120)
                print(f"SIGTERM to exit with {0 if args.exits else args.targets} targets: "
                      f"{time.monotonic() - t0:.2f} s")
        finally:
            for w in workers:
                w.kill()
            d._stop()


if __name__ == "__main__":
    main()
