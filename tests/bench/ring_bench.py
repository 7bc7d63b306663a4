#!/usr/bin/env python3
"""ring_bench.py - what a sampled call costs on each of the in-process
sampler's paths, and what the sampler adds per malloc+free pair, on the
size mix of issue 23 (tests/bench/mix_bench.c: 95% 16-4095 B, 4% 4-32 KiB,
1% 32-128 KiB, 1000 live blocks, 1 thread), side by side with bare.

The paths (heapprofd's switches, for measuring only):
  trap       allocation and free both reported through a trapping uprobe
             (HEAPPROFD_FREE_RING=0 HEAPPROFD_OPT_REPORT=0: the sampler before
             issue 23)
  optimized  allocations through the optimized uprobe on a 5-byte nop, frees
             trap (HEAPPROFD_FREE_RING=0)
  ring       allocations trap, frees through the ring (HEAPPROFD_OPT_REPORT=0)
  both       the default: optimized allocations, frees through the ring

1. Per sampled allocation (with its free): at --sample-interval 65536
   (about one pair in 20 sampled), (ns a pair - ns a pair with nothing
   sampled) / sampled allocations a pair; "nothing sampled" is the same
   sampler at an interval of 4 GiB (the wrappers' own cost). The daemon's
   CPU time (the drains) is given apart, per sampled allocation.
2. Per pair at the default interval (524288): bare, trap, both.

Runs are interleaved, --repeats times; medians of the thread's CPU ns per
pair. Prints the daemon's start line (the per-hit costs of this machine).
Python 3 standard library only.
"""

import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

PATHS = {
    "trap": {"HEAPPROFD_FREE_RING": "0", "HEAPPROFD_OPT_REPORT": "0"},
    "optimized": {"HEAPPROFD_FREE_RING": "0"},
    "ring": {"HEAPPROFD_OPT_REPORT": "0"},
    "both": {},
}
PATH_INTERVAL = 65536
NOTHING_INTERVAL = 1 << 32
DEFAULT_INTERVAL = 524288
TICK_NS = 1e9 / os.sysconf("SC_CLK_TCK")
# FREE_RING_AFTER_MS (daemon/inject/free_ring.h) and a drain, with room.
RING_AFTER_S = 2.4


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    """heapprofd with an environment and an interval; waits for its start line."""

    def __init__(self, path, env, interval):
        self.port = free_port()
        full = dict(os.environ)
        full.update(env)
        self.proc = subprocess.Popen(
            [path, "--listen", f"127.0.0.1:{self.port}", "--pin-dir", "none",
             "--sample-interval", str(interval)],
            env=full, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE, text=True)
        self.lines = []
        self.cost_line = None
        ready = threading.Event()

        def read():
            for line in self.proc.stderr:
                self.lines.append(line.rstrip("\n"))
                if "a probe hit costs" in line:
                    self.cost_line = line.strip()
                    ready.set()
            ready.set()

        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(60) or self.cost_line is None:
            self.stop()
            raise SystemExit("bench: heapprofd did not calibrate:\n" + "\n".join(self.lines))

    def get(self, path):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=60) as r:
            return r.read()

    def metric(self, name):
        text = self.get("/metrics").decode()
        m = re.search(rf"^{name} (\S+)$", text, re.M)
        return float(m.group(1)) if m else 0.0

    def cpu_ns(self):
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * TICK_NS

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def run_once(bench, pairs, daemon=None):
    """One run of mix_bench; returns (cpu ns a pair, samples a pair, daemon ns a pair)."""
    w = subprocess.Popen([bench, str(pairs)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    try:
        pid = int(w.stdout.readline().split()[1])
        samples0 = dcpu0 = 0.0
        if daemon:
            daemon.get(f"/debug/pprof/heap?pid={pid}")  # attaches
            time.sleep(RING_AFTER_S)  # frees use the ring once profiled for 2 s
            samples0, dcpu0 = daemon.metric("heapprofd_samples_total"), daemon.cpu_ns()
        w.stdin.write("go\n")
        w.stdin.flush()
        m = re.fullmatch(r"ns_per_pair (\S+) cpu_ns_per_pair (\S+)", w.stdout.readline().strip())
        if not m:
            raise SystemExit("bench: mix_bench said something else")
        spp = dns = 0.0
        if daemon:
            # The daemon's CPU time over the run: its drains (and its other
            # threads' wake-ups), not the profile's symbolization below.
            dns = (daemon.cpu_ns() - dcpu0) / pairs
            spp = (daemon.metric("heapprofd_samples_total") - samples0) / pairs
        w.stdin.write("\n")
        w.stdin.close()
        w.wait(30)
        return float(m.group(2)), spp, dns
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()


def measure(args, configs, pairs):
    """{name: [(cpu, spp, dns), ...]} over interleaved repeats of `configs`
    ({name: (env or None for bare, interval)})."""
    out = {name: [] for name in configs}
    lines = {}
    for _ in range(args.repeats):
        for name, (env, interval) in configs.items():
            if env is None:
                out[name].append(run_once(args.bench, pairs))
                continue
            d = Daemon(args.heapprofd, env, interval)
            try:
                lines[name] = d.cost_line
                out[name].append(run_once(args.bench, pairs, d))
            finally:
                d.stop()
    return out, lines


def med(runs, i):
    return statistics.median(r[i] for r in runs)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bench", required=True)
    p.add_argument("--heapprofd", required=True)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--pairs", type=int, default=2_000_000, help="pairs per path run")
    p.add_argument("--default-pairs", type=int, default=10_000_000,
                   help="pairs per run at the default interval")
    args = p.parse_args()

    configs = {"bare": (None, 0), "nothing sampled": ({}, NOTHING_INTERVAL)}
    configs.update({name: (env, PATH_INTERVAL) for name, env in PATHS.items()})
    res, lines = measure(args, configs, args.pairs)
    print(f"start line: {lines.get('both', '?')}\n")
    base = med(res["nothing sampled"], 0)
    print(f"1. per sampled allocation (with its free), size mix, --sample-interval "
          f"{PATH_INTERVAL}, {args.pairs} pairs, median of {args.repeats}")
    print(f"   bare {med(res['bare'], 0):.1f} ns a pair; the wrappers with nothing sampled "
          f"{base:.1f} ns a pair")
    print(f"   {'path':<10} {'ns/pair':>8} {'sampled/pair':>13} {'ns/sample':>10} "
          f"{'daemon ns/sample':>17}")
    for name in PATHS:
        cpu, spp, dns = med(res[name], 0), med(res[name], 1), med(res[name], 2)
        per = (cpu - base) / spp if spp else float("nan")
        dper = dns / spp if spp else float("nan")
        print(f"   {name:<10} {cpu:8.1f} {spp:13.4f} {per:10.0f} {dper:17.0f}")

    configs = {"bare": (None, 0), "trap (before)": (PATHS["trap"], DEFAULT_INTERVAL),
               "both (now)": (PATHS["both"], DEFAULT_INTERVAL)}
    res, _ = measure(args, configs, args.default_pairs)
    bare = med(res["bare"], 0)
    print(f"\n2. per malloc+free pair, size mix, default interval, 1 thread, "
          f"{args.default_pairs} pairs, median of {args.repeats}")
    for name in configs:
        cpu = med(res[name], 0)
        extra = "" if name == "bare" else (f"  +{cpu - bare:.1f} ns  (1 sample per "
                                           f"{1 / med(res[name], 1):.0f} pairs; daemon "
                                           f"{med(res[name], 2):.2f} ns a pair)")
        print(f"   {name:<14} {cpu:7.1f} ns{extra}")


if __name__ == "__main__":
    sys.exit(main())
