"""Debug files fetched by build ID from debuginfod (DEBUGINFOD_URLS).

A program built here (tests/workloads/debuginfod_target.c, with a build ID
of its own each run) is split into a stripped executable and its debug file,
which only a local Debian `debuginfod` serves (on a free port of 127.0.0.1;
debuginfod 0.188 binds every address, and serves nothing but this file).

- With DEBUGINFOD_URLS pointing at it in the daemon's environment: the
  first profile that names the program's frames is served without waiting
  for the fetch (addresses only: the file was asked for while it was being
  made); a later one names every frame of the program with the functions,
  files and lines addr2line reads from the unstripped build; the fetch is
  counted ok in /metrics and the file is in the cache directory given.
- With debuginfod-urls naming a server that accepts connections and never
  answers: a profile is served while the fetch is still in flight (the
  pending gauge says 1 after the answer), with the program's frames
  unnamed. Latency is measured elsewhere (see the session's report): this
  asserts that the scrape returns, not how fast.

- With debug files that dwz shrank, as Debian's -dbgsym packages are: the
  supplementary file they name by a path nobody has is fetched by its
  build ID too, and the frames get addr2line's names and lines.

Cost: 10 to 18 s of wall time on the shared 2-core machine (gcc builds,
three debuginfod starts and scans, three daemons), mostly waiting.
"""

import os
import re
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import unittest

import heapprof_harness as h
from elf_layout import vaddr_of

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOAD_SRC = os.path.join(HERE, "..", "workloads")
SOURCE = os.path.join(WORKLOAD_SRC, "debuginfod_target.c")

# The program's own functions, which only its debug file names.
OWN_FUNCTIONS = {"fetched_leaf", "fetched_middle", "main"}

# How long debuginfod may take to start and index the directory: about 1 s
# here; a deadline for a loaded machine, not a bound.
SERVER_READY_TIMEOUT_S = 30.0
# How long the daemon may take to fetch the file from a local server after
# the first ask: milliseconds here; a deadline, not a bound.
FETCH_TIMEOUT_S = 30.0


def build_target(directory, served=None, name="debuginfod_target"):
    """Builds the program into `directory` as `name` with a fresh build ID,
    its debug file into `served` (default directory/served); returns
    (stripped path, unstripped path, debug file path, build ID hex)."""
    build_id = secrets.token_hex(20)
    full = os.path.join(directory, name + ".full")
    stripped = os.path.join(directory, name)
    served = served or os.path.join(directory, "served")
    os.makedirs(served, exist_ok=True)
    debug = os.path.join(served, name + ".debug")
    subprocess.run(["gcc", "-O1", "-g", "-fno-omit-frame-pointer", "-fno-inline",
                    "-fno-optimize-sibling-calls", "-fno-builtin", f"-Wl,--build-id=0x{build_id}",
                    "-I", WORKLOAD_SRC, "-o", full, SOURCE,
                    os.path.join(WORKLOAD_SRC, "handshake.c")], check=True)
    subprocess.run(["objcopy", "--only-keep-debug", full, debug], check=True)
    subprocess.run(["strip", "--strip-all", "-o", stripped, full], check=True)
    syms = subprocess.run(["nm", stripped], capture_output=True, text=True).stderr
    h.check("no symbols" in syms, f"{stripped} still has symbols: {syms!r}")
    return stripped, full, debug, build_id


def addr2line(path, vaddr):
    """(function, file, line) at vaddr, from addr2line (no inlining: -fno-inline)."""
    out = subprocess.run(["addr2line", "-f", "-e", path, f"{vaddr:#x}"], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    where = re.sub(r" \(discriminator \d+\)$", "", out[1])
    file, _, line = where.rpartition(":")
    return out[0], "" if file == "??" else file, int(line) if line.isdigit() else 0


def own_locations(profile, stripped):
    """The locations in the stripped program's mapping: [(address, lines, offset)]."""
    mid, m = profile.mapping_of(stripped)
    return [(a, lines, a - m.start + m.offset) for a, mp, lines in profile.locations.values()
            if mp == mid]


def run_workload(d, stripped):
    """Starts the stripped program, attaches (a profile with no samples yet),
    and lets it allocate; returns the running Workload."""
    w = h.Workload("debuginfod_target", command=[stripped])
    d.profile(f"/debug/pprof/heap?pid={w.pid}")
    w.run()
    return w


def fetch_counts(d):
    """{result: count} of heapprofd_debuginfod_fetches_total."""
    m = d.metrics().labelled
    return {r: m[("heapprofd_debuginfod_fetches_total", (("result", r),))]
            for r in ("ok", "notfound", "error")}


def start_server(cls, served, build_ids):
    """Starts Debian's debuginfod over directory `served` on a free port, for
    the test class `cls` (stopped at its cleanup), and waits until it serves
    each of `build_ids`; returns its URL."""
    port = h.free_port()
    server = subprocess.Popen(
        ["debuginfod", "-F", "-p", str(port), "-d", os.path.join(served, "..", "db.sqlite"),
         "-t", "0", "-g", "0", "-c", "1", served],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    cls.addClassCleanup(lambda: (server.terminate(), server.wait()))
    url = f"http://127.0.0.1:{port}"

    # Asked directly (not through libdebuginfod, whose cache would remember
    # a miss for 10 minutes) until the scan has indexed them.
    def serving():
        try:
            return all(h.get(f"{url}/buildid/{b}/debuginfo", timeout=5)[0] == 200
                       for b in build_ids)
        except OSError:  # not listening yet
            return False
    h.wait_until(serving, SERVER_READY_TIMEOUT_S, f"debuginfod to serve {build_ids}")
    return url


def start_daemon_with_urls(cls, url, cache):
    """A daemon for `cls` with DEBUGINFOD_URLS=url in its environment."""
    saved = os.environ.get("DEBUGINFOD_URLS")
    os.environ["DEBUGINFOD_URLS"] = url
    try:
        return cls.enterClassContext(
            h.Daemon("--sample-interval", "1", "--debuginfod-cache", cache))
    finally:
        if saved is None:
            del os.environ["DEBUGINFOD_URLS"]
        else:
            os.environ["DEBUGINFOD_URLS"] = saved


def mismatches(profile, stripped, full):
    """What in the profile's locations of `stripped` differs from addr2line
    on the unstripped build `full`: a list of texts, empty when all agree."""
    wrong = []
    for address, lines, offset in own_locations(profile, stripped):
        want = addr2line(full, vaddr_of(full, offset))
        got = [(ln.name, ln.file, ln.line) for ln in lines]
        if got != [want]:
            wrong.append(f"location {address:#x} (offset {offset:#x}): ours {got}, "
                         f"addr2line {want}")
    return wrong


class LocalServerTest(unittest.TestCase):
    """A local debuginfod serving the program's debug file."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="heapprof-debuginfod-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)
        cls.stripped, cls.full, debug, cls.build_id = build_target(cls.tmp)
        url = start_server(cls, os.path.dirname(debug), [cls.build_id])
        cls.cache = os.path.join(cls.tmp, "cache")
        cls.d = start_daemon_with_urls(cls, url, cls.cache)
        with h.Workload("debuginfod_target", command=[cls.stripped]) as w:
            cls.d.profile(f"/debug/pprof/heap?pid={w.pid}")
            w.run()
            path = f"/debug/pprof/heap?pid={w.pid}"
            cls.before = h.decode(cls.d.profile(path))
            cls.after = None

            def named():
                cls.after = h.decode(cls.d.profile(path))
                return any(ln.name in OWN_FUNCTIONS
                           for _, lines, _ in own_locations(cls.after, cls.stripped)
                           for ln in lines)
            cls.d.wait_until(named, FETCH_TIMEOUT_S, "the program's frames to be named")
            w.finish()

    def test_the_first_profile_was_served_before_the_file_arrived(self):
        locs = own_locations(self.before, self.stripped)
        h.check(locs, f"no locations in the program's mapping:\n{self.before.raw}")
        for address, lines, _ in locs:
            h.check(not lines, f"location {address:#x} named before the fetch: {lines}")

    def test_later_profiles_name_every_frame_with_addr2line_lines(self):
        locs = own_locations(self.after, self.stripped)
        seen = set()
        for address, lines, offset in locs:
            want = addr2line(self.full, vaddr_of(self.full, offset))
            where = f"location {address:#x} (offset {offset:#x}): ours {lines}, addr2line {want}"
            h.check_equal(len(lines), 1, where + ": number of lines")
            h.check_equal((lines[0].name, lines[0].file, lines[0].line), want, where)
            seen.add(lines[0].name)
        h.check(OWN_FUNCTIONS - {"main"} <= seen, f"functions named: {seen}")
        leaf = [s for s in self.after.samples if s.leaf() == "fetched_leaf"]
        h.check(leaf and leaf[0].frames[:3] == ["fetched_leaf", "fetched_middle", "main"],
                f"the allocating stack: {leaf}")

    def test_the_fetch_is_counted_and_cached_where_asked(self):
        # The libraries without local debug files (libc, the dynamic
        # linker) are asked for too: this server has none of them.
        self.d.wait_until(lambda: self.d.metric("heapprofd_debuginfod_pending") == 0,
                          FETCH_TIMEOUT_S, "no fetch pending")
        counts = fetch_counts(self.d)
        h.check(counts["ok"] == 1 and counts["error"] == 0, f"fetches: {counts}")
        h.check(self.d.metric("heapprofd_symbol_cache_reopened_total") >= 1, "reopened files")
        cached = os.path.join(self.cache, self.build_id, "debuginfo")
        h.check(os.path.isfile(cached), f"{cached} missing; cache holds {os.listdir(self.cache)}")


class DwzTest(unittest.TestCase):
    """Debug files made smaller by dwz, as Debian's -dbgsym packages are:
    two builds of the program whose shared DWARF dwz moved into a
    supplementary file named by a path nobody has, which debuginfod serves
    by its build ID too."""

    @classmethod
    def setUpClass(cls):
        h.check(shutil.which("dwz"), "dwz is not installed (scripts/install-deps.sh)")
        cls.tmp = tempfile.mkdtemp(prefix="heapprof-debuginfod-dwz-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)
        served = os.path.join(cls.tmp, "served")
        cls.stripped, cls.full, debug, build_id = build_target(cls.tmp, served, "dwz_a")
        _, _, other, _ = build_target(cls.tmp, served, "dwz_b")
        common = os.path.join(served, "common.debug")
        subprocess.run(["dwz", "-m", common, "-M",
                        f"/nonexistent/heapprof-dwz-{secrets.token_hex(8)}.debug", debug, other],
                       check=True)
        out = subprocess.run(["readelf", "-S", debug], capture_output=True, text=True).stdout
        h.check(".gnu_debugaltlink" in out, f"dwz left {debug} without .gnu_debugaltlink")
        common_id = re.search(r"Build ID: ([0-9a-f]+)", subprocess.run(
            ["readelf", "-n", common], capture_output=True, text=True).stdout).group(1)
        url = start_server(cls, served, [build_id, common_id])
        cls.d = start_daemon_with_urls(cls, url, os.path.join(cls.tmp, "cache"))

    def test_the_supplementary_file_is_fetched_too(self):
        with h.Workload("dwz_a", command=[self.stripped]) as w:
            path = f"/debug/pprof/heap?pid={w.pid}"
            self.d.profile(path)
            w.run()
            last = []

            def agree():
                last[:] = mismatches(h.decode(self.d.profile(path)), self.stripped, self.full)
                return not last
            self.d.wait_until(agree, FETCH_TIMEOUT_S,
                              lambda: "names and lines as addr2line's: " + "; ".join(last))
            w.finish()
        counts = fetch_counts(self.d)
        h.check(counts["ok"] == 2 and counts["error"] == 0,
                f"fetches (the debug file and its dwz file): {counts}")


class BlackHole:
    """A TCP server on 127.0.0.1 that accepts connections and never answers."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.accepted = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted.append(conn)

    def close(self):
        self.sock.close()
        for c in self.accepted:
            c.close()


class DeadServerTest(unittest.TestCase):
    """debuginfod-urls naming a server that never answers."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="heapprof-debuginfod-dead-")
        cls.addClassCleanup(shutil.rmtree, cls.tmp, ignore_errors=True)
        cls.stripped, _, _, _ = build_target(cls.tmp)
        hole = BlackHole()
        cls.addClassCleanup(hole.close)
        # The fetch outlives the test: it is in flight when the scrape answers.
        cls.d = cls.enterClassContext(h.Daemon(
            "--sample-interval", "1", "--debuginfod-urls", f"http://127.0.0.1:{hole.port}",
            "--debuginfod-cache", os.path.join(cls.tmp, "cache"), "--debuginfod-timeout", "10m"))
        cls.hole = hole

    def test_a_scrape_returns_while_the_fetch_is_in_flight(self):
        with h.Workload("debuginfod_target", command=[self.stripped]) as w:
            self.d.profile(f"/debug/pprof/heap?pid={w.pid}")
            w.run()
            started = time.monotonic()
            p = h.decode(self.d.profile(f"/debug/pprof/heap?pid={w.pid}"))
            took = time.monotonic() - started
            # The program and the libraries without local debug files are
            # all waiting: one in flight, the others queued behind it.
            pending = self.d.metric("heapprofd_debuginfod_pending")
            h.check(pending >= 1, f"{pending} fetches pending after a scrape of {took:.3f} s")
            for address, lines, _ in own_locations(p, self.stripped):
                h.check(not lines, f"location {address:#x} named with no server: {lines}")
            # A second scrape neither waits for the fetch nor asks again.
            self.d.profile(f"/debug/pprof/heap?pid={w.pid}")
            h.check_equal(self.d.metric("heapprofd_debuginfod_pending"), pending,
                          "pending after a second scrape")
            h.check_equal(fetch_counts(self.d), {"ok": 0, "notfound": 0, "error": 0}, "fetches")
            h.check(self.hole.accepted, "the daemon never connected to the dead server")
            w.finish()


if __name__ == "__main__":
    h.main()
