"""Errors and metrics that say what happened, each checked where it used to
be lost or misstated: a 40-byte build ID shares its unwind table (it fell
back to the inode), the table build time in fractional seconds (it was
whole), the all-process view of a target that exits while it is made (it
was 404 "process 0 does not exist"), an allocator the daemon may not read (it was
"no loaded object defines malloc", retried every second), a pin directory
that cannot be opened (it was "in use by another heapprofd"), each probe
layout's failure (only the last was said, labelled "classic"), descriptors
past FD_SETSIZE (the server would not start, with a stale errno), more
executable mappings than the unwinder keeps tables for (silently cut), a
pinned process that could not be adopted (silently forgotten), and pinned
maps of other sizes (refused even when nothing would be misread).

Each test starts its own daemon; those that need other privileges start it
under setpriv (as nobody, or as root without the DAC capabilities).
"""

import contextlib
import os
import re
import select
import shutil
import subprocess
import tempfile
import threading
import time
import unittest

import heapprof_harness as h

# How long a rule match, an attach or a log line may take to show: the
# daemon scans every second; the rest is room for a loaded machine (these
# tests are about what is said, not how soon).
SCAN_TIMEOUT_S = 15.0
# How often the daemon scans /proc.
SCAN_S = 1.0
# How long a started daemon may take to log what a test waits for: as long
# as the harness waits for it to listen, since the line may come after the
# BPF load (a second here, over 10 s beside two qemu guests and the
# sanitized trees' builds).
START_TIMEOUT_S = h.LISTEN_TIMEOUT_S
# A short tag for this run's names (comm names keep 15 characters).
TAG = str(os.getpid() % 100000)


@contextlib.contextmanager
def heapprofd_as(wrapper):
    """Runs the Daemons started inside the block through `wrapper` (a list
    of arguments put before heapprofd's own, e.g. setpriv)."""
    tmp = tempfile.mkdtemp(prefix="heapprof-diagnostics-")
    script = os.path.join(tmp, "heapprofd")
    with open(script, "w") as f:
        f.write("#!/bin/sh\nexec " + " ".join(wrapper) + f" {h.HEAPPROFD} \"$@\"\n")
    os.chmod(script, 0o755)
    real, h.HEAPPROFD = h.HEAPPROFD, script
    try:
        yield
    finally:
        h.HEAPPROFD = real
        shutil.rmtree(tmp, ignore_errors=True)


def start_raw(cmd, want, **popen):
    """Starts cmd (a heapprofd command line) and reads its stderr until a
    line starts with `want`; returns (process, stderr so far). Fails if it
    exits first or takes longer than START_TIMEOUT_S."""
    p = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, **popen)
    text, deadline = "", time.monotonic() + START_TIMEOUT_S
    poller = select.poll()  # not select(): the pipe may be past FD_SETSIZE too
    poller.register(p.stderr, select.POLLIN)
    while not any(line.startswith(want) for line in text.splitlines()):
        left = deadline - time.monotonic()
        ready = poller.poll(left * 1000) if left > 0 else []
        chunk = os.read(p.stderr.fileno(), 65536) if ready else b""
        if not chunk:
            p.kill()
            p.wait()
            raise h.Failure(f"{' '.join(cmd)}: no line {want!r} (exit status {p.returncode}); "
                            f"stderr:\n{text}")
        text += chunk.decode("utf-8", "replace")
    return p, text


def stop_raw(p):
    """Stops a daemon started by start_raw."""
    p.terminate()
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


class DiagnosticsTest(unittest.TestCase):
    def test_a_40_byte_build_id_shares_one_unwind_table_and_build_time_is_fractional(self):
        """Two copies of one executable with a 40-byte build ID (two files, one
        build ID) share one unwind table: the second attach builds none. And
        the time spent building tables, a few milliseconds, shows as such."""
        tmp = tempfile.mkdtemp(prefix="heapprof-buildid-")
        try:
            copies = []
            for name in ("a", "b"):
                path = os.path.join(tmp, name)
                shutil.copy(os.path.join(h.WORKLOADS, "exact_long_build_id"), path)
                copies.append(path)
            with h.Daemon() as d, h.Workload(copies[0]) as a, h.Workload(copies[1]) as b:
                d.profile(f"/debug/pprof/heap?pid={a.pid}")  # attaches
                m = d.metrics()
                built = m.get("heapprofd_unwind_tables_built_total")
                files = m.get("heapprofd_unwind_files")
                seconds = m.get("heapprofd_unwind_table_build_seconds_total")
                h.check(seconds is not None and seconds > 0,
                        f"heapprofd_unwind_table_build_seconds_total after building "
                        f"{built} tables: {seconds} (whole seconds would read 0)")
                d.profile(f"/debug/pprof/heap?pid={b.pid}")
                m = d.metrics()
                h.check_equal((m.get("heapprofd_unwind_tables_built_total"),
                               m.get("heapprofd_unwind_files")), (built, files),
                              "(tables built, files with tables) after attaching the second copy, "
                              "whose files all have tables already")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_the_all_process_view_of_a_target_that_exits_meanwhile_is_an_empty_profile(self):
        """A delta profile of all processes (no pid=, seconds=2) whose only
        target is killed half a second in: the process is gone when the profile
        is built, and the answer is an empty profile, not 404 "process 0 does
        not exist"."""
        with h.Daemon() as d, h.Workload("exits", "60000") as w:
            d.profile(f"/debug/pprof/heap?pid={w.pid}")  # attaches
            w.go()
            killer = threading.Timer(0.5, w.kill)
            killer.start()
            try:
                r = d.request("/debug/pprof/heap?seconds=2")
            finally:
                killer.join()
            h.check(r.status == 200, f"all-process delta profile whose only target exited during "
                                     f"it: {r.status} {r.text()!r}")
            h.check_equal(h.decode(r.body).samples, [], "samples of the view")

    def test_an_allocator_the_daemon_may_not_read_is_named_and_not_retried(self):
        """A statically linked program (its allocator is in its executable) run
        from a file nobody may read (mode 0111), and the daemon as root without
        CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH: a rule match fails once with
        "Permission denied" naming the file, is logged once and not tried again
        at every scan; a request gets 403 with the same reason."""
        tmp = tempfile.mkdtemp(prefix="heapprof-eacces-")
        comm = f"exst{TAG}"
        try:
            os.chmod(tmp, 0o755)
            exe = os.path.join(tmp, comm)
            shutil.copy(os.path.join(h.WORKLOADS, "exact_static"), exe)
            os.chmod(exe, 0o111)
            with heapprofd_as(["setpriv", "--bounding-set=-dac_override,-dac_read_search"]), \
                    h.Daemon("--comm", comm) as d, h.Workload(exe) as w:
                logged = f"heapprofd: pid {w.pid} matches a target rule but:"
                d.wait_until(lambda: logged in d.stderr(), SCAN_TIMEOUT_S,
                             f"the log line {logged!r}")
                line = [x for x in d.stderr().splitlines() if x.startswith(logged)][0]
                h.check(exe in line and "Permission denied" in line,
                        f"the log line should name {exe} and 'Permission denied': {line!r}")
                errors = d.metric("heapprofd_attach_errors_total")
                # Two more scans, which must not try it again. Nothing marks a
                # scan that leaves a remembered failure alone: watch 2.5 periods.
                h.check_throughout(lambda: d.metric("heapprofd_attach_errors_total") == errors,
                                   2.5 * SCAN_S, f"heapprofd_attach_errors_total stays {errors}")
                h.check_equal(d.stderr().count(logged), 1, "log lines about the process")
                r = d.request(f"/debug/pprof/heap?pid={w.pid}")
                h.check(r.status == 403 and exe in r.text() and "Permission denied" in r.text(),
                        f"a request for pid {w.pid}: expected 403 naming {exe} and "
                        f"'Permission denied', got {r.status} {r.text()!r}")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_a_pin_directory_that_cannot_be_opened_is_not_called_in_use(self):
        """--pin-dir /dev/null: open() fails with ENOTDIR, which is what the
        daemon says, naming the directory; it does not start."""
        h.check_refuses(["--pin-dir", "/dev/null"], "the error is the open() of /dev/null",
                        names=["open pin directory /dev/null: Not a directory"],
                        not_names=["in use"])

    def test_each_probe_layout_tried_says_why_it_failed(self):
        """As nobody, the BPF programs load under no layout: the reason (logged,
        and served with 503) names each layout tried with its error."""
        cmd = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", h.HEAPPROFD,
               "--listen", f"127.0.0.1:{h.free_port()}", "--pin-dir", "none"]
        p, text = start_raw(cmd, "heapprofd: listening on")
        try:
            line = [x for x in text.splitlines() if x.startswith("heapprofd: BPF unavailable:")]
            h.check(line, f"no 'BPF unavailable' line; stderr:\n{text}")
            for layout in ("session", "multi", "classic"):
                h.check(re.search(rf"\b{layout}: load: \S", line[0]),
                        f"the reason should say why the {layout} layout failed: {line[0]!r}")
            r = h.request(f"http://{cmd[cmd.index('--listen') + 1]}/debug/pprof/heap?pid=1")
            h.check(r.status == 503 and "session: load:" in r.text(),
                    f"a profile request: expected 503 with the reason, got {r.status} {r.text()!r}")
        finally:
            stop_raw(p)

    def test_the_server_starts_with_descriptors_past_fd_setsize_and_names_a_failed_bind(self):
        """Started with 1100 descriptors open (a parent that leaks them), the
        daemon's sockets number past FD_SETSIZE (1024): it serves all the same.
        And a --listen address of no interface here fails at bind(), said so."""
        fds = [os.open("/dev/null", os.O_RDONLY) for _ in range(1100)]
        try:
            address = f"127.0.0.1:{h.free_port()}"
            p, text = start_raw([h.HEAPPROFD, "--listen", address, "--pin-dir", "none"],
                                "heapprofd: listening on", pass_fds=fds)
            try:
                for path in ("/healthz", "/debug/pprof/", "/metrics"):
                    r = h.request(f"http://{address}{path}")
                    h.check_equal(r.status, 200, f"GET {path} with 1100 inherited descriptors")
            finally:
                stop_raw(p)
        finally:
            for fd in fds:
                os.close(fd)
        with tempfile.TemporaryDirectory() as tmp:
            token = os.path.join(tmp, "token")  # allow-remote needs one (docs/security.md)
            with os.fdopen(os.open(token, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
                f.write("a-token-of-the-bind-test-0123456789\n")
            h.check_refuses(["--listen", f"192.0.2.1:{h.free_port()}", "--allow-remote",
                             "--token-file", token],
                            "an address of no interface here", ["bind: Cannot assign requested address"])

    def test_more_executable_mappings_than_tables_is_logged_and_counted(self):
        """A process with 300 executable mappings more: the first 256 get
        tables, and the daemon says that the rest do not, in the log and in
        heapprofd_unwind_update_errors_total."""
        with h.Daemon() as d, h.Workload("many_maps", 300) as w:
            d.profile(f"/debug/pprof/heap?pid={w.pid}")  # attaches
            want = f"heapprofd: pid {w.pid}: unwind tables: "
            lines = [x for x in d.stderr().splitlines() if x.startswith(want)]
            h.check(lines and "tables for the first 256 only" in lines[0],
                    f"no line {want!r} saying only 256 mappings got tables; stderr:\n{d.stderr()}")
            errors = d.metrics().get("heapprofd_unwind_update_errors_total")
            h.check(errors is not None and errors >= 1,
                    f"heapprofd_unwind_update_errors_total: {errors}, expected at least 1")

    def test_a_pinned_process_that_cannot_be_adopted_is_named(self):
        """Daemon A profiles two processes with pinned maps; daemon B on them
        may profile only one (--max-targets 1): it adopts one and names the
        other, with the reason, instead of forgetting it silently."""
        pin = f"/sys/fs/bpf/heapprofd-test-diagnostics-{TAG}-{int(time.time() * 1000) % 100000}"
        try:
            with h.Workload("exits", "60000") as w1, h.Workload("exits", "60000") as w2:
                with h.Daemon("--pin-dir", pin) as a:
                    for w in (w1, w2):
                        a.profile(f"/debug/pprof/heap?pid={w.pid}")  # attaches
                with h.Daemon("--pin-dir", pin, "--max-targets", "1") as b:
                    log = b.stderr()
                    h.check("heapprofd: adopted 1 processes from the pinned maps" in log,
                            f"daemon B should adopt one process; stderr:\n{log}")
                    lines = [x for x in log.splitlines() if "could not adopt" in x]
                    h.check(lines and re.search(rf"pid ({w1.pid}|{w2.pid}): already profiling 1 "
                                                r"processes, the most allowed \(--max-targets\)",
                                                lines[0]),
                            f"daemon B should name the process it could not adopt and why; "
                            f"stderr:\n{log}")
        finally:
            shutil.rmtree(pin, ignore_errors=True)

    def test_pinned_maps_of_other_sizes_are_refused_only_while_they_hold_a_running_process(self):
        """Maps pinned with --max-stacks 4096: a daemon with --max-stacks 8192
        refuses them while the process they hold runs, naming it; once it has
        exited, the daemon removes them and starts afresh, saying so once."""
        pin = f"/sys/fs/bpf/heapprofd-test-diagnostics-{TAG}-{int(time.time() * 1000) % 100000}"
        try:
            with h.Workload("exits", "60000") as w:
                with h.Daemon("--pin-dir", pin, "--max-stacks", "4096") as a:
                    a.profile(f"/debug/pprof/heap?pid={w.pid}")  # attaches
                h.check_refuses(["--pin-dir", pin, "--max-stacks", "8192"],
                                f"other map sizes while pid {w.pid} runs",
                                ["--max-stacks", f"pid {w.pid}"])
            with h.Daemon("--pin-dir", pin, "--max-stacks", "8192") as b:
                said = [x for x in b.stderr().splitlines() if "starting afresh" in x]
                h.check(len(said) == 1 and "--max-stacks" in said[0],
                        f"daemon B should say once that it starts afresh; stderr:\n{b.stderr()}")
        finally:
            shutil.rmtree(pin, ignore_errors=True)


if __name__ == "__main__":
    h.main()
