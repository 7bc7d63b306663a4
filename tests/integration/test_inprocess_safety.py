"""The in-process sampler beside everything a process lives with, each a
way the injection could hurt a process that would be fine unprofiled:
another tool's uprobes on malloc and free (bpftrace), a sibling that swaps
descriptors under the injection to make the root daemon write a file of
its choosing, a library dlopened after the attach (by a library whose own
RUNPATH alone finds it), frees through a pointer to free kept from before
the attach, signals with their siginfo checked on arrival, a traced thread
and seccomp filters. Each test would fail on code that rewrote allocator
entries, reopened the memfd by path, missed later modules, or lost
siginfo."""

import hashlib
import os
import pwd
import re
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import unittest

import heapprof_harness as h
import test_exact

LIBC = "/lib/x86_64-linux-gnu/libc.so.6"
# fd swap tries: each is a fresh process (a sampler mapped once is adopted
# after, with no memfd created) and takes ~30-60 ms.
FD_SWAP_TRIES = int(os.environ.get("HEAPPROF_FD_SWAP_TRIES", "150"))


def inject_cycles(pid, n, check=True):
    """Runs the injection library (tests/integration/inject_cycles.c) on pid."""
    tool = os.environ.get("INJECT_CYCLES")
    h.check(tool and os.access(tool, os.X_OK), f"INJECT_CYCLES={tool!r} is not built")
    out = subprocess.run([tool, str(pid), str(n)], capture_output=True, text=True, timeout=300)
    if check:
        h.check(out.returncode == 0, f"inject_cycles {pid} {n}: {out.stderr}{out.stdout}")
    return out


def sha256_of(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def stopped_threads(pid):
    """The threads of pid in a tracing stop ('t')."""
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state == "t":
            out.append(int(tid))
    return out


class Bpftrace:
    """bpftrace with uprobes at offset 0 of libc's malloc, calloc, realloc
    and free for one pid, as an SRE would run it; counts its hits.

    Two waits are on bpftrace's own word, not on time. Ready: a last probe,
    on libc's getppid for this test's own pid, prints a line when hit;
    bpftrace attaches its probes in the program's order, so once this test
    sees that line the allocator's probes are in. (A fixed second after
    "Attaching N probes..." was too short on a new, loaded machine: it
    counted no hit at all.) Stop: bpftrace 0.17 loses a SIGINT that comes
    within about a second of its start-up (seen here: one sent right after
    its first output left it in epoll_wait for good, and a second one ended
    it in under a second), so SIGINT is sent again each second."""

    READY_TIMEOUT_S = 60
    STOP_TIMEOUT_S = 60

    def __init__(self, pid):
        probes = " ".join(
            f"uprobe:{LIBC}:{fn} /pid == {pid}/ {{ @{fn} = count(); }}"
            for fn in ("malloc", "calloc", "realloc", "free"))
        probes += f' uprobe:{LIBC}:getppid /pid == {os.getpid()}/ {{ printf("probed\\n"); }}'
        self.proc = subprocess.Popen(["bpftrace", "-B", "none", "-e", probes],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
        self.out = ""
        try:
            self._wait_until_probed()
        except BaseException:
            # Its probes have no pid filter (the predicate is in the
            # program): one left behind would trap in every process.
            self.proc.kill()
            self.proc.wait()
            raise

    def _wait_until_probed(self):
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + self.READY_TIMEOUT_S
        while "probed\n" not in self.out:
            h.check(self.proc.poll() is None, f"bpftrace exited: {self.out!r}")
            h.check(time.monotonic() < deadline,
                    f"bpftrace's marker probe was not hit within {self.READY_TIMEOUT_S} s"
                    f" of its start: {self.out!r}")
            os.getppid()
            # Raw reads of the pipe: the text wrapper above it stays empty
            # for communicate() in stop().
            if select.select([fd], [], [], 0.05)[0]:
                self.out += os.read(fd, 65536).decode(errors="replace")

    def stop(self):
        """Ends it; returns its hit counts by function."""
        deadline = time.monotonic() + self.STOP_TIMEOUT_S
        while True:
            self.proc.send_signal(signal.SIGINT)
            try:
                out, _ = self.proc.communicate(timeout=1)
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() > deadline:
                    self.proc.kill()
                    self.proc.communicate()
                    h.check(False, f"bpftrace did not end within {self.STOP_TIMEOUT_S} s"
                            " of SIGINTs sent each second")
        out = self.out + out
        return {m.group(1): int(m.group(2)) for m in re.finditer(r"@(\w+): (\d+)", out)}


class ForeignUprobesTest(unittest.TestCase):
    """Another tool's uprobes at the entries of malloc and free, placed
    after the attach and taken out before the detach. With entries patched
    into jumps, the kernel emulated the file's first instruction and
    resumed inside the jump: the process died within seconds."""

    def test_exact_totals_stay_exact_under_bpftrace(self):
        with h.Daemon("--sample-interval", "1") as d, h.Workload("exact") as w:
            d.profile(f"/debug/pprof/heap?pid={w.pid}")
            metrics = d.get("/metrics")[1].decode()
            tracer = Bpftrace(w.pid)
            try:
                w.run()
                heap = h.decode(d.profile(f"/debug/pprof/heap?pid={w.pid}"))
            finally:
                hits = tracer.stop()
            w.finish()
            d.check_alive()
        h.check(f'pid="{w.pid}",comm="exact",sampler="inprocess"' in metrics,
                "exact was not on the in-process sampler")
        h.check(hits.get("malloc", 0) > 0 and hits.get("free", 0) > 0,
                f"bpftrace's probes were never hit: {hits}")
        test_exact.check_exact_totals(heap, "heap profile under bpftrace")

    def test_stress_runs_its_checks_under_bpftrace(self):
        stress = h.Workload("stress")
        with stress as w, h.Daemon("--sample-interval", "4096") as d:
            os.setpriority(os.PRIO_PROCESS, w.pid, 19)
            w.go()
            d.profile(f"/debug/pprof/heap?pid={w.pid}")
            tracer = Bpftrace(w.pid)
            try:
                time.sleep(8)
            finally:
                hits = tracer.stop()
            h.check(w.proc.poll() is None, f"stress died under bpftrace: {w.proc.poll()}")
            w._send_line("stop")
            w.wait_done(60)
            w.finish(60)
        h.check(hits.get("malloc", 0) > 1000, f"bpftrace saw few mallocs: {hits}")


class FdSwapTest(unittest.TestCase):
    """An unprivileged process whose CLONE_FILES sibling dup2()s a root-owned,
    world-readable file onto the number where the injected memfd_create
    lands. The daemon used to reopen /proc/PID/fd/N for writing as root and
    overwrote that file. Now each attach lands in the real memfd or is
    refused, and the file is never written."""

    def test_no_file_but_the_memfd_is_ever_written(self):
        nobody = pwd.getpwnam("nobody")
        with tempfile.TemporaryDirectory() as tmp:
            os.chmod(tmp, 0o755)
            victim = os.path.join(tmp, "victim")
            with open(victim, "wb") as f:
                f.write(b"root's file\n" * 100)
            os.chmod(victim, 0o644)
            # A copy nobody can reach: the build tree may lie below a
            # directory only root may enter (a clone in a mktemp -d).
            fdswap = os.path.join(tmp, "fdswap")
            shutil.copy(os.path.join(os.environ["WORKLOADS"], "fdswap"), fdswap)
            os.chmod(fdswap, 0o755)
            before = sha256_of(victim)
            mtime = os.stat(victim).st_mtime_ns
            landed = refused = 0
            for i in range(FD_SWAP_TRIES):
                w = subprocess.Popen([fdswap, victim],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     user=nobody.pw_uid, group=nobody.pw_gid, extra_groups=[])
                try:
                    line = w.stdout.readline().decode()
                    h.check(line.startswith("ready"), f"try {i}: fdswap said {line!r}")
                    out = inject_cycles(w.pid, 1, check=False)
                    if out.returncode == 0:
                        landed += 1
                    else:
                        h.check("refused" in out.stderr or "No such" in out.stderr,
                                f"try {i}: the attach failed for another reason: {out.stderr}")
                        refused += 1
                    h.check(w.poll() is None, f"try {i}: fdswap died: {w.poll()}")
                finally:
                    w.kill()
                    w.wait()
                h.check(sha256_of(victim) == before and
                        os.stat(victim).st_mtime_ns == mtime,
                        f"try {i}: the root-owned file was written")
            print(f"  {FD_SWAP_TRIES} tries: {landed} attached, {refused} refused, "
                  f"0 files written", flush=True)


class LaterModulesTest(unittest.TestCase):
    """A plugin dlopened after the attach, by its bare name, from a library
    whose own RUNPATH ($ORIGIN/plugins) alone finds it: dlopen must see that
    library as its caller (the plugin loads), and the plugin's allocations
    must be counted exactly though its slots did not exist at the attach."""

    def test_a_plugin_loaded_after_the_attach_is_counted_exactly(self):
        n = 50
        with h.Daemon("--sample-interval", "1") as d, h.Workload("dlopener", str(n)) as w:
            d.profile(f"/debug/pprof/heap?pid={w.pid}")
            w.go()
            w.wait_done(30)
            heap = h.decode(d.profile(f"/debug/pprof/heap?pid={w.pid}"))
            w.finish()
        rows = [s for s in heap.samples if s.leaf() == "dlalloc_run"]
        h.check(rows, f"no sample of dlalloc_run: {h.describe(heap.samples)}")
        inuse = [sum(s.values[i] for s in rows) for i in range(4)]
        h.check_equal(inuse, [n, n * 4321, n, n * 4321], "dlalloc_run's totals "
                      "[alloc_objects, alloc_space, inuse_objects, inuse_space]")


class UnseenFreesTest(unittest.TestCase):
    """Frees through a pointer to free taken before the attach pass no slot:
    when the allocator hands such an address out again, the sampler takes
    the old sample out of in-use first, and /metrics counts it."""

    def test_a_freed_block_given_out_again_leaves_in_use(self):
        with h.Daemon("--sample-interval", "1") as d, h.Workload("keptfree") as w:
            d.profile(f"/debug/pprof/heap?pid={w.pid}")
            w.go()
            w.wait_done(30)
            heap = h.decode(d.profile(f"/debug/pprof/heap?pid={w.pid}"))
            metrics = d.get("/metrics")[1].decode()
            w.finish()

        def totals(leaf):
            rows = [s for s in heap.samples if s.leaf() == leaf]
            return [sum(s.values[i] for s in rows) for i in range(4)]
        h.check_equal(totals("first_batch"), [100, 6400, 0, 0], "first_batch (freed unseen)")
        h.check_equal(totals("second_batch"), [100, 6400, 100, 6400], "second_batch (held)")
        m = re.search(r"^heapprofd_frees_unseen_total (\d+)", metrics, re.M)
        h.check(m and int(m.group(1)) >= 100, f"unseen frees not counted: {m and m.group(0)}")


class SignalsTest(unittest.TestCase):
    """sigqueue values (SI_QUEUE) and tgkill (SI_TKILL) sent to every thread
    while the sampler is put in and taken out 30 times: each arrives with
    its siginfo, none is lost. A thread released from a ptrace stop without
    its siginfo got SI_KERNEL, which glibc ignores for its own signals."""

    def test_siginfo_survives_the_attaches(self):
        with h.Workload("sigcheck") as w:
            w.go()
            out = inject_cycles(w.pid, 30)
            print(f"  {out.stdout.strip()}", flush=True)
            w._send_line("stop")
            rc = w.proc.wait(60)
            tail = w.proc.stdout.read() if w.proc.stdout else ""
            h.check(rc == 0, f"sigcheck exited {rc}: {tail}")


class RefusalsTest(unittest.TestCase):
    """A process the sampler must not serve is refused with the reason, and
    no thread is left stopped."""

    def test_a_process_with_a_traced_thread_is_refused(self):
        with h.Workload("stress") as w:
            os.setpriority(os.PRIO_PROCESS, w.pid, 19)
            w.go()
            tids = sorted(int(t) for t in os.listdir(f"/proc/{w.pid}/task"))
            strace = subprocess.Popen(["strace", "-q", "-o", "/dev/null", "-p", str(tids[-1])],
                                      stderr=subprocess.DEVNULL)
            try:
                h.wait_traced(w.pid, tids[-1])
                out = inject_cycles(w.pid, 1, check=False)
                h.check(out.returncode != 0 and "traced by process" in out.stderr,
                        f"not refused as traced: {out.returncode} {out.stderr}")
                h.check_equal(stopped_threads(w.pid), [], "threads left stopped")
            finally:
                strace.terminate()
                strace.wait(30)
            h.check(w.proc.poll() is None, "stress died")
            w._send_line("stop")
            w.wait_done(60)
            w.finish(60)

    def test_a_process_under_seccomp_is_refused(self):
        with h.Workload("seccomped") as w:
            out = inject_cycles(w.pid, 1, check=False)
            h.check(out.returncode != 0 and "seccomp" in out.stderr,
                    f"not refused for seccomp: {out.returncode} {out.stderr}")
            h.check_equal(stopped_threads(w.pid), [], "threads left stopped")
            w._send_line("stop")
            h.check_equal(w.proc.wait(30), 0, "seccomped's exit status")

    def test_a_thread_under_seccomp_is_passed_over(self):
        with h.Workload("seccomped", "one") as w:
            inject_cycles(w.pid, 3)
            h.check_equal(stopped_threads(w.pid), [], "threads left stopped")
            w._send_line("stop")
            h.check_equal(w.proc.wait(30), 0, "seccomped's exit status")


class RealProgramsTest(unittest.TestCase):
    """Real programs under a rule, every process of theirs profiled."""

    def test_stress_ng_verifies_with_every_worker_on_the_sampler(self):
        """stress-ng's allocation, fork, vfork, clone, exec, pthread and
        signal stressors with --verify, as an unprivileged user (its exec
        stressor refuses root), under --comm stress-ng: its workers, forked
        right at its start, are attached as forks of it."""
        nobody = pwd.getpwnam("nobody")
        with tempfile.TemporaryDirectory() as tmp, \
                h.Daemon("--comm", "stress-ng", "--sample-interval", "65536") as d:
            os.chmod(tmp, 0o777)
            run = subprocess.Popen(
                ["stress-ng", "--malloc", "2", "--fork", "2", "--vfork", "1", "--clone", "1",
                 "--exec", "1", "--pthread", "1", "--signal", "1", "--verify", "-t", "10s",
                 "--temp-path", tmp], cwd=tmp, user=nobody.pw_uid, group=nobody.pw_gid,
                extra_groups=[], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            # Its workers are attached as their parent's forks, one after
            # another: the names seen on the sampler while it runs.
            on, fallbacks = set(), []
            while run.poll() is None:
                metrics = d.get("/metrics")[1].decode()
                on |= set(re.findall(r'heapprofd_target_sampler\{pid="\d+",'
                                     r'comm="(stress-ng[^"]*)",sampler="inprocess"', metrics))
                fallbacks += re.findall(r'heapprofd_target_sampler\{[^}]*comm="stress-ng[^}]*'
                                        r'sampler="uprobe"[^}]*\}', metrics)
                time.sleep(0.5)
            out, _ = run.communicate(timeout=120)
            d.check_alive()
        workers = {c for c in on if c != "stress-ng"}
        h.check_equal(run.returncode, 0, f"stress-ng's exit status:\n{out}")
        h.check("successful run completed" in out, f"stress-ng did not complete:\n{out}")
        # The fork stressor's children flood the attacher (one at a time:
        # attaching bursts in parallel is work of its own), so not every
        # kind of worker is reached while the run lasts on a busy machine.
        h.check("stress-ng" in on and len(workers) >= 3,
                f"stress-ng's processes on the in-process sampler: {sorted(on)}")
        h.check(not fallbacks, f"stress-ng processes on uprobes: {fallbacks[:5]}")

    def test_cpython_s_own_tests_pass_with_every_python_profiled_from_exec(self):
        """A part of CPython's test suite (Debian's libpython3.11-testsuite:
        threading, signal, mmap, gc, os, subprocess), run by regrtest in 3
        worker processes, with every python3.11 profiled from its exec:
        SUCCESS, as it is unprofiled on this machine."""
        python = "/usr/bin/python3.11"
        with h.Daemon("--exe", python, "--sample-interval", "65536") as d:
            run = subprocess.Popen(
                [python, "-m", "test", "-j3", "test_threading", "test_signal", "test_mmap",
                 "test_gc", "test_os", "test_subprocess"],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                cwd=tempfile.gettempdir())
            pids, fallbacks = set(), []
            while run.poll() is None:
                metrics = d.get("/metrics")[1].decode()
                pids |= set(re.findall(r'heapprofd_target_sampler\{pid="(\d+)",comm="python3[^"]*",'
                                       r'sampler="inprocess"', metrics))
                fallbacks += re.findall(r'heapprofd_target_sampler\{[^}]*sampler="uprobe"[^}]*\}',
                                        metrics)
                time.sleep(1)
            out, _ = run.communicate(timeout=600)
            d.check_alive()
        h.check(run.returncode == 0 and "Tests result: SUCCESS" in out,
                f"CPython's tests under profiling ({run.returncode}):\n{out[-3000:]}")
        h.check(len(pids) >= 4, f"python processes seen on the in-process sampler: {pids}")
        # A process whose every thread sits in a call a stop would fail with
        # EINTR (a test's server in accept(), say) gets uprobes, with that
        # reason; no other fallback is expected.
        other = [f for f in fallbacks if "can be stopped unseen" not in f]
        h.check(not other, f"python processes on uprobes: {other[:5]}")


if __name__ == "__main__":
    h.main()
