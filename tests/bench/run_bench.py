#!/usr/bin/env python3
"""run_bench.py - heapprofd's overhead per malloc+free pair, against bare and the floor.

Runs the malloc/free workload (malloc_bench) with 1 and 2 threads in three
configurations:
  bare       no probes;
  floor      do-nothing uprobes on malloc entry, malloc return and free entry
             (floor_probes, the classic layout): the kernel's trap cost alone,
             what any uprobe-based profiler that probes these points pays;
  heapprofd  profiled by heapprofd at its default sample interval, attached
             through GET /debug/pprof/heap?pid=N (synchronous) before the
             workload starts its measured loop.
Each configuration runs --repeats times, interleaved (bare, floor, heapprofd,
bare, ...) so that drift in the machine hits all of them alike, and the
table shows medians: ns per pair, ns added to bare, the ratio to bare, and
heapprofd's added cost as a multiple of the floor's added cost.

Optionally (with --heapprofd, not in --quick) it also runs heapprofd with
--sample-interval 1, where every allocation is sampled, to estimate what one
sampled allocation (with its free) costs.

--quick runs tiny counts once, 1 thread, and only checks that every
configuration produced a number; it is the bench.smoke test and asserts no
timing. Python 3 standard library only.
"""

import argparse
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import urllib.error
import urllib.request

# Seconds to wait for a process to say "ready"/"attached"/"listening": they
# load BPF objects and (heapprofd) build unwind tables, which takes a moment.
STARTUP_TIMEOUT = 60
# Seconds a single workload run may take before the harness gives up; the
# default counts take a few seconds under the probes.
RUN_TIMEOUT = 600
# Allocation size in bytes: small enough for glibc's tcache fast path, so
# that the bare pair is as cheap as it gets and the probes dominate.
DEFAULT_SIZE = 64


class BenchError(Exception):
    """A run that did not produce its number."""


def parse_args():
    """The command line, with defaults sized so a full run takes under 2 minutes."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bench", required=True, help="path of malloc_bench")
    p.add_argument("--floor", required=True, help="path of floor_probes")
    p.add_argument("--heapprofd", help="path of heapprofd (omit to skip that configuration)")
    # Under the probes a pair costs ~12 us on the reference machine, so 200k
    # pairs take ~2.5 s a run; 2 thread counts x 5 repeats x 2 probed
    # configurations stay under 2 minutes.
    p.add_argument("--iterations", type=int, default=200_000,
                   help="pairs per thread under probes (default 200000)")
    # Bare pairs cost ~10 ns; 10M of them take ~0.1 s, long enough to time.
    p.add_argument("--bare-iterations", type=int, default=10_000_000,
                   help="pairs per thread when bare (default 10000000)")
    p.add_argument("--sampled-iterations", type=int, default=20_000,
                   help="pairs for the every-allocation-sampled run (default 20000)")
    p.add_argument("--size", type=int, default=DEFAULT_SIZE, help="allocation size in bytes")
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    p.add_argument("--repeats", type=int, default=5, help="runs per configuration (default 5)")
    p.add_argument("--no-sampled", action="store_true",
                   help="skip the every-allocation-sampled estimate")
    p.add_argument("--quick", action="store_true",
                   help="smoke mode: tiny counts, 1 thread, 1 repeat, no timing claims")
    p.add_argument("-v", "--verbose", action="store_true", help="print every run")
    args = p.parse_args()
    if args.quick:
        args.iterations, args.bare_iterations = 2_000, 20_000
        args.threads, args.repeats, args.no_sampled = "1", 1, True
    args.threads = [int(t) for t in args.threads.split(",")]
    return args


def free_port():
    """A TCP port on 127.0.0.1 that nobody listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def read_line(stream, proc, what):
    """The next line of a child's stdout; BenchError if the child ends first."""
    timer = threading.Timer(STARTUP_TIMEOUT, proc.kill)
    timer.start()
    try:
        line = stream.readline()
    finally:
        timer.cancel()
    if not line:
        raise BenchError(f"{what} (pid {proc.pid}) ended without output, exit code {proc.poll()}")
    return line.strip()


def stop(proc, sig=signal.SIGTERM):
    """Ends a child we started: a signal, a grace period, then SIGKILL."""
    if proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Daemon:
    """One heapprofd process, listening on a free local port."""

    def __init__(self, path, extra_args=()):
        port = free_port()
        self.lines = []
        self.listening = threading.Event()
        self.proc = subprocess.Popen(
            [path, "--listen", f"127.0.0.1:{port}", *extra_args],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True)
        # Drain stderr for the daemon's whole life, so it never blocks on it.
        threading.Thread(target=self._drain, daemon=True).start()
        if not self.listening.wait(STARTUP_TIMEOUT) or self.proc.poll() is not None:
            stop(self.proc)
            raise BenchError("heapprofd did not log 'heapprofd: listening on'; its stderr:\n"
                             + "".join(self.lines[-20:]))
        self.base = f"http://{self.address}"

    def _drain(self):
        """Collects stderr lines and notes the address once the daemon serves."""
        for line in self.proc.stderr:
            self.lines.append(line)
            m = re.search(r"heapprofd: listening on (\S+)", line)
            if m and not self.listening.is_set():
                self.address = m.group(1)
                self.listening.set()
        self.listening.set()  # exited: wake the waiter, which checks poll()

    def attach(self, pid):
        """Asks for pid's heap profile, which attaches heapprofd to it synchronously."""
        url = f"{self.base}/debug/pprof/heap?pid={pid}"
        try:
            with urllib.request.urlopen(url, timeout=STARTUP_TIMEOUT) as r:
                r.read()
        except urllib.error.HTTPError as e:
            raise BenchError(f"GET {url}: {e.code} {e.read().decode(errors='replace').strip()}")
        except OSError as e:
            raise BenchError(f"GET {url}: {e}")

    def close(self):
        """Stops the daemon."""
        stop(self.proc)


def run_once(args, config, threads, iterations, daemon=None):
    """One workload run in one configuration; returns its ns per pair."""
    work = subprocess.Popen([args.bench, str(threads), str(iterations), str(args.size)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    probes = None
    try:
        line = read_line(work.stdout, work, "malloc_bench")
        m = re.fullmatch(r"ready (\d+)", line)
        if not m:
            raise BenchError(f"malloc_bench said {line!r}, not 'ready <pid>'")
        pid = int(m.group(1))
        if config == "floor":
            probes = subprocess.Popen([args.floor, "--pid", str(pid)], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True)
            line = read_line(probes.stdout, probes, "floor_probes")
            if line != "attached":
                raise BenchError(f"floor_probes said {line!r}, not 'attached'")
        elif config != "bare":
            daemon.attach(pid)
        try:
            out, _ = work.communicate("go\n", timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise BenchError(f"malloc_bench ran longer than {RUN_TIMEOUT} s")
        m = re.search(r"^ns_per_pair ([0-9.]+)$", out, re.M)
        if work.returncode != 0 or not m:
            raise BenchError(f"malloc_bench exited {work.returncode} with output {out!r}")
        return float(m.group(1))
    finally:
        stop(work, signal.SIGKILL)
        if probes:
            probes.stdin.close()  # end of input: floor_probes detaches and exits
            try:
                probes.wait(timeout=10)
            except subprocess.TimeoutExpired:
                stop(probes)


def fmt_ratio(x):
    """A ratio for the table, or '-' where it does not apply."""
    return "-" if x is None else f"{x:.2f}"


def print_table(configs, thread_counts, medians, spreads):
    """The results: medians per configuration and thread count, with ratios."""
    head = ("configuration", "threads", "ns/pair", "min..max", "added ns/pair",
            "x bare", "added / floor's added")
    rows = []
    for threads in thread_counts:
        bare = medians[("bare", threads)]
        floor = medians.get(("floor", threads))
        for config in configs:
            v = medians[(config, threads)]
            lo, hi = spreads[(config, threads)]
            added = v - bare
            vs_floor = None
            if config != "bare" and floor is not None and floor > bare:
                vs_floor = added / (floor - bare)
            rows.append((config, str(threads), f"{v:.1f}", f"{lo:.1f}..{hi:.1f}",
                         "-" if config == "bare" else f"{added:.1f}",
                         fmt_ratio(None if config == "bare" else v / bare), fmt_ratio(vs_floor)))
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    for r in [head] + rows:
        print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))))


def measure_sampled(args, default_median):
    """Estimates the cost of one sampled allocation with heapprofd --sample-interval 1."""
    daemon = Daemon(args.heapprofd, ["--sample-interval", "1"])
    try:
        runs = [run_once(args, "heapprofd", 1, args.sampled_iterations, daemon)
                for _ in range(args.repeats)]
    finally:
        daemon.close()
    every = statistics.median(runs)
    print(f"\nheapprofd --sample-interval 1 (every allocation sampled), 1 thread: "
          f"{every:.1f} ns/pair (median of {len(runs)})")
    print(f"cost per sampled allocation, its free included: ~{every - default_median:.0f} ns "
          f"(minus heapprofd's unsampled pair at the default interval)")


def main():
    args = parse_args()
    configs = ["bare", "floor"] + (["heapprofd"] if args.heapprofd else [])
    daemon = Daemon(args.heapprofd) if args.heapprofd else None
    results = {}
    try:
        for threads in args.threads:
            for rep in range(args.repeats):
                for config in configs:
                    n = args.bare_iterations if config == "bare" else args.iterations
                    v = run_once(args, config, threads, n, daemon)
                    results.setdefault((config, threads), []).append(v)
                    if args.verbose:
                        print(f"run {rep + 1}/{args.repeats} {config} threads={threads}: "
                              f"{v:.1f} ns/pair", file=sys.stderr)
    finally:
        if daemon:
            daemon.close()

    medians = {k: statistics.median(v) for k, v in results.items()}
    spreads = {k: (min(v), max(v)) for k, v in results.items()}
    print(f"malloc({args.size}) + free pairs; probed runs {args.iterations} pairs per thread, "
          f"bare runs {args.bare_iterations}; median of {args.repeats}")
    if not args.heapprofd:
        print("(no --heapprofd given: heapprofd configuration skipped)")
    print_table(configs, args.threads, medians, spreads)

    if args.heapprofd and not args.no_sampled and 1 in args.threads:
        measure_sampled(args, medians[("heapprofd", 1)])

    missing = [(c, t) for t in args.threads for c in configs if (c, t) not in medians]
    if missing:
        print(f"bench: no number for {missing}", file=sys.stderr)
        return 1
    if args.quick:
        print("bench: every configuration produced a number")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as e:
        print(f"bench: {e}", file=sys.stderr)
        sys.exit(1)
