"""Helpers for the integration tests: run heapprofd and the test workloads,
and fetch its HTTP endpoints. The tests reach everything through this
module; beside it, harness_checks.py (assertions, waits with a deadline),
pprof_raw.py (profiles read by `go tool pprof`), prometheus_text.py
(/metrics) and harness_runner.py (main(): runs a file's tests and reports
`N passed, N failed`).

Environment (set by tests/integration/CMakeLists.txt):
  HEAPPROFD  path of the heapprofd binary
  WORKLOADS  directory of the built workloads (build/tests/workloads)
  HEAPPROF_SANITIZED  "1" when the daemon is built with ASan+UBSan or TSan
  CI         "true" on CI. These tests never skip: a missing BPF, a daemon
             that does not start or a missing `go` is a failure, with the
             reason, in CI and outside it alike.

How a test file is written (unittest, run by main() in harness_runner.py):

    import unittest
    import heapprof_harness as h

    def setUpModule():              # a daemon the file's tests share, if any
        global D
        D = unittest.enterModuleContext(h.Daemon("--sample-interval", "1"))

    class ExactTest(unittest.TestCase):
        # What the tests of this class share, made once in setUpClass.

        @classmethod
        def setUpClass(cls):        # replaces h.Once: computed once per class
            cls.profile = profile_exact()

        def test_every_entry_point_is_counted_exactly(self):
            h.check_equal(totals(self.profile), EXPECTED, "totals")

    if __name__ == "__main__":
        h.main()

- Tests are methods test_* of unittest.TestCase classes; main() runs them
  in the order the file defines them. There is no list of tests to keep.
- Shared state goes in setUpModule/setUpClass, and context managers (a
  Daemon, a Workload) are entered with unittest.enterModuleContext or
  cls.enterClassContext, so they are left (the daemon stopped, and its death
  or a sanitizer report turned into a failure) after the last test. A
  fixture that fails is one FAIL line; the tests that need it do not run.
  Put the tests that share a costly fixture in a class of their own, so the
  others run if it fails.
- Checks stay h.check and h.check_equal (a Failure is an AssertionError:
  unittest counts it as a failure and main() prints its message alone);
  self.assert* works as well.
"""

import contextlib
import json
import os
import queue
import re
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request

# The parts of the harness in modules of their own, which the tests reach
# through this one (h.check, h.decode, h.parse_metrics, ...).
from harness_checks import (POLL_S, Failure, check, check_equal,  # noqa: F401
                            check_throughout, wait_until)
from pprof_raw import (SAMPLE_TYPES, Line, Location, Mapping, Profile, Sample,  # noqa: F401
                       check_heap_shape, decode, describe, parse_raw, pprof, totals_by_leaf,
                       traces)
from prometheus_text import Metrics, parse_metrics  # noqa: F401
# The runner: main() runs a file's unittest tests; run() and Once are deprecated.
from harness_runner import Once, main, run  # noqa: F401

HEAPPROFD = os.environ.get("HEAPPROFD", "")
WORKLOADS = os.environ.get("WORKLOADS", "")
IN_CI = os.environ.get("CI", "").lower() == "true"
# The daemon is built with ASan+UBSan (build-asan): its memory use and speed
# are the sanitizers', so bounds on them do not apply.
SANITIZED = os.environ.get("HEAPPROF_SANITIZED") == "1"

# How long the daemon may take to print its listening line (BPF load,
# attach). It takes about 1 s here; the verifier's work is CPU-bound, so on
# 2 cores shared with a parallel build or a sanitized test run it has taken
# over 10 s, and over 45 s beside two qemu guests, three sanitized trees and
# other sessions' builds. This only bounds how long a daemon that never
# starts is waited for, so it is generous.
LISTEN_TIMEOUT_S = 90.0
# How long one HTTP request may take; a delta profile adds its seconds.
REQUEST_TIMEOUT_S = 60.0
# How long a workload may take to print "ready"; "done" has its own timeout.
READY_TIMEOUT_S = 10.0
# How long the daemon may take to detach an exited process (it scans /proc
# every second; the classic layout takes its probes off one by one, about
# 2 s): a deadline for the tests that are not about how quickly that
# happens, with room for a loaded machine. test_service.py checks the 3 s
# bound the issue set.
DETACH_TIMEOUT_S = 30.0

# Where libjemalloc2 installs jemalloc on Debian.
JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"

# Lines that start a sanitizer report on stderr: ASan and LSan errors,
# UBSan's "file:line:col: runtime error: ..." (fatal: -fno-sanitize-recover),
# and TSan's races and lock-order inversions (build-tsan).
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", ": runtime error: ",
                     "WARNING: ThreadSanitizer")


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _check_environment():
    """Fails with the reason if the tests cannot run here at all."""
    check(HEAPPROFD, "HEAPPROFD is not set (run the tests through ctest)")
    check(os.access(HEAPPROFD, os.X_OK), f"HEAPPROFD={HEAPPROFD} is not an executable")
    check(WORKLOADS and os.path.isdir(WORKLOADS),
          f"WORKLOADS={WORKLOADS!r} is not a directory of built workloads")
    check(os.geteuid() == 0,
          f"integration tests need root (CAP_BPF, CAP_PERFMON); euid is {os.geteuid()}")


# --- HTTP -------------------------------------------------------------------

# An opener that ignores http_proxy and friends: requests go to 127.0.0.1.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Response:
    """One HTTP answer: status, headers (a dict, lower-case names) and body bytes."""

    def __init__(self, status, headers, body):
        self.status = status
        self.headers = {k.lower(): v for k, v in headers.items()}
        self.body = body

    def text(self):
        """The body as text (UTF-8, undecodable bytes replaced)."""
        return self.body.decode("utf-8", "replace")


def request(url, timeout=REQUEST_TIMEOUT_S, headers=None):
    """GETs url (with extra headers if given); returns a Response for any
    status (4xx and 5xx included)."""
    try:
        with _OPENER.open(urllib.request.Request(url, headers=headers or {}),
                          timeout=timeout) as r:
            return Response(r.status, dict(r.headers), r.read())
    except urllib.error.HTTPError as e:
        return Response(e.code, dict(e.headers), e.read())


def request_with_headers(url, headers, timeout=REQUEST_TIMEOUT_S):
    """GETs url with the given request headers; returns a Response."""
    return request(url, timeout, headers)


def get(url, timeout=REQUEST_TIMEOUT_S):
    """GETs url; returns (status, body bytes)."""
    r = request(url, timeout)
    return r.status, r.body


def check_one_line_reason(body, what):
    """Fails unless body is one non-empty line of text (a trailing newline allowed)."""
    text = body.decode("utf-8", "replace")
    stripped = text[:-1] if text.endswith("\n") else text
    check(stripped.strip() != "" and "\n" not in stripped,
          f"{what}: body should be a one-line reason, got {text!r}")


# --- The daemon --------------------------------------------------------------

class Daemon:
    """heapprofd on a free port, as a context manager.

    Entering starts it and waits for `heapprofd: listening on ...` on stderr;
    if it logs `heapprofd: BPF unavailable:` or exits first, that is a
    failure with its stderr in the message. Leaving stops it (SIGTERM, then
    SIGKILL) and fails if it had died on its own while the test ran.
    """

    def __init__(self, *args):
        self.args = list(args)
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.proc = None
        self.lines = []
        self._cond = threading.Condition()
        self._reader = None

    def __enter__(self):
        _check_environment()
        cmd = [HEAPPROFD, "--listen", self.address] + self.args
        # Each daemon keeps its maps to itself unless a test shares them on
        # purpose (the restart test passes its own --pin-dir).
        if "--pin-dir" not in self.args:
            cmd += ["--pin-dir", "none"]
        # HEAPPROFD_PROBE_LAYOUT runs a test under a fallback layout (classic,
        # multi) as well as the best one the kernel offers.
        if os.environ.get("HEAPPROFD_PROBE_LAYOUT"):
            cmd += ["--probe-layout", os.environ["HEAPPROFD_PROBE_LAYOUT"]]
        # HEAPPROFD_SAMPLER runs a test with the in-process sampler too.
        # A target that silently fell back to uprobes would pass such a test
        # without testing the in-process sampler: __exit__ fails then.
        self.forced_sampler = None
        if os.environ.get("HEAPPROFD_SAMPLER") and "--sampler" not in cmd:
            cmd += ["--sampler", os.environ["HEAPPROFD_SAMPLER"]]
            self.forced_sampler = os.environ["HEAPPROFD_SAMPLER"]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        self._reader = threading.Thread(target=self._read_stderr, daemon=True)
        self._reader.start()
        try:
            self._wait_listening(cmd)
        except BaseException:
            self._stop()
            raise
        return self

    def __exit__(self, exc_type, exc, tb):
        died = self.proc.poll()
        self._stop()
        # A sanitizer report fails the test even if it failed already: the
        # report (often the daemon dying) is the cause worth showing.
        if self.sanitizer_report():
            first = str(exc).splitlines()[0] if exc is not None and str(exc) else ""
            before = f"; the test had failed too: {first}" if exc is not None else ""
            raise Failure(f"heapprofd reported a sanitizer error (exit status "
                          f"{self.proc.returncode}){before}; stderr:\n{self.stderr()}")
        fell_back = [int(m) for m in re.findall(r"pid (\d+): in-process sampler not used",
                                                 self.stderr())]
        if exc_type is None and self.forced_sampler == "inprocess" and \
                any(pid in WORKLOAD_PIDS for pid in fell_back):
            raise Failure("HEAPPROFD_SAMPLER=inprocess, but a workload fell back to uprobes; "
                          f"stderr:\n{self.stderr()}")
        if exc_type is None and died is not None:
            raise Failure(f"heapprofd exited with status {died} during the test; "
                          f"stderr:\n{self.stderr()}")
        return False

    def sanitizer_report(self):
        """True if stderr holds an ASan, LSan, UBSan or TSan report (builds
        with HEAPPROF_SANITIZE=ON or HEAPPROF_TSAN=ON; a plain build never
        prints one)."""
        return any(marker in line for line in self.stderr().splitlines()
                   for marker in SANITIZER_MARKERS)

    def _read_stderr(self):
        """Collects stderr lines as they come (and echoes none)."""
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with self._cond:
                self.lines.append(line)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def _wait_listening(self, cmd):
        """Waits for the listening line; fails on BPF unavailable, exit or timeout."""
        want = f"heapprofd: listening on {self.address}"
        deadline = time.monotonic() + LISTEN_TIMEOUT_S
        with self._cond:
            while True:
                for line in self.lines:
                    if line.startswith("heapprofd: BPF unavailable"):
                        raise Failure(f"{line} (CI={IN_CI}; these tests never skip); "
                                      f"stderr:\n{self.stderr_locked()}")
                if any(line.strip() == want for line in self.lines):
                    return
                if self.proc.poll() is not None and not self._reader.is_alive():
                    raise Failure(f"heapprofd exited with status {self.proc.returncode} "
                                  f"before listening; command: {' '.join(cmd)}; "
                                  f"stderr:\n{self.stderr_locked()}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise Failure(f"heapprofd did not log {want!r} within "
                                  f"{LISTEN_TIMEOUT_S:.0f} s; command: {' '.join(cmd)}; "
                                  f"stderr:\n{self.stderr_locked()}")
                self._cond.wait(min(left, 0.1))

    def _stop(self):
        """Stops the daemon: SIGTERM, then SIGKILL after 5 s."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self._reader is not None:
            self._reader.join(2)

    def stderr_locked(self):
        """stderr so far; the caller holds self._cond."""
        return "\n".join(self.lines)

    def stderr(self):
        """Everything the daemon wrote on stderr so far."""
        with self._cond:
            return "\n".join(self.lines)

    def alive(self):
        """True while the daemon process runs."""
        return self.proc.poll() is None

    def check_alive(self, what="heapprofd"):
        """Fails with its stderr if the daemon has exited."""
        check(self.alive(), f"{what}: heapprofd exited with status {self.proc.returncode}; "
                            f"stderr:\n{self.stderr()}")

    def url(self, path):
        """The URL of path (which starts with /) on this daemon."""
        return f"http://{self.address}{path}"

    def request(self, path, timeout=REQUEST_TIMEOUT_S):
        """GETs path; returns a Response."""
        return request(self.url(path), timeout)

    def get(self, path, timeout=REQUEST_TIMEOUT_S):
        """GETs path; returns (status, body bytes)."""
        return get(self.url(path), timeout)

    def profile(self, path, timeout=REQUEST_TIMEOUT_S):
        """GETs a profile endpoint; fails unless the answer is 200; returns the body."""
        status, body = self.get(path, timeout)
        check(status == 200, f"GET {path}: expected 200, got {status}: "
                             f"{body[:300].decode('utf-8', 'replace')!r}; "
                             f"heapprofd stderr:\n{self.stderr()}")
        return body

    def metrics(self):
        """GETs /metrics; fails unless it is 200 text/plain in the Prometheus
        text format (parse_metrics); returns it as Metrics."""
        r = self.request("/metrics")
        check_equal(r.status, 200, "GET /metrics: status")
        check(r.headers.get("content-type", "").startswith("text/plain"),
              f"GET /metrics: content type {r.headers.get('content-type')!r}, "
              f"expected text/plain")
        return parse_metrics(r.text())

    def metric(self, name):
        """The value of one metric without labels; fails if there is none."""
        m = self.metrics()
        check(name in m, f"/metrics has no {name}: {sorted(m)}")
        return m[name]

    def profiled_pids(self):
        """The pids the index (/debug/pprof/) lists as profiled."""
        r = self.request("/debug/pprof/")
        check_equal(r.status, 200, "GET /debug/pprof/: status")
        return {int(p) for p in re.findall(r"heap\?pid=(\d+)", r.text())}

    def index_entry(self, pid):
        """The JSON index's entry of `pid` (/debug/pprof/?format=json), or None."""
        r = self.request("/debug/pprof/?format=json")
        check_equal(r.status, 200, "GET /debug/pprof/?format=json: status")
        for t in json.loads(r.body)["targets"]:
            if t["pid"] == pid:
                return t
        return None

    def wait_until(self, condition, timeout, what):
        """wait_until(), with the daemon's stderr in the failure."""
        try:
            return wait_until(condition, timeout, what)
        except Failure as e:
            raise Failure(f"{e}; heapprofd stderr:\n{self.stderr()}") from None

    def settled(self):
        """True once every detach under way is done and counted: a process
        leaves the index (and heapprofd_targets) when its detach starts; its
        last profile is kept, and heapprofd_detached_total counts it, once
        its probes are gone."""
        m = self.metrics()
        return (m["heapprofd_attached_total"] - m["heapprofd_detached_total"]
                == m["heapprofd_targets"])

    def wait_detached(self, pid, what, timeout=DETACH_TIMEOUT_S):
        """Waits until the index no longer lists pid and its detach is done
        (settled()); returns the seconds that took."""
        return self.wait_until(lambda: pid not in self.profiled_pids() and self.settled(),
                               timeout, f"{what}: pid {pid} detached")


# How long a delta profile's request may take to reach its window (attach
# and first read included): a deadline for a loaded machine, not a bound.
DELTA_OPEN_TIMEOUT_S = 30.0


def wait_delta_window_open(d, request):
    """Waits until daemon d shows one delta profile in its window
    (heapprofd_delta_windows_open): from then on, what a process does falls
    in the window of the delta profile `request` (a future) asked for.
    Fails if the request ends first, or after DELTA_OPEN_TIMEOUT_S."""
    def is_open():
        if request.done():
            raise Failure(f"the delta profile ended before its window was seen open: "
                          f"{request.result()!r:.300}")
        return d.metric("heapprofd_delta_windows_open") == 1
    d.wait_until(is_open, DELTA_OPEN_TIMEOUT_S, "heapprofd_delta_windows_open to be 1")


def check_refuses(args, what, names=(), not_names=()):
    """Runs heapprofd with args (on a free port unless they give --listen,
    with --pin-dir none unless they give one) and fails unless it exits
    with status 1 without serving, its stderr holding each of `names` and
    none of `not_names`; returns that stderr."""
    _check_environment()
    cmd = [HEAPPROFD] + ([] if "--listen" in args else ["--listen", f"127.0.0.1:{free_port()}"])
    cmd += list(args) + ([] if "--pin-dir" in args else ["--pin-dir", "none"])
    r = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
    missing = [n for n in names if n not in r.stderr]
    present = [n for n in not_names if n in r.stderr]
    check(r.returncode == 1 and not missing and not present and "listening on" not in r.stderr,
          f"{what}: {' '.join(cmd)}: expected exit status 1 without serving, naming "
          f"{list(names)} and not {list(not_names)}; got status {r.returncode}, not naming "
          f"{missing}, naming {present}; stderr:\n{r.stderr}")
    return r.stderr


# Totals per leaf function of tests/workloads/exact.c at --sample-interval 1
# ([alloc_objects, alloc_space, inuse_objects, inuse_space]); test_exact.py
# explains each line. The one copy: keep it in step with exact.c.
EXACT_EXPECTED = {
    "alloc_small": [1000, 100000, 1000, 100000],
    "alloc_big": [10, 1000000, 10, 1000000],
    "alloc_freed": [500, 32000, 0, 0],
    "alloc_calloc": [200, 40000, 200, 40000],
    "alloc_realloc": [200, 31000, 100, 30000],
    "alloc_realloc_null": [50, 6400, 50, 6400],
    "alloc_posix_memalign": [20, 5120, 20, 5120],
    "alloc_aligned": [30, 15360, 30, 15360],
    "alloc_reallocarray": [40, 5120, 40, 5120],
}


# --- Workloads ---------------------------------------------------------------

# Every workload process this test started: a fallback from the in-process
# sampler fails a HEAPPROFD_SAMPLER=inprocess run only for these (another
# process, say one a load test asks for, may be traced by someone else).
WORKLOAD_PIDS = set()


class Workload:
    """A test workload (tests/workloads) speaking the ready/go/done handshake.

    Starting it waits for `ready <pid>`; go() lets it allocate, wait_done()
    waits for `done`, finish() lets it exit and checks its status. As a
    context manager it is killed on the way out if still running.
    """

    def __init__(self, name, *args, env=None, command=None):
        """Starts workload `name` with args, or, given `command` (an argv),
        that program under the name `name` (a script in a runtime)."""
        if command is None:
            path = os.path.join(WORKLOADS, name)
            check(os.access(path, os.X_OK), f"workload {path} is not built")
            command = [path] + [str(a) for a in args]
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.name = name
        self.proc = subprocess.Popen(command, env=full_env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self._lines = queue.Queue()
        threading.Thread(target=self._read_stdout, daemon=True).start()
        line = self._expect_line(READY_TIMEOUT_S, "ready")
        m = re.fullmatch(r"ready (\d+)", line)
        check(m is not None, f"workload {name}: expected 'ready <pid>', got {line!r}")
        self.pid = int(m.group(1))
        check_equal(self.pid, self.proc.pid, f"workload {name}: pid in 'ready'")
        WORKLOAD_PIDS.add(self.pid)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.kill()
        return False

    def _read_stdout(self):
        """Queues each stdout line; None at EOF."""
        for raw in self.proc.stdout:
            self._lines.put(raw.decode("utf-8", "replace").rstrip("\n"))
        self._lines.put(None)

    def _expect_line(self, timeout, what):
        """The next stdout line; fails on timeout or EOF."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise Failure(f"workload {self.name}: no '{what}' within {timeout:.0f} s") from None
        check(line is not None, f"workload {self.name}: stdout closed before '{what}' "
                                f"(exit status {self.proc.poll()})")
        return line

    def _send_line(self, text):
        """Writes one line to the workload's stdin."""
        self.proc.stdin.write(text.encode() + b"\n")
        self.proc.stdin.flush()

    def go(self):
        """Lets the workload start its allocations."""
        self._send_line("go")

    def wait_done(self, timeout=120.0):
        """Waits for `done`."""
        line = self._expect_line(timeout, "done")
        check_equal(line, "done", f"workload {self.name}: line after go")

    def run(self, timeout=120.0):
        """go() then wait_done()."""
        self.go()
        self.wait_done(timeout)

    def finish(self, timeout=10.0):
        """Lets the workload exit (a line, then EOF) and checks it exits with 0."""
        try:
            self._send_line("")
            self.proc.stdin.close()
        except BrokenPipeError:
            pass
        try:
            status = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise Failure(f"workload {self.name} did not exit within {timeout:.0f} s") from None
        check_equal(status, 0, f"workload {self.name}: exit status")

    def kill(self):
        """Kills the workload (SIGKILL) and reaps it, if it still runs."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except (OSError, ValueError):
                pass

    def maps(self):
        """The text of /proc/PID/maps."""
        with open(f"/proc/{self.pid}/maps") as f:
            return f.read()


_ALIASES = []


def workload_alias(name, comm):
    """A path that runs workload `name` as command `comm` (at most 15
    characters): a symlink in a temporary directory removed at exit, since
    comm comes from the name exec'd. For rules that must match this test's
    processes only, while other tests run the same workloads."""
    if not _ALIASES:
        _ALIASES.append(tempfile.TemporaryDirectory(prefix="heapprofd-alias-"))
    path = os.path.join(_ALIASES[0].name, comm)
    if not os.path.lexists(path):
        os.symlink(os.path.abspath(os.path.join(WORKLOADS, name)), path)
    return path


def allocator_breakpoints(pid):
    """The file offsets in the libc text of process `pid` where its memory
    differs from the file: the int3s of uprobes, which the kernel writes at
    each probed instruction. [] once every probe is gone; fails if the
    process maps no libc."""
    found, diffs = False, []
    with open(f"/proc/{pid}/maps") as f:
        lines = f.read().splitlines()
    for line in lines:
        parts = line.split()
        if len(parts) < 6 or "x" not in parts[1] or "/libc.so" not in parts[5]:
            continue
        found = True
        lo, hi = (int(x, 16) for x in parts[0].split("-"))
        offset = int(parts[2], 16)
        with open(f"/proc/{pid}/mem", "rb") as m:
            m.seek(lo)
            mem = m.read(hi - lo)
        with open(parts[5], "rb") as fl:
            fl.seek(offset)
            disk = fl.read(hi - lo)
        diffs += [offset + i for i in range(min(len(mem), len(disk))) if mem[i] != disk[i]]
    check(found, f"pid {pid} maps no libc text:\n" + "\n".join(lines))
    return diffs
class SpawnedWorkload(Workload):
    """A workload started by spawn_with_pid as a process with a chosen pid
    (the Popen is spawn_with_pid, which waits for it): a pid reused at once.
    `name` is a workload's name or a program's path."""

    def __init__(self, pid, name, *args):
        spawner = os.path.join(WORKLOADS, "spawn_with_pid")
        path = os.path.join(WORKLOADS, name)
        self.name = name
        self.proc = subprocess.Popen([spawner, str(pid), path] + [str(a) for a in args],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self._lines = queue.Queue()
        threading.Thread(target=self._read_stdout, daemon=True).start()
        try:
            line = self._expect_line(READY_TIMEOUT_S, "ready")
        except Failure as e:
            self.proc.wait(5)
            raise Failure(f"{e}; spawn_with_pid exited with {self.proc.returncode}: "
                          f"{self.proc.stderr.read().decode('utf-8', 'replace')}") from None
        check_equal(line, f"ready {pid}", f"{name} spawned with pid {pid}")
        self.pid = pid
        WORKLOAD_PIDS.add(pid)

    def kill(self):
        """Kills the spawned process, then reaps spawn_with_pid."""
        if self.proc.poll() is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        super().kill()
        self.proc.stderr.close()


def cgroup2_mount():
    """(mount point, root within the hierarchy) of a cgroup v2 mount, /sys/fs/cgroup
    preferred; None if there is none."""
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            if right.split()[0] == "cgroup2":
                fields = left.split()
                found.append((fields[4], fields[3]))
    found.sort(key=lambda mp: (mp[0] != "/sys/fs/cgroup", len(mp[0])))
    return found[0] if found else None


@contextlib.contextmanager
def cgroup_for_test(tmp, name):
    """A fresh cgroup v2 directory `name` (unique to the test that asks):
    yields (its path on disk, its path as /proc/PID/cgroup shows it). Uses
    a mounted cgroup2 (/sys/fs/cgroup on unified hosts,
    /sys/fs/cgroup/unified on hybrid ones), or mounts one in tmp if none is."""
    mounted_here = None
    mount = cgroup2_mount()
    if mount is None:
        mounted_here = os.path.join(tmp, "cgroup2")
        os.mkdir(mounted_here)
        r = subprocess.run(["mount", "-t", "cgroup2", "none", mounted_here],
                           capture_output=True, text=True)
        check(r.returncode == 0, f"no cgroup2 mounted, and mounting one failed: {r.stderr}")
        mount = (mounted_here, "/")
    point, root = mount
    disk = os.path.join(point, name)
    os.mkdir(disk)
    try:
        yield disk, os.path.normpath(os.path.join(root, name))
    finally:
        # The kernel empties the cgroup once its processes are reaped.
        for _ in range(50):
            try:
                os.rmdir(disk)
                break
            except OSError:
                time.sleep(0.1)
        if mounted_here:
            subprocess.run(["umount", mounted_here], capture_output=True)


def wait_traced(pid, tid=None, timeout=10):
    """Waits until a tracer (gdb, strace) has attached to thread `tid` of
    `pid` (its main thread by default); fails at the deadline."""
    path = f"/proc/{pid}/task/{tid or pid}/status"
    deadline = time.monotonic() + timeout
    while True:
        with open(path) as f:
            if "TracerPid:\t0" not in f.read():
                return
        check(time.monotonic() < deadline, f"no tracer attached to {path} within {timeout} s")
        time.sleep(0.05)


def stale_account(name, pattern, script):
    """Whether user or group `name`, one that `pattern` matches with the pid
    of the test run that made it as group 1, is left over from a run that
    is over: its pid runs no `script` any more, or is this run's (a crashed
    run's pid reused: this run has made none yet when it asks)."""
    m = pattern.match(name)
    if not m:
        return False
    pid = int(m.group(1))
    if pid == os.getpid():
        return True
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return script.encode() not in f.read()
    except OSError:
        return True


def nonexistent_pid():
    """A pid with no process (the highest free one below pid_max)."""
    with open("/proc/sys/kernel/pid_max") as f:
        pid_max = int(f.read())
    for pid in range(pid_max - 1, 1, -1):
        if not os.path.exists(f"/proc/{pid}"):
            return pid
    raise Failure("no free pid found")
