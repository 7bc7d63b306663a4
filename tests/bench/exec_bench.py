#!/usr/bin/env python3
"""exec_bench.py - how much of a short-lived program's start heapprofd sees
when a target rule matches it, alone and in bursts: the exec-time attach
(docs/overhead.md, "Short-lived processes").

Usage: exec_bench.py HEAPPROFD STARTUP [--runs 3] [--bursts 1,10,40]
                     [--samplers inprocess,uprobe] [--quiet-rcu]

For each sampler, starts heapprofd --sample-interval 1 --sampler S with a
--comm rule for a name of its own (a symlink to tests/workloads/startup).
For each burst size N it starts N of that program at once, --runs times.
Each process makes 50 allocations of 1111 bytes from startup_block, one
every millisecond from the start of main, keeps them, and exits after
300 ms. After the burst has exited, each process's kept last profile says
how many of its 50 were seen (alloc_objects) and how long after its exec
it was attached (the profile's comment). A process with no kept profile
counts as none seen (the daemon keeps at most 64 exited profiles, so
bursts above that are counted from /metrics alone: attached, or missed by
reason). Prints a line per (sampler, burst): the share of allocations
seen, and the exec-to-attached delay, median and worst. Each daemon's
first attach (cold caches) is made and reported apart, before the bursts. --quiet-rcu sets
/sys/kernel/rcu_expedited for the run (restored after). Standard library
only.
"""

import argparse
import gzip
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
import urllib.error
import urllib.request

BLOCKS = 50


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
        return r.read().decode()


def metrics_text(port):
    return get(port, "/metrics")


def metric_sum(text, name):
    """The sum of every series of metric `name` in a /metrics text."""
    return sum(float(m.group(1)) for m in
               re.finditer(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M))


def start_daemon(heapprofd, comm, sampler):
    port = free_port()
    d = subprocess.Popen([heapprofd, "--listen", f"127.0.0.1:{port}", "--pin-dir", "none",
                          "--sample-interval", "1", "--sampler", sampler, "--comm", comm,
                          "--max-targets", "1024"],
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


def kept_profile(port, pid):
    """(blocks seen, exec-to-attached seconds or None) from pid's kept profile."""
    try:
        folded = get(port, f"/debug/pprof/heap?pid={pid}&format=folded"
                           f"&sample_index=alloc_objects")
        raw = gzip.decompress(urllib.request.urlopen(
            f"http://127.0.0.1:{port}/debug/pprof/heap?pid={pid}", timeout=30).read())
    except urllib.error.HTTPError:
        return 0, None  # not attached, or its profile not kept
    seen = sum(int(line.rsplit(" ", 1)[1]) for line in folded.splitlines()
               if line.rsplit(" ", 1)[0].endswith("startup_block"))
    m = re.search(rb"attached ([0-9.]+) ms after its exec", raw)
    return seen, float(m.group(1)) / 1e3 if m else None


def one_burst(port, path, n):
    """(blocks seen per process, delays, attached, missed) of one burst of n."""
    before = metrics_text(port)
    procs = [subprocess.Popen([path]) for _ in range(n)]
    for p in procs:
        if p.wait(60) != 0:
            raise SystemExit(f"exec_bench: startup exited {p.returncode}")
    time.sleep(1.5)  # the reaper keeps the last profiles within a second of the exits
    after = metrics_text(port)
    attached = (metric_sum(after, "heapprofd_exec_attach_seconds_count") -
                metric_sum(before, "heapprofd_exec_attach_seconds_count"))
    missed = (metric_sum(after, "heapprofd_exec_missed_total") -
              metric_sum(before, "heapprofd_exec_missed_total"))
    seen, delays = [], []
    for p in procs:
        s, delay = kept_profile(port, p.pid)
        seen.append(s)
        if delay is not None:
            delays.append(delay)
    return seen, delays, int(attached), int(missed)


def ms(x):
    return f"{x * 1e3:.1f}"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("heapprofd")
    p.add_argument("startup")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--bursts", default="1,10,40")
    p.add_argument("--samplers", default="inprocess,uprobe")
    p.add_argument("--quiet-rcu", action="store_true")
    args = p.parse_args()
    bursts = [int(b) for b in args.bursts.split(",")]
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
    try:
        for sampler in args.samplers.split(","):
            d, port = start_daemon(args.heapprofd, comm, sampler)
            try:
                # The daemon's first attach reads libc and builds its unwind
                # tables; a daemon has done that long before a burst comes.
                _, cold, _, _ = one_burst(port, path, 1)
                print(f"{sampler:9s} first attach of the daemon (not counted below): exec to "
                      f"attached {ms(cold[0]) if cold else '-'} ms", flush=True)
                for n in bursts:
                    seen, delays, attached, missed = [], [], 0, 0
                    for _ in range(args.runs):
                        s, dl, a, m = one_burst(port, path, n)
                        seen += s
                        delays += dl
                        attached += a
                        missed += m
                    share = sum(seen) / (BLOCKS * n * args.runs)
                    delay = (f"median {ms(statistics.median(delays))} ms, worst "
                             f"{ms(max(delays))} ms" if delays else "none kept")
                    print(f"{sampler:9s} burst {n:3d} x{args.runs}: {share:6.1%} of the "
                          f"allocations seen; exec to attached {delay}; {attached} attached, "
                          f"{missed} missed (of {n * args.runs})"
                          f"{' (rcu_expedited)' if args.quiet_rcu else ''}", flush=True)
            finally:
                d.send_signal(signal.SIGTERM)
                d.wait(10)
    finally:
        if rcu_old is not None:
            with open(rcu_path, "w") as f:
                f.write(rcu_old)


if __name__ == "__main__":
    sys.exit(main())
