"""heapprofd as a service, with real processes: processes matched by the
target rules (comm, exe, cgroup) are picked up within 3 s of their start,
one over --max-targets once a slot frees, one matched before its libraries
were loaded once they are; a process that exits is detached within 3 s and
its pid answers its last profile; a reused pid never shows its predecessor's allocations; exec
attaches afresh (to another program, or to the same one: that relies on
ASLR placing libc elsewhere); SIGHUP rereads the config; a restart keeps
the in-use totals exact (pinned maps), a daemon with another sample
interval refuses them while a process they hold runs and starts afresh
once none does, and one on maps of another state version refuses them;
/metrics is valid Prometheus text whose counters follow what happened.

One daemon (--sample-interval 1, a config file with one rule of each kind)
serves most tests; the restart test runs its own two. The rules name things
made for this run only (a symlink to a workload, a copy of one, a cgroup),
so other processes on the machine never match them.
"""

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

import heapprof_harness as h

# The bounds: a matching process is attached, and an exited one
# detached, within this long (the daemon scans every second).
ATTACH_TIMEOUT_S = 3.0
DETACH_TIMEOUT_S = 3.0
# How often the daemon scans /proc for new, exited and exec'd processes.
SCAN_S = 1.0

EXACT_EXPECTED = h.EXACT_EXPECTED
# Allocations exact.c makes (every one a sample at interval 1), the bytes
# they allocate and the bytes it keeps.
EXACT_ALLOCATIONS = sum(v[0] for v in EXACT_EXPECTED.values())
EXACT_ALLOC_BYTES = sum(v[1] for v in EXACT_EXPECTED.values())
EXACT_INUSE_BYTES = sum(v[3] for v in EXACT_EXPECTED.values())

# rounds.c after each of its three rounds (keep in step with rounds.c).
ROUNDS_EXPECTED = [
    {"round1_alloc": [300, 300000, 300, 300000]},
    {"round1_alloc": [300, 300000, 200, 200000],
     "round2_alloc": [40, 200000, 40, 200000]},
    {"round1_alloc": [300, 300000, 0, 0],
     "round2_alloc": [40, 200000, 0, 0],
     "round3_alloc": [10, 10000, 10, 10000]},
]

# The magic number of the pinned meta map (bpf/heapprof.h HP_STATE_MAGIC).
STATE_MAGIC = 0x68656170

# execs.c (keep in step).
BEFORE_EXEC = {"before_exec_alloc": [100, 70000, 100, 70000]}
AFTER_EXEC = {"after_exec_alloc": [50, 45000, 50, 45000]}

# A short tag for this run's names (comm names keep 15 characters).
TAG = str(os.getpid() % 100000)

# The shared daemon and what its rules match; set by service_daemon().
STATE = {}


# --- Helpers -------------------------------------------------------------------

def wait_attached(d, pid, what):
    """Waits (at most ATTACH_TIMEOUT_S) until the index lists pid; returns the time taken."""
    return d.wait_until(lambda: pid in d.profiled_pids(), ATTACH_TIMEOUT_S,
                        f"{what}: pid {pid} attached")


def wait_detached(d, pid, what):
    """Waits (at most DETACH_TIMEOUT_S) until pid is detached (Daemon.wait_detached)."""
    return d.wait_detached(pid, what, DETACH_TIMEOUT_S)


def totals(d, pid):
    """Totals per leaf function in the heap profile of pid."""
    return h.totals_by_leaf(h.decode(d.profile(f"/debug/pprof/heap?pid={pid}")).samples)


def check_totals(got, expected, what):
    """Fails unless got has exactly the expected leaves and totals (leaves
    with all four values zero are allowed besides)."""
    wrong = [f"{fn}: expected {want}, got {got.get(fn)}"
             for fn, want in expected.items() if got.get(fn) != want]
    extra = [f"{fn}: {v}" for fn, v in got.items() if fn not in expected and any(v)]
    h.check(not wrong and not extra,
            f"{what}: wrong totals: {wrong}; unexpected leaves: {extra}; all: {got}")


def check_exact_profile(d, pid, what):
    """Fails unless the heap profile of pid is exactly one run of exact.c."""
    check_totals(totals(d, pid), EXACT_EXPECTED, what)


def write_file(path, text, mode="w"):
    """Writes (or appends) text to path."""
    with open(path, mode) as f:
        f.write(text)


# --- Fixtures -------------------------------------------------------------------

@contextlib.contextmanager
def service_daemon():
    """The shared daemon: --sample-interval 1 and a config file with a comm,
    an exe and a cgroup rule for this run's workloads."""
    tmp = tempfile.mkdtemp(prefix="heapprofd-service-")
    try:
        with h.cgroup_for_test(tmp, f"heapprofd-test-{TAG}") as (cgroup_disk, cgroup_rule):
            bin_dir = os.path.join(tmp, "bin")
            os.mkdir(bin_dir)
            exact = os.path.join(h.WORKLOADS, "exact")
            # comm comes from the name exec'd: a symlink gives exact a name of its own.
            comm = f"hpc{TAG}"
            os.symlink(exact, os.path.join(bin_dir, comm))
            # A name that no rule matches until the SIGHUP test adds one.
            hup_comm = f"hph{TAG}"
            os.symlink(exact, os.path.join(bin_dir, hup_comm))
            # /proc/PID/exe names the file itself: a copy is an executable of its own.
            exe = os.path.join(tmp, "exe", "hpsvc-exact")
            os.mkdir(os.path.dirname(exe))
            shutil.copy2(exact, exe)
            exe = os.path.realpath(exe)
            config = os.path.join(tmp, "heapprofd.conf")
            write_file(config, f"# test_service.py\ncomm = {comm}\nexe = {exe}\n"
                               f"cgroup = {cgroup_rule}\n")
            with h.Daemon("--sample-interval", "1", "--config", config) as d:
                STATE.update(daemon=d, tmp=tmp, bin_dir=bin_dir, comm=comm, hup_comm=hup_comm,
                             exe=exe, config=config, cgroup_disk=cgroup_disk,
                             cgroup_rule=cgroup_rule)
                yield
                d.check_alive("after all tests")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def daemon():
    """The shared daemon."""
    return STATE["daemon"]


def comm_workload():
    """exact.c under the name the comm rule matches."""
    return h.Workload(os.path.join(STATE["bin_dir"], STATE["comm"]))


def expect_ready_again(w):
    """After an exec: waits for the new program's `ready <pid>` (the same pid)."""
    line = w._expect_line(h.READY_TIMEOUT_S, "ready after exec")
    h.check_equal(line, f"ready {w.pid}", f"workload {w.name}: line after exec")


# --- Target rules -------------------------------------------------------------------

def check_picked_up_by_rule(w, rule):
    """Workload w, which `rule` matches, is attached within ATTACH_TIMEOUT_S,
    profiled exactly through a run of exact.c, and detached after its exit."""
    d = daemon()
    took = wait_attached(d, w.pid, rule)
    w.run()
    check_exact_profile(d, w.pid, f"pid {w.pid} matched by {rule} (attached after {took:.2f} s)")
    w.finish()
    wait_detached(d, w.pid, "after exit")


# --- Lifecycle -------------------------------------------------------------------


def exec_test(args, after_exec_expected):
    """execs.c with args: its allocations before the exec show; after the
    exec (attached afresh by the reaper) only the new image's show."""
    d = daemon()
    with h.Workload("execs", *args) as w:
        d.profile(f"/debug/pprof/heap?pid={w.pid}")  # attaches
        w.run()
        check_totals(totals(d, w.pid), BEFORE_EXEC, "before the exec")
        attached = d.metric("heapprofd_attached_total")
        reattached = d.metric("heapprofd_reattached_total")
        w._send_line("")  # exec
        expect_ready_again(w)
        took = d.wait_until(lambda: d.metric("heapprofd_reattached_total") >= reattached + 1,
                            ATTACH_TIMEOUT_S, f"pid {w.pid} attached again after its exec")
        h.check(d.metric("heapprofd_attached_total") >= attached + 1,
                "heapprofd_attached_total counts the attach after the exec too")
        w.run()
        check_totals(totals(d, w.pid), after_exec_expected,
                     f"after the exec (attached again after {took:.2f} s)")
        w.finish()
        wait_detached(d, w.pid, "after exit")


# --- Reload -------------------------------------------------------------------------


# --- /metrics ----------------------------------------------------------------------


# --- Restart --------------------------------------------------------------------


def setUpModule():
    unittest.enterModuleContext(service_daemon())



class ServiceTest(unittest.TestCase):
    def test_a_process_started_after_the_daemon_is_attached_by_comm_within_3_s(self):
        with comm_workload() as w:
            check_picked_up_by_rule(w, f"comm {STATE['comm']}")

    def test_a_process_started_after_the_daemon_is_attached_by_exe_within_3_s(self):
        with h.Workload(STATE["exe"]) as w:
            check_picked_up_by_rule(w, f"exe {STATE['exe']}")

    def test_a_process_moved_into_a_cgroup_is_attached_by_cgroup_within_3_s(self):
        with h.Workload("exact") as w:
            write_file(os.path.join(STATE["cgroup_disk"], "cgroup.procs"), f"{w.pid}\n")
            with open(f"/proc/{w.pid}/cgroup") as f:
                unified = [line.strip()[3:] for line in f if line.startswith("0::")]
            h.check_equal(unified, [STATE["cgroup_rule"]],
                          f"the cgroup v2 path of pid {w.pid} once moved (the rule)")
            check_picked_up_by_rule(w, f"cgroup {STATE['cgroup_rule']}")

    def test_a_process_over_max_targets_is_attached_once_a_slot_frees(self):
        name = f"hpm{TAG}"
        path = os.path.join(STATE["bin_dir"], name)
        os.symlink(os.path.join(h.WORKLOADS, "exact"), path)
        with h.Daemon("--sample-interval", "1", "--comm", name, "--max-targets", "1") as d:
            with h.Workload(path) as first, h.Workload(path) as second:
                wait_attached(d, first.pid, "the first process (max-targets 1)")
                # Nothing counts a process turned away at the cap, so no event
                # says a scan has looked at `second`: watch for 1.5 scan periods.
                h.check_throughout(lambda: d.profiled_pids() == {first.pid}, 1.5 * SCAN_S,
                                   f"only pid {first.pid} profiled with max-targets 1")
                h.check_equal(d.metric("heapprofd_targets"), 1, "heapprofd_targets at the cap")
                first.finish()
                took = d.wait_until(lambda: second.pid in d.profiled_pids(),
                                    DETACH_TIMEOUT_S + ATTACH_TIMEOUT_S,
                                    f"pid {second.pid}, over the cap, attached once pid "
                                    f"{first.pid} exited")
                second.run()
                check_exact_profile(d, second.pid, f"attached {took:.2f} s after a slot freed")
                second.finish()

    def test_a_process_matched_before_its_libraries_are_loaded_is_attached_once_they_are(self):
        """A process held between its execve and the loading of its libraries
        (here by ptrace; a large program spends milliseconds to seconds there)
        has no malloc to probe yet when a scan matches it; it must be attached
        once it has, not written off."""
        import ctypes
        d = daemon()
        libc = ctypes.CDLL(None, use_errno=True)
        libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
        ptrace_traceme, ptrace_detach = 0, 17
        path = os.path.join(STATE["bin_dir"], STATE["comm"])
        proc = subprocess.Popen([path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                preexec_fn=lambda: libc.ptrace(ptrace_traceme, 0, None, None))
        try:
            # Stopped by SIGTRAP right after the execve: only the program and the
            # dynamic linker are mapped, comm is already the rule's.
            _, status = os.waitpid(proc.pid, os.WUNTRACED)
            h.check(os.WIFSTOPPED(status), f"pid {proc.pid} did not stop at its exec ({status})")
            # Two scans match it while it has no libc: each attach fails and is counted.
            errors = d.metric("heapprofd_attach_errors_total")
            d.wait_until(lambda: d.metric("heapprofd_attach_errors_total") >= errors + 2,
                         3 * SCAN_S, f"two failed attaches of pid {proc.pid}, held before its "
                                     f"libraries load (heapprofd_attach_errors_total was {errors})")
            h.check(libc.ptrace(ptrace_detach, proc.pid, None, None) == 0,
                    f"PTRACE_DETACH failed: errno {ctypes.get_errno()}")
            line = proc.stdout.readline().decode().strip()
            h.check_equal(line, f"ready {proc.pid}", "the workload once let go")
            took = wait_attached(d, proc.pid, "a process matched before libc was loaded, once it is")
            proc.stdin.write(b"go\n")
            proc.stdin.flush()
            h.check_equal(proc.stdout.readline().decode().strip(), "done", "after go")
            check_exact_profile(d, proc.pid, f"attached {took:.2f} s after its libraries loaded")
        finally:
            proc.kill()
            proc.wait()
            for f in (proc.stdin, proc.stdout):
                f.close()
        wait_detached(d, proc.pid, "after exit")

    def test_a_profiled_process_that_exits_is_detached_within_3_s_and_keeps_its_last_profile(self):
        """Detached within 3 s of its exit (probes and BPF state gone, counted);
        a request for its pid then gets its last profile (kept by the daemon for
        a while, named by the maps read at attach or at the last scan), and does
        not attach anything."""
        d = daemon()
        before = d.metrics()
        with comm_workload() as w:
            wait_attached(d, w.pid, "before exit")
            w.run()
            check_exact_profile(d, w.pid, "before exit")
            w.finish()
            took = d.wait_until(lambda: d.metric("heapprofd_detached_total")
                                >= before["heapprofd_detached_total"] + 1,
                                DETACH_TIMEOUT_S, f"heapprofd_detached_total past "
                                                  f"{before['heapprofd_detached_total']} after pid "
                                                  f"{w.pid} exited")
            h.check(w.pid not in d.profiled_pids(),
                    f"pid {w.pid} is still in the index after its detach was counted")
            body = d.profile(f"/debug/pprof/heap?pid={w.pid}")
            raw = h.pprof(body, "-raw")
            h.check("exited" in raw, f"the profile of exited pid {w.pid} (detached after "
                                     f"{took:.2f} s) does not say it exited:\n{raw[:1500]}")
            check_totals(h.totals_by_leaf(h.parse_raw(raw).samples), EXACT_EXPECTED,
                         f"the last profile of exited pid {w.pid}")
            after = d.metrics()
            h.check_equal(after["heapprofd_targets"], 0, "heapprofd_targets after the exit")
            h.check_equal(after["heapprofd_attached_total"], before["heapprofd_attached_total"] + 1,
                          "heapprofd_attached_total: asking for an exited pid attaches nothing")

    def test_a_reused_pid_never_shows_the_old_process_s_allocations(self):
        d = daemon()
        with h.Workload("exact") as old:
            d.profile(f"/debug/pprof/heap?pid={old.pid}")  # attaches
            old.run()
            check_exact_profile(d, old.pid, "the first process")
            pid = old.pid
            old.finish()  # exits and is reaped
        # At once, well within the reaper's second: a new program at the same pid.
        gone = time.monotonic()
        with h.SpawnedWorkload(pid, "rounds") as new:
            started_ms = (time.monotonic() - gone) * 1000
            first = totals(d, pid)  # attaches the new process (or finds it attached)
            h.check(not any(any(v) for v in first.values()),
                    f"pid {pid} reused {started_ms:.0f} ms after its first process exited: the new "
                    f"process has allocated nothing yet, but its profile holds {first}")
            new.run()  # round 1
            check_totals(totals(d, pid), ROUNDS_EXPECTED[0],
                         f"pid {pid} reused {started_ms:.0f} ms after its first process exited")

    def test_exec_of_another_program_shows_only_its_allocations(self):
        exec_test([os.path.join(h.WORKLOADS, "exact")], EXACT_EXPECTED)

    def test_exec_of_the_same_program_shows_only_the_new_image_s_allocations(self):
        exec_test(["/proc/self/exe", "--after"], AFTER_EXEC)

    def test_sighup_with_a_new_comm_rule_attaches_a_running_process(self):
        d = daemon()
        with h.Workload(os.path.join(STATE["bin_dir"], STATE["hup_comm"])) as w:
            # No rule matches it yet. A scan that attached a process started
            # after it has looked at it too (were that scan reading /proc
            # between the two starts, the check would be weaker, never wrong).
            with comm_workload() as witness:
                wait_attached(d, witness.pid, "a witness of the scan, by the comm rule")
            h.check(w.pid not in d.profiled_pids(),
                    f"pid {w.pid} ({STATE['hup_comm']}) was attached before any rule named it")
            write_file(STATE["config"], f"comm = {STATE['hup_comm']}\n", mode="a")
            os.kill(d.proc.pid, signal.SIGHUP)
            took = wait_attached(d, w.pid, f"after SIGHUP with comm = {STATE['hup_comm']}")
            want = f"heapprofd: reloaded {STATE['config']}"
            h.check(want in d.stderr().splitlines(),
                    f"no {want!r} in the daemon's log:\n{d.stderr()}")
            w.run()
            check_exact_profile(d, w.pid, f"pid {w.pid} attached {took:.2f} s after SIGHUP")
            w.finish()
            wait_detached(d, w.pid, "after exit")

    def test_metrics_are_prometheus_text_and_count_attaches_detaches_and_samples(self):
        d = daemon()
        d.wait_until(lambda: d.metric("heapprofd_targets") == 0 and d.settled(), DETACH_TIMEOUT_S,
                     "no process profiled before the test")
        m0 = d.metrics()
        for name in ("heapprofd_targets", "heapprofd_attached_total", "heapprofd_detached_total",
                     "heapprofd_samples_total", "heapprofd_frees_matched_total",
                     "heapprofd_attach_errors_total"):
            h.check(name in m0, f"/metrics has no {name}: {sorted(m0)}")
        with comm_workload() as w1, comm_workload() as w2:
            wait_attached(d, w1.pid, "first")
            wait_attached(d, w2.pid, "second")
            m1 = d.metrics()
            h.check_equal(m1["heapprofd_targets"], 2, "heapprofd_targets with two processes attached")
            h.check_equal(len(d.profiled_pids()), 2, "processes in the index")
            h.check_equal(m1["heapprofd_attached_total"] - m0["heapprofd_attached_total"], 2,
                          "heapprofd_attached_total after two attaches")
            h.check_equal(m1["heapprofd_detached_total"], m0["heapprofd_detached_total"],
                          "heapprofd_detached_total before any exit")
            w1.run()
            w2.run()
            m2 = d.metrics()
            samples = m2["heapprofd_samples_total"] - m0["heapprofd_samples_total"]
            h.check_equal(samples, 2 * EXACT_ALLOCATIONS,
                          "heapprofd_samples_total after two runs of exact at interval 1")
            frees = m2["heapprofd_frees_matched_total"] - m0["heapprofd_frees_matched_total"]
            h.check(frees >= 2 * 500, f"heapprofd_frees_matched_total moved by {frees}, expected "
                                      f"at least 1000 (exact frees 500 blocks per run)")
            h.check_equal(m2["heapprofd_attach_errors_total"], m0["heapprofd_attach_errors_total"],
                          "heapprofd_attach_errors_total")
            # Per process: exact.c's in-use and allocated bytes, labelled pid and comm.
            for w in (w1, w2):
                labels = (("pid", str(w.pid)), ("comm", STATE["comm"]))
                for name, want in (("heapprofd_target_inuse_bytes", EXACT_INUSE_BYTES),
                                   ("heapprofd_target_allocated_bytes_total", EXACT_ALLOC_BYTES)):
                    h.check_equal(m2.labelled.get((name, labels)), want,
                                  f"{name}{{pid={w.pid},comm={STATE['comm']}}} after a run of exact")
            w1.finish()
            w2.finish()
            d.wait_until(lambda: d.metric("heapprofd_targets") == 0 and d.settled(),
                         DETACH_TIMEOUT_S, "heapprofd_targets back to 0 after both exited")
            m3 = d.metrics()
            h.check_equal(m3["heapprofd_detached_total"] - m0["heapprofd_detached_total"], 2,
                          "heapprofd_detached_total after two exits")
            h.check_equal(m3["heapprofd_attached_total"], m1["heapprofd_attached_total"],
                          "heapprofd_attached_total after the exits")
            gone = {("pid", str(w1.pid)), ("pid", str(w2.pid))}
            left = [key for key in m3.labelled
                    if key[0].startswith("heapprofd_target_") and gone & set(key[1])]
            h.check(not left, f"per-process series left after both exited: {left}")

    def test_a_restart_keeps_in_use_totals_exact_and_another_interval_only_while_it_would_misread(self):
        """Daemon A profiles rounds.c's first round; A stops (SIGTERM), B starts
        on the same pin directory and adopts the process: B's totals are A's,
        and stay exact through two more rounds of frees (of blocks allocated
        under A) and allocations. The workload is idle while no daemon runs:
        what a process does between A's exit and B's attach is not seen (the
        probes are gone then). A second daemon on the pin directory while B runs
        exits with 1. Once B is gone, one with another --sample-interval exits
        with 1 too, naming the pin directory and the process, while the process
        runs (its counts would be misread); once it has exited, one starts
        afresh on new maps, saying so in one line. One on maps of another state
        version (an upgrade that changed them) exits with 1."""
        pin = f"/sys/fs/bpf/heapprofd-test-{os.getpid()}-{int(time.time() * 1000) % 100000}"
        try:
            with h.Workload("rounds") as w:
                with h.Daemon("--sample-interval", "1", "--pin-dir", pin) as a:
                    a.profile(f"/debug/pprof/heap?pid={w.pid}")  # attaches
                    w.run()  # round 1
                    before = totals(a, w.pid)
                    check_totals(before, ROUNDS_EXPECTED[0], "daemon A after round 1")
                # A has stopped (SIGTERM); its maps stay pinned. The workload is idle.
                with h.Daemon("--sample-interval", "1", "--pin-dir", pin) as b:
                    adopted = "heapprofd: adopted 1 processes from the pinned maps"
                    h.check(adopted in b.stderr().splitlines(),
                            f"daemon B did not log {adopted!r}:\n{b.stderr()}")
                    h.check(w.pid in b.profiled_pids(), f"daemon B does not list pid {w.pid}")
                    after = totals(b, w.pid)
                    h.check_equal(after, before, "totals across the restart (B's vs A's)")
                    w.run()  # round 2: frees blocks allocated under A
                    check_totals(totals(b, w.pid), ROUNDS_EXPECTED[1], "daemon B after round 2")
                    w.run()  # round 3
                    check_totals(totals(b, w.pid), ROUNDS_EXPECTED[2], "daemon B after round 3")
                    # A second daemon on the pin directory B uses: it would adopt
                    # B's processes, so it refuses to start.
                    h.check_refuses(["--pin-dir", pin, "--sample-interval", "1"],
                                    "a second daemon while daemon B runs on the pin directory",
                                    [pin, "in use"])
                # Pinned maps made with --sample-interval 1 that hold a running
                # process: another interval is refused.
                h.check_refuses(["--pin-dir", pin, "--sample-interval", "524288"],
                                f"another interval while pid {w.pid} runs",
                                [pin, "sample-interval", f"pid {w.pid}"])
                w.finish()
            # The process has exited: nothing would be misread, so the maps go
            # and the daemon starts afresh, saying so in one line.
            with h.Daemon("--sample-interval", "524288", "--pin-dir", pin) as c:
                said = [x for x in c.stderr().splitlines() if "starting afresh" in x]
                h.check(len(said) == 1 and pin in said[0] and "sample-interval 1," in said[0],
                        f"daemon C should say once that it starts afresh on {pin}, whose maps "
                        f"were made with --sample-interval 1; stderr:\n{c.stderr()}")
                with h.Workload("exact") as w:
                    c.profile(f"/debug/pprof/heap?pid={w.pid}")  # attaches, on the new maps
                    w.run()
                    w.finish()
            # Maps of another state version (as after an upgrade that changed
            # them): the meta map's version is made 999 with bpftool.
            meta = os.path.join(pin, "meta")
            value = (STATE_MAGIC.to_bytes(4, "little") + (999).to_bytes(4, "little")
                     + (1).to_bytes(8, "little"))
            bt = subprocess.run(["bpftool", "map", "update", "pinned", meta, "key", "hex",
                                 "00", "00", "00", "00", "value", "hex"]
                                + [f"{b:02x}" for b in value], capture_output=True, text=True)
            h.check(bt.returncode == 0, f"bpftool map update {meta}: {bt.stderr}")
            h.check_refuses(["--pin-dir", pin, "--sample-interval", "1"],
                            "maps of state version 999", [pin, "version"])
        finally:
            shutil.rmtree(pin, ignore_errors=True)


if __name__ == "__main__":
    h.main()
