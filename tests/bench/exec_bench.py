#!/usr/bin/env python3
"""exec_bench.py - how much of a short-lived program's start heapprofd sees
when a target rule matches it: the exec-time attach (docs/overhead.md,
"Short-lived processes").

Usage: exec_bench.py HEAPPROFD STARTUP [--runs 20] [--quiet-rcu]

Starts heapprofd --sample-interval 1 with a --comm rule for a name of its
own (a symlink to tests/workloads/startup), then runs that program --runs
times, one after the other. Each run makes 50 allocations of 1111 bytes
from startup_block, one every millisecond from the start of main, keeps
them, and exits after 300 ms. After each exit the run's kept last profile
(format=folded, alloc_objects) says how many of the 50 were seen, and
/metrics (heapprofd_exec_attach_seconds_sum and _count) how long its exec
took to be attached. Prints each run, the fraction of all allocations seen,
and the median delay. --quiet-rcu sets /sys/kernel/rcu_expedited for the
run (restored after): the uprobe registration's RCU grace period, the bulk
of the delay, then takes microseconds. Standard library only.
"""

import argparse
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

BLOCKS = 50


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
        return r.read().decode()


def metric(port, name):
    m = re.search(rf"^{name} (\S+)$", get(port, "/metrics"), re.M)
    if not m:
        raise SystemExit(f"exec_bench: no {name} in /metrics")
    return float(m.group(1))


def start_daemon(heapprofd, comm):
    port = free_port()
    d = subprocess.Popen([heapprofd, "--listen", f"127.0.0.1:{port}", "--pin-dir", "none",
                          "--sample-interval", "1", "--comm", comm],
                         stderr=subprocess.PIPE, text=True)
    listening = threading.Event()

    def drain():
        for line in d.stderr:
            if "listening on" in line:
                listening.set()
        listening.set()

    threading.Thread(target=drain, daemon=True).start()
    if not listening.wait(60) or d.poll() is not None:
        raise SystemExit("exec_bench: heapprofd did not start")
    return d, port


def one_run(port, path):
    """(blocks seen, exec-to-attached seconds or None) of one run."""
    before = (metric(port, "heapprofd_exec_attach_seconds_sum"),
              metric(port, "heapprofd_exec_attach_seconds_count"))
    proc = subprocess.Popen([path])
    if proc.wait(30) != 0:
        raise SystemExit(f"exec_bench: startup exited {proc.returncode}")
    folded = get(port, f"/debug/pprof/heap?pid={proc.pid}&format=folded"
                       f"&sample_index=alloc_objects")
    seen = sum(int(line.rsplit(" ", 1)[1]) for line in folded.splitlines()
               if line.rsplit(" ", 1)[0].endswith("startup_block"))
    after = (metric(port, "heapprofd_exec_attach_seconds_sum"),
             metric(port, "heapprofd_exec_attach_seconds_count"))
    delay = after[0] - before[0] if after[1] == before[1] + 1 else None
    return seen, delay


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("heapprofd")
    p.add_argument("startup")
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--quiet-rcu", action="store_true")
    args = p.parse_args()
    comm = f"hpxb{os.getpid()}"[:15]
    tmp = tempfile.TemporaryDirectory(prefix="heapprofd-exec-bench-")
    path = os.path.join(tmp.name, comm)
    os.symlink(os.path.abspath(args.startup), path)
    rcu_path, rcu_old = "/sys/kernel/rcu_expedited", None
    if args.quiet_rcu:
        with open(rcu_path) as f:
            rcu_old = f.read().strip()
        with open(rcu_path, "w") as f:
            f.write("1")
    d, port = start_daemon(args.heapprofd, comm)
    try:
        seen, delays = [], []
        for i in range(args.runs):
            s, delay = one_run(port, path)
            seen.append(s)
            if delay is not None:
                delays.append(delay)
            print(f"run {i + 1:2d}: {s:2d}/{BLOCKS} allocations seen, attached "
                  f"{'-' if delay is None else f'{delay * 1e3:.1f} ms'} after the exec",
                  flush=True)
    finally:
        d.send_signal(signal.SIGTERM)
        d.wait(10)
        if rcu_old is not None:
            with open(rcu_path, "w") as f:
                f.write(rcu_old)
    total = sum(seen) / (BLOCKS * args.runs)
    print(f"seen: {total:.1%} of {BLOCKS * args.runs} allocations made in the first 50 ms "
          f"(goal 95%); median delay from exec to attached: "
          f"{statistics.median(delays) * 1e3:.1f} ms over {len(delays)} runs (goal < 20 ms)"
          f"{' (rcu_expedited)' if args.quiet_rcu else ''}")


if __name__ == "__main__":
    sys.exit(main())
