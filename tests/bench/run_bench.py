#!/usr/bin/env python3
"""run_bench.py - heapprofd's overhead per malloc+free pair, against bare and the floors.

Runs the malloc/free workload (malloc_bench) with 1 and 2 threads in these
configurations:
  bare               no probes;
  floor-classic      do-nothing uprobes on malloc entry, malloc return and
                     free entry (floor_probes --layout classic: bcc memleak's
                     layout, free's first instruction single-stepped);
  floor-emulated     do-nothing entry probes on malloc's entry and on free
                     past its NULL test, on instructions the kernel emulates,
                     in one uprobe_multi link (floor_probes --layout
                     emulated): the floor, the least any uprobe
                     profiler that sees every malloc and free can cost;
  heapprofd          heapprofd with the uprobe sampler at its default sample
                     interval and probe layout (auto: uprobe sessions on 6.13+), attached with
                     GET /debug/pprof/heap?pid=N (synchronous) before the
                     workload starts its measured loop;
  heapprofd-classic  the same with --probe-layout classic (perf-event
                     uprobe/uretprobe pairs, the fallback of older kernels);
  heapprofd-inprocess  heapprofd with --sampler inprocess: the sampling
                     decision inside the process, only sampled calls trap;
and, unless --no-breakdown, two more
that split heapprofd's cost above floor-emulated into its parts:
  floor-session      the same do-nothing entry probes in one uprobe session
                     link whose program returns 1 (no return probe ever):
                     what the kernel's session machinery adds to a plain
                     uprobe_multi entry;
  heapprofd-unsampled  heapprofd (auto) with --sample-interval 4294967296,
                     so nothing is sampled: its unsampled path alone;
  heapprofd-idle     heapprofd (auto) with --idle-detach 1s: attached by a
                     request, then let go when no other came (the harness
                     waits for heapprofd_idle_detached_total to move)
                     before the measured loop: what a process pays once a
                     quick look is over (bare, if the probes are gone).
A pair's cost is each thread's CPU time for its loop (user and system: the
kernel's uprobe handling is charged to the thread that trapped) divided by
its pairs, averaged over the threads; time preempted by other processes is
not in it, so other load on a shared machine inflates it far less than wall
time (--clock wall uses wall time instead).
Each configuration runs --repeats times, interleaved (bare, floor-classic,
..., bare, ...) so that drift in the machine hits all of them alike, and the
table shows medians: ns per pair, ns added to bare, the ratio to bare,
the added cost as a multiple of floor-emulated's added cost (heapprofd's
target: <= 1.15) and floor-classic's added cost as a multiple of it
(heapprofd's target: >= 8).

Every heapprofd run also yields attach and detach times of one process
whose whole allocator is probed: the wall time of the first GET, the
daemon's heapprofd_last_attach_seconds after it, and, once the workload has
exited and heapprofd_detached_total has gone up (polled, at most 10 s, 60 s
in the classic layout, whose probes come off one by one: DETACH_TIMEOUTS),
heapprofd_last_detach_seconds. The harness waits for that detach before the
next run, so no detach overlaps a measured loop.

And (not with --no-sampled), in the same interleaving, 1 thread only:
  heapprofd-every, heapprofd-classic-every, heapprofd-inprocess-every
                     heapprofd with --sample-interval 1 in each layout and
                     sampler, every allocation sampled; minus the
                     default-interval run of the same layout, that estimates
                     the cost of one sampled allocation (stack walk and map
                     updates, its return probe and its free included).

With --bpf-stats the kernel's BPF run-time statistics are on for the run
(BPF_ENABLE_STATS, held by an fd, so they go off when the harness ends) and
a second table shows, per configuration, the time spent inside the BPF
programs per pair (from /proc/PID/fdinfo of the prober's program fds): the
part of the added cost that is our code rather than the kernel's trap. The
statistics cost two clock reads per program run, so the first table of such
a run is a little dearer than without.

--quick runs tiny counts, 1 thread, once, and only checks that every
configuration (the sampled ones included) produced its numbers; it is the
bench.smoke test and asserts no timing. A heapprofd that ends during a
--quick run fails it, whatever the cause; in a full run one stopped from
outside (SIGTERM: it exits 0) is restarted and the run repeated, one that
crashed fails it. Python 3 standard library only.
"""

import argparse
import ctypes
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

# Seconds to wait for a process to say "ready"/"attached"/"listening": they
# load BPF objects and (heapprofd) build unwind tables, which takes a moment.
STARTUP_TIMEOUT = 60
# Seconds a single workload run may take before the harness gives up; the
# default counts take a few seconds under the probes.
RUN_TIMEOUT = 600
# Seconds to wait for heapprofd to detach from an exited workload, per probe
# layout. The daemon notices the exit at its next scan of /proc (every
# second), then takes the probes off: a session or multi layout closes a
# link or two (milliseconds); the classic layout closes one perf-event
# uprobe per probed function, one after the other, each waiting for the
# kernel's grace period: about 2 s on an idle 2-vCPU VM, more than 5 s
# with 24 CPU-bound processes beside it. These are
# deadlines for a detach that never ends, not measurements (the attach and
# detach table has those); a daemon that ends while it detaches fails the
# run at once, as any crash does.
DETACH_TIMEOUTS = {"session": 10, "multi": 10, "classic": 60}
# Allocation size in bytes: small enough for glibc's tcache fast path, so
# that the bare pair is as cheap as it gets and the probes dominate.
DEFAULT_SIZE = 64
# A sample interval no allocation of the workload ever reaches in a run.
NEVER_SAMPLE = 1 << 32
# heapprofd's targets for its added cost per pair: within 1.15x of the
# floor's (the unsampled path must cost next to nothing beyond the trap),
# and at least 8x below floor-classic's (the point of the emulated sites
# and of skipping the return probe for unsampled calls).
TARGET_VS_EMULATED = 1.15
TARGET_CLASSIC_VS = 8.0

# Configuration -> (kind, floor layout or daemon key, iteration class).
CONFIGS = {
    "bare": ("bare", None, "bare"),
    "floor-classic": ("floor", "classic", "classic"),
    "floor-emulated": ("floor", "emulated", "cheap"),
    "floor-session": ("floor", "session", "cheap"),
    "heapprofd": ("heapprofd", "auto", "cheap"),
    "heapprofd-classic": ("heapprofd", "classic", "cheap"),
    "heapprofd-unsampled": ("heapprofd", "unsampled", "cheap"),
    "heapprofd-idle": ("heapprofd", "idle", "cheap"),
    "heapprofd-every": ("heapprofd", "auto-every", "sampled"),
    "heapprofd-classic-every": ("heapprofd", "classic-every", "sampled"),
    "heapprofd-inprocess": ("heapprofd", "inprocess", "bare"),
    "heapprofd-inprocess-every": ("heapprofd", "inprocess-every", "sampled"),
}
# Every-allocation-sampled configuration -> its default-interval counterpart.
SAMPLED = {"heapprofd-every": "heapprofd", "heapprofd-classic-every": "heapprofd-classic",
           "heapprofd-inprocess-every": "heapprofd-inprocess"}
# Daemon key -> heapprofd arguments. The uprobe sampler's configurations
# name it: the in-process sampler is the default.
UPROBE = ["--sampler", "uprobe"]
DAEMONS = {
    "auto": UPROBE,
    "classic": UPROBE + ["--probe-layout", "classic"],
    "unsampled": UPROBE + ["--sample-interval", str(NEVER_SAMPLE)],
    "idle": UPROBE + ["--idle-detach", "1s"],
    "auto-every": UPROBE + ["--sample-interval", "1"],
    "classic-every": UPROBE + ["--sample-interval", "1", "--probe-layout", "classic"],
    "inprocess": ["--sampler", "inprocess"],
    "inprocess-every": ["--sampler", "inprocess", "--sample-interval", "1"],
}
# The in-process sampler's target: ns added per pair at most (a few ns of
# its own per call; only sampled calls may reach the kernel).
TARGET_INPROCESS_NS = 25.0


# bpf(2): the syscall number on x86-64 and the command that turns run-time
# statistics on for as long as the returned fd is open.
SYS_BPF = 321
BPF_ENABLE_STATS = 32


class BenchError(Exception):
    """A run that did not produce its number."""


def parse_args():
    """The command line, with defaults sized so a full run takes under 3 minutes on 2 cores."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bench", required=True, help="path of malloc_bench")
    p.add_argument("--floor", required=True, help="path of floor_probes")
    p.add_argument("--heapprofd", help="path of heapprofd (omit to skip its configurations)")
    # Emulated entry probes cost ~1-1.5 us a pair on a 2-vCPU VM: 500k pairs
    # take ~0.5-0.8 s a run.
    p.add_argument("--iterations", type=int, default=500_000,
                   help="pairs per thread under probes on emulated instructions (every "
                        "configuration but bare and floor-classic) (default 500000)")
    # A single-stepped free and a return probe cost ~11 us a pair: 100k
    # pairs take ~1.1 s a run.
    p.add_argument("--classic-iterations", type=int, default=100_000,
                   help="pairs per thread under floor-classic (default 100000)")
    # Bare pairs cost ~10 ns; 10M of them take ~0.1 s, long enough to time.
    p.add_argument("--bare-iterations", type=int, default=10_000_000,
                   help="pairs per thread when bare (default 10000000)")
    p.add_argument("--sampled-iterations", type=int, default=20_000,
                   help="pairs for the every-allocation-sampled runs (default 20000)")
    p.add_argument("--size", type=int, default=DEFAULT_SIZE, help="allocation size in bytes")
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts (default 1,2)")
    p.add_argument("--repeats", type=int, default=5, help="runs per configuration (default 5)")
    p.add_argument("--no-sampled", action="store_true",
                   help="skip the every-allocation-sampled estimate")
    p.add_argument("--no-breakdown", dest="breakdown", action="store_false",
                   help="leave out floor-session and heapprofd-unsampled")
    p.add_argument("--clock", choices=("cpu", "wall"), default="cpu",
                   help="time each thread's loop by its CPU time (default: robust against "
                        "other load on the machine) or by wall time")
    p.add_argument("--bpf-stats", action="store_true",
                   help="also report ns spent inside the BPF programs per pair")
    p.add_argument("--quick", action="store_true",
                   help="smoke mode: tiny counts, 1 thread, 1 repeat, no timing claims")
    p.add_argument("-v", "--verbose", action="store_true", help="print every run")
    args = p.parse_args()
    if args.quick:
        args.iterations, args.classic_iterations = 2_000, 2_000
        args.bare_iterations, args.sampled_iterations = 20_000, 2_000
        args.threads, args.repeats = "1", 1
    args.threads = [int(t) for t in args.threads.split(",")]
    return args


def enable_bpf_stats():
    """Turns on BPF run-time statistics until the returned fd is closed."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    attr = ctypes.create_string_buffer(16)  # enable_stats.type = BPF_STATS_RUN_TIME (0)
    fd = libc.syscall(SYS_BPF, BPF_ENABLE_STATS, attr, len(attr))
    if fd < 0:
        raise BenchError(f"BPF_ENABLE_STATS: {os.strerror(ctypes.get_errno())}")
    return fd


def bpf_prog_stats(pid):
    """(run_time_ns, run_cnt) summed over the BPF programs process pid holds fds of."""
    seen, total_ns, total_cnt = set(), 0, 0
    fd_dir = f"/proc/{pid}/fd"
    for fd in os.listdir(fd_dir):
        try:
            if os.readlink(f"{fd_dir}/{fd}") != "anon_inode:bpf-prog":
                continue
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                info = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        prog_id = info.get("prog_id", "").strip()
        if prog_id in seen:
            continue
        seen.add(prog_id)
        total_ns += int(info.get("run_time_ns", "0"))
        total_cnt += int(info.get("run_cnt", "0"))
    return total_ns, total_cnt


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


def supports(path, flag):
    """Whether heapprofd at `path` knows `flag` (an older build, run for a
    side-by-side comparison, may not)."""
    out = subprocess.run([path, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True).stdout
    return flag in out


def pin_args(path):
    """--pin-dir none where heapprofd has it: each daemon of the run keeps its own maps,
    and none meets maps pinned by another heapprofd (or leaves any behind)."""
    return ["--pin-dir", "none"] if supports(path, "--pin-dir") else []


class Daemon:
    """One heapprofd process, listening on a free local port."""

    def __init__(self, path, extra_args=()):
        port = free_port()
        extra_args = [*pin_args(path), *extra_args]
        self.lines = []
        self.layout = "?"
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
        """Collects stderr lines; notes the probe layout and the address once the daemon serves."""
        for line in self.proc.stderr:
            self.lines.append(line)
            m = re.search(r"heapprofd: probes attach as (\S+) links", line)
            if m:
                self.layout = m.group(1)
            m = re.search(r"heapprofd: listening on (\S+)", line)
            if m and not self.listening.is_set():
                self.address = m.group(1)
                self.listening.set()
        self.listening.set()  # exited: wake the waiter, which checks poll()

    def _get(self, path):
        """The body of GET path; BenchError on any failure."""
        url = self.base + path
        try:
            with urllib.request.urlopen(url, timeout=STARTUP_TIMEOUT) as r:
                return r.read()
        except urllib.error.HTTPError as e:
            raise BenchError(f"GET {url}: {e.code} {e.read().decode(errors='replace').strip()}")
        except OSError as e:
            raise BenchError(f"GET {url}: {e}{self.state()}")

    def state(self):
        """For an error message: the daemon's exit status and last log lines, if it ended."""
        code = self.proc.poll()
        if code is None:
            return ""
        return f"; heapprofd exited with {code}, its stderr ends:\n" + "".join(self.lines[-20:])

    def metrics(self):
        """The daemon's /metrics as {name: value} (labelled series left out)."""
        out = {}
        for line in self._get("/metrics").decode().splitlines():
            m = re.fullmatch(r"(heapprofd_\w+) (\S+)", line)
            if m:
                out[m.group(1)] = float(m.group(2))
        return out

    def attach(self, pid):
        """Asks for pid's heap profile, which attaches heapprofd to it synchronously.

        Returns (wall seconds of that GET, heapprofd_last_attach_seconds).
        """
        t0 = time.monotonic()
        self._get(f"/debug/pprof/heap?pid={pid}")
        wall = time.monotonic() - t0
        return wall, self.metrics()["heapprofd_last_attach_seconds"]

    def wait_idle_detached(self, before):
        """Waits until heapprofd_idle_detached_total exceeds before; BenchError on timeout."""
        deadline = time.monotonic() + self.detach_timeout()
        while self.metrics().get("heapprofd_idle_detached_total", 0) <= before:
            if time.monotonic() > deadline:
                raise BenchError(f"heapprofd did not let go of an idle process within "
                                 f"{self.detach_timeout()} s{self.state()}")
            time.sleep(0.02)
    def detach_timeout(self):
        """The deadline for one detach in this daemon's probe layout."""
        return DETACH_TIMEOUTS.get(self.layout, max(DETACH_TIMEOUTS.values()))

    def wait_detached(self, before):
        """heapprofd_last_detach_seconds once detached_total exceeds before;
        None after detach_timeout(); BenchError if the daemon ends meanwhile."""
        deadline = time.monotonic() + self.detach_timeout()
        while True:
            if self.proc.poll() is not None:
                raise BenchError(f"heapprofd ended while it detached{self.state()}")
            m = self.metrics()
            if m["heapprofd_detached_total"] > before:
                return m["heapprofd_last_detach_seconds"]
            if time.monotonic() > deadline:
                return None
            time.sleep(0.02)

    def close(self):
        """Stops the daemon."""
        stop(self.proc)


def run_once(args, config, threads, iterations, daemon=None, timing=None, stats=None,
             info=None):
    """One workload run in one configuration; returns its ns per pair.

    With a daemon, appends (GET wall s, attach s, detach s) to timing and
    sets info["samples"] to the samples the run took. With stats (a list),
    appends (BPF ns per pair, BPF program runs per pair).
    """
    kind, param, _ = CONFIGS[config]
    work = subprocess.Popen([args.bench, str(threads), str(iterations), str(args.size)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    probes = None
    try:
        line = read_line(work.stdout, work, "malloc_bench")
        m = re.fullmatch(r"ready (\d+)", line)
        if not m:
            raise BenchError(f"malloc_bench said {line!r}, not 'ready <pid>'")
        pid = int(m.group(1))
        if kind == "floor":
            probes = subprocess.Popen([args.floor, "--pid", str(pid), "--layout", param],
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=None if args.verbose else subprocess.DEVNULL,
                                      text=True)
            line = read_line(probes.stdout, probes, "floor_probes")
            if line != "attached":
                raise BenchError(f"floor_probes said {line!r}, not 'attached'")
        elif kind == "heapprofd":
            m = daemon.metrics()
            detached_before = m["heapprofd_detached_total"]
            samples_before = m["heapprofd_samples_total"]
            wall, attach_s = daemon.attach(pid)
            if param == "idle":
                daemon.wait_idle_detached(m["heapprofd_idle_detached_total"])
        prober = probes.pid if probes else daemon.proc.pid if daemon else None
        if stats is not None and prober:
            stats_before = bpf_prog_stats(prober)
        try:
            out, _ = work.communicate("go\n", timeout=RUN_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise BenchError(f"malloc_bench ran longer than {RUN_TIMEOUT} s")
        m = re.search(rf"^{'cpu_' if args.clock == 'cpu' else ''}ns_per_pair ([0-9.]+)$", out,
                      re.M)
        if work.returncode != 0 or not m:
            raise BenchError(f"malloc_bench exited {work.returncode} with output {out!r}")
        if stats is not None and prober:
            after = bpf_prog_stats(prober)
            pairs = threads * iterations
            stats.append(((after[0] - stats_before[0]) / pairs,
                          (after[1] - stats_before[1]) / pairs))
        if kind == "heapprofd" and param != "idle":
            # Also keeps the detach out of the next run's measured loop.
            detach_s = daemon.wait_detached(detached_before)
            if detach_s is None:
                print(f"bench: heapprofd ({daemon.layout} layout) did not detach from {pid} "
                      f"within {daemon.detach_timeout()} s", file=sys.stderr)
            if timing is not None:
                timing.append((wall, attach_s, detach_s))
            if info is not None:
                info["samples"] = daemon.metrics()["heapprofd_samples_total"] - samples_before
        return float(m.group(1))
    finally:
        stop(work, signal.SIGKILL)
        if probes:
            probes.stdin.close()  # end of input: floor_probes detaches and exits
            try:
                probes.wait(timeout=10)
            except subprocess.TimeoutExpired:
                stop(probes)


def stopped_on_request(daemon):
    """True if the daemon ended as asked to (SIGTERM or SIGINT from outside:
    it logs 'heapprofd: stopping' and exits 0), not by a crash."""
    return daemon.proc.poll() == 0 and any(line.startswith("heapprofd: stopping")
                                           for line in daemon.lines)


def run_retrying(args, config, threads, iterations, daemons, timings, stats, info):
    """run_once, but in a full run a daemon that something outside stopped
    (SIGTERM: on a shared machine other jobs may send it) is restarted and
    the run repeated, twice at most. A daemon that crashed, or any that ended during --quick
    (the bench.smoke test), is a failure: restarting would hide the crash."""
    key = CONFIGS[config][1]
    for attempt in range(3):
        try:
            return run_once(args, config, threads, iterations, daemons.get(key),
                            timings.get(key), stats, info)
        except BenchError as e:
            d = daemons.get(key)
            if d is None or d.proc.poll() is None:
                raise
            if args.quick or not stopped_on_request(d) or attempt == 2:
                raise BenchError(str(e) if d.state() in str(e) else f"{e}{d.state()}") from None
            print(f"bench: heapprofd ({key}) was stopped during a run ({str(e).splitlines()[0]}); "
                  f"restarting it and repeating the run", file=sys.stderr)
            daemons[key] = Daemon(args.heapprofd, DAEMONS[key])
    raise AssertionError("not reached")


def check_daemons_alive(daemons):
    """BenchError if a daemon ended during the run (after its last use too)."""
    for key, d in daemons.items():
        if d.proc.poll() is not None:
            raise BenchError(f"heapprofd ({key}) ended before the end of the run{d.state()}")


def fmt_ratio(x):
    """A ratio for the table, or '-' where it does not apply."""
    return "-" if x is None else f"{x:.2f}"


def print_table(configs, thread_counts, medians, spreads):
    """The results: medians per configuration and thread count, with ratios."""
    head = ("configuration", "threads", "ns/pair", "min..max", "added ns/pair", "x bare",
            "added / floor-emulated's", "floor-classic's / added")
    rows = []
    for threads in thread_counts:
        bare = medians[("bare", threads)]
        emu = medians.get(("floor-emulated", threads), bare) - bare
        classic = medians.get(("floor-classic", threads), bare) - bare
        for config in configs:
            v = medians[(config, threads)]
            lo, hi = spreads[(config, threads)]
            added = v - bare
            probed = config != "bare"
            rows.append((config, str(threads), f"{v:.1f}", f"{lo:.1f}..{hi:.1f}",
                         f"{added:.1f}" if probed else "-",
                         fmt_ratio(v / bare if probed else None),
                         fmt_ratio(added / emu if probed and emu > 0 else None),
                         fmt_ratio(classic / added if probed and added > 0 and classic > 0
                                   else None)))
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    for r in [head] + rows:
        print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))))


def print_targets(thread_counts, medians, layout):
    """heapprofd's two targets for its added cost, met or not, per thread count."""
    print()
    for threads in thread_counts:
        bare = medians[("bare", threads)]
        hp = medians[("heapprofd", threads)] - bare
        emu = medians[("floor-emulated", threads)] - bare
        classic = medians[("floor-classic", threads)] - bare
        if hp <= 0 or emu <= 0:
            print(f"targets, {threads} thread(s): added costs too small to compare")
            continue
        r1, r2 = hp / emu, classic / hp
        if ("heapprofd-inprocess", threads) in medians:
            ip = medians[("heapprofd-inprocess", threads)] - bare
            print(f"targets, {threads} thread(s): the in-process sampler adds {ip:.1f} ns/pair "
                  f"(target <= {TARGET_INPROCESS_NS:g}: "
                  f"{'met' if ip <= TARGET_INPROCESS_NS else 'MISSED'}), "
                  f"{(hp / ip) if ip > 0 else float('inf'):.0f}x less than the uprobe sampler")
        print(f"targets, {threads} thread(s): heapprofd ({layout}) adds {hp:.0f} ns/pair = "
              f"{r1:.2f}x floor-emulated's {emu:.0f} (target <= {TARGET_VS_EMULATED}: "
              f"{'met' if r1 <= TARGET_VS_EMULATED else 'MISSED'}); floor-classic adds "
              f"{classic:.0f} = {r2:.1f}x heapprofd's (target >= {TARGET_CLASSIC_VS:g}: "
              f"{'met' if r2 >= TARGET_CLASSIC_VS else 'MISSED'})")


def print_attach(timings, layouts):
    """Attach and detach times of one process per daemon layout: medians over its runs."""
    head = ("heapprofd layout", "runs", "first GET wall ms", "attach ms", "attach min..max",
            "detach ms", "detach min..max")
    rows = []
    for key, runs in timings.items():
        if not runs:
            continue
        cols = [[r[i] * 1e3 for r in runs if r[i] is not None] for i in range(3)]
        med = [f"{statistics.median(c):.2f}" if c else "-" for c in cols]
        span = [f"{min(c):.2f}..{max(c):.2f}" if c else "-" for c in cols]
        rows.append((f"{layouts[key]} ({key})", str(len(runs)), med[0], med[1], span[1], med[2],
                     span[2]))
    if not rows:
        return
    print("\nattach and detach of one process (malloc_bench, libc's whole allocator probed), "
          "median of its heapprofd runs:")
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    for r in [head] + rows:
        print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))))


def print_bpf_stats(configs, thread_counts, bpf_stats):
    """Time inside the BPF programs per pair, per configuration: medians."""
    print("\ninside the BPF programs (BPF run-time statistics on), median per pair:")
    head = ("configuration", "threads", "BPF ns/pair", "program runs/pair")
    rows = []
    for threads in thread_counts:
        for config in configs:
            runs = bpf_stats.get((config, threads))
            if runs:
                rows.append((config, str(threads),
                             f"{statistics.median(r[0] for r in runs):.1f}",
                             f"{statistics.median(r[1] for r in runs):.3f}"))
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    for r in [head] + rows:
        print("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))))


def print_sampled(args, medians, daemons, samples):
    """The cost of one sampled allocation per layout: --sample-interval 1 minus default."""
    print(f"\nevery allocation sampled (--sample-interval 1), 1 thread, "
          f"{args.sampled_iterations} pairs, median of {args.repeats} (interleaved with the "
          f"above):")
    for config, base_config in SAMPLED.items():
        every = medians[(config, 1)]
        base = medians[(base_config, 1)]
        key = CONFIGS[config][1]
        print(f"  {base_config} ({daemons[key].layout}): {every:.1f} ns/pair, "
              f"{samples[config] / args.repeats:.0f} samples a run; cost per sampled allocation, "
              f"its free included: ~{every - base:.0f} ns (minus {base:.1f}, the default-interval "
              f"run)")


def main():
    """Runs every configuration, prints the tables; 1 if some number is missing."""
    args = parse_args()
    configs = ["bare", "floor-classic", "floor-emulated"]
    if args.breakdown:
        configs.append("floor-session")
    if args.heapprofd:
        configs += ["heapprofd", "heapprofd-classic", "heapprofd-inprocess"]
        if args.breakdown:
            configs.append("heapprofd-unsampled")
        if supports(args.heapprofd, "--idle-detach"):
            configs.append("heapprofd-idle")
    # The every-allocation-sampled runs go in the same interleaving, 1 thread only.
    sampled_configs = list(SAMPLED) if args.heapprofd and not args.no_sampled \
        and 1 in args.threads else []
    iterations = {"bare": args.bare_iterations, "cheap": args.iterations,
                  "classic": args.classic_iterations, "sampled": args.sampled_iterations}
    daemons = {}
    results, timings, bpf_stats, samples = {}, {}, {}, {}
    started = time.monotonic()
    print(f"{args.clock} time per malloc({args.size}) + free pair per thread; pairs per "
          f"thread: bare {args.bare_iterations}; "
          f"floor-classic {args.classic_iterations}; --sample-interval 1 runs "
          f"{args.sampled_iterations}; the others {args.iterations}; median of {args.repeats} "
          f"interleaved runs", flush=True)
    stats_fd = enable_bpf_stats() if args.bpf_stats else None
    try:
        for config in configs + sampled_configs:
            kind, key, _ = CONFIGS[config]
            if kind == "heapprofd":
                daemons[key] = Daemon(args.heapprofd, DAEMONS[key])
                if config not in sampled_configs and key != "idle":
                    timings[key] = []
        for threads in args.threads:
            for rep in range(args.repeats):
                for config in configs + (sampled_configs if threads == 1 else []):
                    kind, key, cls = CONFIGS[config]
                    stats = bpf_stats.setdefault((config, threads), []) if args.bpf_stats \
                        else None
                    info = {}
                    v = run_retrying(args, config, threads, iterations[cls], daemons, timings,
                                     stats, info)
                    samples[config] = samples.get(config, 0) + info.get("samples", 0)
                    results.setdefault((config, threads), []).append(v)
                    if args.verbose:
                        print(f"run {rep + 1}/{args.repeats} {config} threads={threads}: "
                              f"{v:.1f} ns/pair", file=sys.stderr)
        check_daemons_alive(daemons)
    finally:
        for d in daemons.values():
            d.close()
        if stats_fd is not None:
            os.close(stats_fd)

    medians = {k: statistics.median(v) for k, v in results.items()}
    spreads = {k: (min(v), max(v)) for k, v in results.items()}
    if args.heapprofd:
        print("heapprofd layouts: " + ", ".join(
            f"{c} = {daemons[CONFIGS[c][1]].layout} links" for c in configs
            if CONFIGS[c][0] == "heapprofd"))
    else:
        print("(no --heapprofd given: heapprofd configurations skipped)")
    print_table(configs, args.threads, medians, spreads)
    if args.heapprofd:
        print_targets(args.threads, medians, daemons["auto"].layout)
        print_attach(timings, {k: d.layout for k, d in daemons.items()})
    if args.bpf_stats:
        print_bpf_stats(configs + sampled_configs, args.threads, bpf_stats)
    if sampled_configs:
        print_sampled(args, medians, daemons, samples)
    print(f"\nbench: took {time.monotonic() - started:.0f} s")

    missing = [(c, t) for t in args.threads for c in configs if (c, t) not in results]
    missing += [(c, 1) for c in sampled_configs if (c, 1) not in results]
    missing += [k for k, runs in timings.items()
                if not runs or any(x is None for r in runs for x in r)]
    if missing:
        print(f"bench: no number for {missing}", file=sys.stderr)
        return 1
    if args.quick:
        print("bench: every configuration produced its numbers")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as e:
        print(f"bench: {e}", file=sys.stderr)
        sys.exit(1)
