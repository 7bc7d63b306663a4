#!/usr/bin/env python3
"""inprocess_bench.py - what the in-process sampler costs a real program, and
how long it stops a process.

1. redis-server (Debian's, on a free local port, no persistence) under
   `redis-benchmark -t set,get -d 128 -P 16 -n REQUESTS --csv`, bare, with
   heapprofd's uprobe sampler attached, and with its in-process sampler
   attached (default sample interval, attached with GET /debug/pprof/heap
   before the benchmark starts); a fresh redis per run, the three
   configurations interleaved, --repeats times; medians of SET and GET
   requests per second and their ratio to bare (the goal: >= 0.93 with the
   in-process sampler).
2. The time the one thread an injection stops is held in stops, when the
   in-process sampler is put in and taken out (tests/integration/
   inject_cycles, the daemon's injection library without BPF): 16 threads
   sleeping, and 16 threads allocating flat out (tests/workloads/stress.c);
   median and worst of --cycles (the goals: a median of at most 1 ms and a
   worst of at most 5 ms). On a machine with fewer cores than busy threads
   each stop waits for the thread to be scheduled.

Python 3 standard library only.
"""

import argparse
import re
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

GOAL_RATIO = 0.93
# The one thread an injection holds: median and worst, in ms.
GOAL_STOP_MS = 1.0
GOAL_STOP_WORST_MS = 5.0


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_port(port, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise SystemExit(f"bench: nothing listens on port {port} after {timeout} s")


class Daemon:
    """heapprofd on a free port, with extra arguments."""

    def __init__(self, path, args):
        self.port = free_port()
        self.proc = subprocess.Popen([path, "--listen", f"127.0.0.1:{self.port}", "--pin-dir",
                                      "none", *args], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for line in self.proc.stderr:
            if "listening on" in line:
                break
        else:
            raise SystemExit("bench: heapprofd did not start")

    def attach(self, pid):
        url = f"http://127.0.0.1:{self.port}/debug/pprof/heap?pid={pid}"
        with urllib.request.urlopen(url, timeout=60) as r:
            r.read()
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=60) as r:
            m = re.search(rf'heapprofd_target_sampler\{{pid="{pid}",[^}}]*sampler="(\w+)"',
                          r.read().decode())
        return m.group(1) if m else "?"

    def close(self):
        self.proc.terminate()
        self.proc.wait(30)


def redis_run(args, daemon):
    """One fresh redis, optionally profiled; returns {"SET": rps, "GET": rps} and the sampler."""
    port = free_port()
    redis = subprocess.Popen([args.redis_server, "--port", str(port), "--bind", "127.0.0.1",
                              "--save", "", "--appendonly", "no", "--daemonize", "no"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_port(port)
        sampler = daemon.attach(redis.pid) if daemon else "bare"
        out = subprocess.run([args.redis_benchmark, "-p", str(port), "-t", "set,get", "-d", "128",
                              "-P", "16", "-n", str(args.requests), "--csv"],
                             capture_output=True, text=True, timeout=600).stdout
        rps = {}
        for line in out.splitlines():
            m = re.match(r'"(SET|GET)","([0-9.]+)"', line)
            if m:
                rps[m.group(1)] = float(m.group(2))
        if set(rps) != {"SET", "GET"}:
            raise SystemExit(f"bench: redis-benchmark said {out!r}")
        return rps, sampler
    finally:
        redis.terminate()
        redis.wait(30)


def bench_redis(args):
    daemons = {"uprobe": Daemon(args.heapprofd, ["--sampler", "uprobe"]),
               "inprocess": Daemon(args.heapprofd, ["--sampler", "inprocess"])}
    results = {}
    try:
        for rep in range(args.repeats):
            for config in ("bare", "uprobe", "inprocess"):
                rps, sampler = redis_run(args, daemons.get(config))
                if config != "bare" and sampler != config:
                    raise SystemExit(f"bench: redis got the {sampler} sampler, not {config}")
                for op, v in rps.items():
                    results.setdefault((config, op), []).append(v)
                if args.verbose:
                    print(f"run {rep + 1} {config}: {rps}", file=sys.stderr)
    finally:
        for d in daemons.values():
            d.close()
    print(f"redis-server, redis-benchmark -t set,get -d 128 -P 16 -n {args.requests}, median "
          f"of {args.repeats} interleaved runs (requests/s, ratio to bare):")
    for op in ("SET", "GET"):
        bare = statistics.median(results[("bare", op)])
        cells = []
        for config in ("bare", "uprobe", "inprocess"):
            v = statistics.median(results[(config, op)])
            cells.append(f"{config} {v:,.0f} ({v / bare:.2f})")
        ratio = statistics.median(results[("inprocess", op)]) / bare
        print(f"  {op}: " + ", ".join(cells) +
              f"; goal inprocess >= {GOAL_RATIO}: {'met' if ratio >= GOAL_RATIO else 'MISSED'}")


def bench_stops(args):
    print(f"\nprocess stopped by the in-process sampler's injection and removal, "
          f"{args.cycles} cycles:")
    for mode in ("idle", "busy"):
        work = subprocess.Popen([args.stress] + (["idle"] if mode == "idle" else []),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True)
        pid = int(work.stdout.readline().split()[1])
        work.stdin.write("go\n")
        work.stdin.flush()
        time.sleep(0.3)
        out = subprocess.run([args.inject_cycles, str(pid), str(args.cycles)],
                             capture_output=True, text=True, timeout=600)
        work.stdin.write("stop\n\n")
        work.stdin.flush()
        work.wait(60)
        m = re.search(r"attach_stop_us median ([0-9.]+) max ([0-9.]+) detach_stop_us median "
                      r"([0-9.]+) max ([0-9.]+)", out.stdout)
        if out.returncode != 0 or not m:
            raise SystemExit(f"bench: inject_cycles failed: {out.stderr}{out.stdout}")
        a, amax, d, dmax = (float(x) / 1000 for x in m.groups())
        print(f"  16 threads {mode}: attach {a:.2f} ms (worst {amax:.2f}), detach {d:.2f} ms "
              f"(worst {dmax:.2f}); goal median <= {GOAL_STOP_MS:g} ms: "
              f"{'met' if max(a, d) <= GOAL_STOP_MS else 'MISSED'}, worst <= "
              f"{GOAL_STOP_WORST_MS:g} ms: "
              f"{'met' if max(amax, dmax) <= GOAL_STOP_WORST_MS else 'MISSED'}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--heapprofd", required=True)
    p.add_argument("--inject-cycles", required=True)
    p.add_argument("--stress", required=True)
    p.add_argument("--redis-server", default="/usr/bin/redis-server")
    p.add_argument("--redis-benchmark", default="/usr/bin/redis-benchmark")
    p.add_argument("--requests", type=int, default=1_000_000)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--cycles", type=int, default=50)
    p.add_argument("--quick", action="store_true", help="tiny counts: the harness works")
    p.add_argument("-v", "--verbose", action="store_true")
    args = p.parse_args()
    if args.quick:
        args.requests, args.repeats, args.cycles = 20_000, 1, 3
    bench_redis(args)
    bench_stops(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
