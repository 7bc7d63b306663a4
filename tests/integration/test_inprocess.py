"""The in-process sampler's safety: a 16-thread workload (tests/workloads/
stress.c) that checks a pattern in every block it holds runs while the
sampler is injected and removed 100 times, while heapprofd is SIGKILLed at
every intermediate point of an injection, and while the workload itself is
SIGKILLed during injections; with glibc, and with Debian's jemalloc and
tcmalloc preloaded. The workload must end with exit 0 and its checks
passed, its relocation slot of malloc must point into the sampler while it
is attached and back after each detach, the allocator's code must never
change, and heapprofd must keep serving. Also: a process under a tracer
falls back to uprobes with the reason in /metrics, a target rule chooses
the sampler, and Debian's redis-server is profiled with the callers of
malloc as leaves."""

import os
import random
import signal
import subprocess
import tempfile
import threading
import time
import unittest

import heapprof_harness as h

CYCLES = 100
JEMALLOC = "/usr/lib/x86_64-linux-gnu/libjemalloc.so.2"
TCMALLOC = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"
# Crash points of one first injection into a glibc process and its
# removal: 3 per remote system call (7 of them: the reservation, the
# memfd, 4 segments, a close), then for the attach and for the detach the
# installer about to be called (2 each). The test checks that the last of
# these still kills and the next one does not, so that a point added or
# removed is noticed.
CRASH_POINTS = 25
# The point of test_daemon_killed_mid_injection: the thread pointed at the
# installer, which then runs with nobody waiting for it.
DAEMON_CRASH_POINT = 23


class Stress(h.Workload):
    """The stress workload, started and let go."""

    def __init__(self, env=None):
        super().__init__("stress", env=env)
        # At the lowest priority (its threads inherit it): 16 busy threads
        # on 2 cores would otherwise starve heapprofd's start for seconds.
        os.setpriority(os.PRIO_PROCESS, self.pid, 19)
        self.go()

    def stop_and_check(self):
        self._send_line("stop")
        self.wait_done(60)
        self.finish(60)


def entry_bytes(pid, lib_suffix, symbol="malloc", n=16):
    """The first n bytes of `symbol` in process `pid` and in its file."""
    path, base, offset = None, None, None
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and lib_suffix in parts[5] and parts[2] == "00000000":
                path, base = parts[5], int(parts[0].split("-")[0], 16)
                break
    h.check(path is not None, f"{lib_suffix} not mapped in {pid}")
    out = subprocess.run(["nm", "-D", "--defined-only", path], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2].split("@")[0] == symbol:
            offset = int(parts[0], 16)
            break
    h.check(offset is not None, f"{symbol} not in {path}")
    with open(f"/proc/{pid}/mem", "rb") as f:
        f.seek(base + offset)
        live = f.read(n)
    with open(path, "rb") as f:
        f.seek(offset)  # Debian's libraries: vaddr == file offset in the text segment
        orig = f.read(n)
    return live, orig


def is_sampler_mapping(line):
    """Whether a line of /proc/PID/maps maps the sampler: the file every
    target shares (/run/heapprofd/sampler-BUILDID.so), or a memfd of its own."""
    return "/memfd:heapprofd-sampler" in line or "/heapprofd/sampler-" in line


def sampler_ranges(pid):
    """The address ranges the sampler is mapped at in `pid`."""
    out = []
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            if is_sampler_mapping(line):
                lo, hi = line.split()[0].split("-")
                out.append((int(lo, 16), int(hi, 16)))
    return out


def malloc_slots(pid):
    """The values of the executable's relocation slots of malloc in `pid`."""
    exe = os.readlink(f"/proc/{pid}/exe")
    base = None
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and parts[5] == exe and parts[2] == "00000000":
                base = int(parts[0].split("-")[0], 16)
                break
    h.check(base is not None, f"{exe} not mapped in {pid}")
    out = subprocess.run(["readelf", "-rW", exe], capture_output=True, text=True,
                         check=True).stdout
    offsets = [int(p[0], 16) for p in (l.split() for l in out.splitlines())
               if len(p) >= 5 and p[2] in ("R_X86_64_JUMP_SLOT", "R_X86_64_GLOB_DAT")
               and p[4].split("@")[0] == "malloc"]
    h.check(offsets, f"{exe} has no relocation slot of malloc")
    values = []
    with open(f"/proc/{pid}/mem", "rb") as f:
        for off in offsets:
            f.seek(base + off)
            values.append(int.from_bytes(f.read(8), "little"))
    return values


def slots_in_sampler(pid):
    """Whether every slot of malloc in the executable points into the sampler."""
    ranges = sampler_ranges(pid)
    return all(any(lo <= v < hi for lo, hi in ranges) for v in malloc_slots(pid))


def sampler_mapped(pid):
    return bool(sampler_ranges(pid))


def attach(d, pid, comm="stress"):
    """Attaches (a profile request) and checks the in-process sampler is used."""
    d.profile(f"/debug/pprof/heap?pid={pid}")
    metrics = d.get("/metrics")[1].decode()
    h.check(f'heapprofd_target_sampler{{pid="{pid}",comm="{comm}",sampler="inprocess"' in metrics,
            f"pid {pid} is not on the in-process sampler:\n"
            + "\n".join(l for l in metrics.splitlines() if "sampler" in l)
            + f"\nheapprofd stderr:\n{d.stderr()}")


def cycles(env, lib_suffix, n):
    """n attach/detach cycles through heapprofd (each a daemon started and
    stopped: detach is at stop) on a stress workload with allocator `env`."""
    with Stress(env) as w:
        for i in range(n):
            with h.Daemon("--sampler", "inprocess", "--sample-interval", "4096") as d:
                attach(d, w.pid)
                h.check(slots_in_sampler(w.pid),
                        f"cycle {i}: malloc's slots do not point at the sampler: "
                        f"{[hex(v) for v in malloc_slots(w.pid)]} {sampler_ranges(w.pid)}")
                live, orig = entry_bytes(w.pid, lib_suffix)
                h.check_equal(live.hex(), orig.hex(), f"cycle {i}: malloc's code while attached")
            h.check(not any(lo <= v < hi for v in malloc_slots(w.pid)
                            for lo, hi in sampler_ranges(w.pid)),
                    f"cycle {i}: a slot of malloc still points at the sampler after detach")
            live, orig = entry_bytes(w.pid, lib_suffix)
            h.check_equal(live.hex(), orig.hex(), f"cycle {i}: malloc's code after detach")
            h.check(w.proc.poll() is None, f"cycle {i}: the workload died")
        h.check(sampler_mapped(w.pid), "the sampler mapping stays after detach")
        w.stop_and_check()


def inject_cycles(pid, n, crash_at=None, shared=True):
    """Runs the injection library (tests/integration/inject_cycles.c) on pid:
    mapping the sampler from a shared file (in a directory of the test's
    own, as the daemon does by default), or with shared=False from a memfd."""
    tool = os.environ.get("INJECT_CYCLES")
    h.check(tool and os.access(tool, os.X_OK), f"INJECT_CYCLES={tool!r} is not built")
    env = dict(os.environ)
    if crash_at is not None:
        check_crash_points_built()
        env["HEAPPROFD_TEST_CRASH_AT"] = str(crash_at)
    return subprocess.run([tool, str(pid), str(n)] + ([sampler_dir()] if shared else []),
                          capture_output=True, text=True, timeout=300, env=env)


_SAMPLER_DIR = []


def sampler_dir():
    """The test's own directory for the shared sampler file, one for the
    whole run: a second injection adopts what an interrupted one left, as
    a restarted daemon does, only if it finds the same file."""
    if not _SAMPLER_DIR:
        d = tempfile.TemporaryDirectory(prefix="heapprofd-sampler-")
        os.chmod(d.name, 0o755)  # every target opens the file in it
        _SAMPLER_DIR.append(d)
    return _SAMPLER_DIR[0].name


def check_crash_points_built():
    h.check(os.environ.get("HEAPPROF_TEST_HOOKS") == "1",
            "the injection's crash points are not compiled in: configure with "
            "-DHEAPPROF_TEST_HOOKS=ON (scripts/test.sh does)")


def metrics_once_picked_up(d, pid, timeout=15):
    """/metrics once a target rule has attached pid (a scan a second), or
    as it is at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        metrics = d.get("/metrics")[1].decode()
        if f'pid="{pid}"' in metrics or time.monotonic() > deadline:
            return metrics
        time.sleep(0.2)


class CyclesTest(unittest.TestCase):
    """Injections and removals, and kills at every point of one, on the
    stress workload's 16 busy threads at the lowest priority: run alone
    (integration.inprocess.timed), since on a busy machine a stop of one of
    them may take over the 1 s it may take (THREAD_STOP_TIMEOUT_MS)."""

    def test_100_attach_detach_cycles_while_16_threads_allocate(self):
        """The injection library alone, 100 times (a daemon start per cycle
        would take minutes here), then a few cycles through heapprofd."""
        with Stress() as w:
            out = inject_cycles(w.pid, CYCLES)
            h.check(out.returncode == 0, f"inject_cycles failed: {out.stderr}{out.stdout}")
            print(f"  shared file: {out.stdout.strip()}", flush=True)
            h.check(w.proc.poll() is None, "the workload died during the cycles")
            w.stop_and_check()
        with Stress() as w:  # where the shared file cannot be opened: a memfd of its own
            out = inject_cycles(w.pid, CYCLES // 5, shared=False)
            h.check(out.returncode == 0, f"inject_cycles (memfd) failed: {out.stderr}{out.stdout}")
            print(f"  memfd: {out.stdout.strip()}", flush=True)
            h.check(w.proc.poll() is None, "the workload died during the memfd cycles")
            w.stop_and_check()
        cycles(None, "/libc.so.6", 5)

    def test_attach_detach_cycles_with_jemalloc(self):
        cycles({"LD_PRELOAD": JEMALLOC}, "/libjemalloc.so.2", 10)

    def test_attach_detach_cycles_with_tcmalloc(self):
        cycles({"LD_PRELOAD": TCMALLOC}, "/libtcmalloc_minimal.so", 10)

    def test_killed_at_every_point_of_an_injection(self):
        """The injecting process SIGKILLed at each point of an injection (a test
        hook, see thread_crash_point()) leaves a workload that runs on correctly,
        and the next injection (adopting what was left) works. The injection
        library alone, as heapprofd runs it: a daemon started per point would
        take minutes here; test_daemon_killed_mid_injection does it once."""
        for point in range(1, CRASH_POINTS + 2):
            with Stress() as w:
                out = inject_cycles(w.pid, 1, crash_at=point)
                if point > CRASH_POINTS:
                    h.check(out.returncode == 0, f"crash point {point} is past the last, but the "
                            f"injection failed: raise CRASH_POINTS ({out.returncode}) {out.stderr}")
                else:
                    h.check(out.returncode == -signal.SIGKILL,
                            f"crash point {point}: the injection was not killed "
                            f"({out.returncode} {out.stderr}); lower CRASH_POINTS")
                time.sleep(0.2)
                h.check(w.proc.poll() is None, f"crash point {point}: the workload died "
                                               f"(status {w.proc.poll()})")
                again = inject_cycles(w.pid, 2)
                h.check(again.returncode == 0, f"crash point {point}: injecting again failed: "
                                               f"{again.stderr}")
                w.stop_and_check()

    def test_daemon_killed_mid_injection(self):
        """heapprofd itself SIGKILLed with some entries patched: the workload
        runs on, and a new daemon adopts the patch and profiles it."""
        point = DAEMON_CRASH_POINT
        check_crash_points_built()
        with Stress() as w:
            os.environ["HEAPPROFD_TEST_CRASH_AT"] = str(point)
            try:
                d = h.Daemon("--sampler", "inprocess", "--sample-interval", "4096")
                d.__enter__()
            finally:
                del os.environ["HEAPPROFD_TEST_CRASH_AT"]
            try:
                status, _ = d.get(f"/debug/pprof/heap?pid={w.pid}")
            except Exception:
                status = None
            deadline = time.monotonic() + 10
            while d.proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            died = d.proc.poll()
            d._stop()
            h.check(died is not None, f"heapprofd did not die at crash point {point} ({status})")
            time.sleep(0.2)
            h.check(w.proc.poll() is None, f"the workload died (status {w.proc.poll()})")
            with h.Daemon("--sampler", "inprocess", "--sample-interval", "4096") as again:
                attach(again, w.pid)
            w.stop_and_check()

    def test_workload_killed_mid_injection(self):
        """A target SIGKILLed while it is being injected: heapprofd stays up and says 404 or 200."""
        rnd = random.Random(14)
        with h.Daemon("--sampler", "inprocess", "--sample-interval", "4096") as d:
            for i in range(20):
                w = Stress()
                killer = threading.Timer(rnd.uniform(0, 0.004), w.kill)
                killer.start()
                status, body = d.get(f"/debug/pprof/heap?pid={w.pid}")
                killer.join()
                w.kill()
                h.check(status in (200, 404, 500), f"round {i}: {status} {body[:200]!r}")
                d.check_alive()
            status, _ = d.get("/healthz")
            h.check_equal(status, 200, "healthz after the kills")


class InprocessTest(unittest.TestCase):
    """The choice of the sampler, real programs and the sampler's file."""

    def test_traced_process_falls_back_to_uprobes_with_the_reason(self):
        with Stress() as w, h.Daemon("--sampler", "inprocess") as d:
            # gdb stops the workload while it is attached and lets it go when it
            # detaches at the end of its batch (killing gdb would leave it stopped).
            tracer = subprocess.Popen(["gdb", "-q", "-batch", "-p", str(w.pid), "-ex",
                                       "shell sleep 3"], stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                h.wait_traced(w.pid)
                d.profile(f"/debug/pprof/heap?pid={w.pid}")
                metrics = d.get("/metrics")[1].decode()
                h.check(f'pid="{w.pid}",comm="stress",sampler="uprobe",reason="process {w.pid} is '
                        f'traced by process' in metrics,
                        "no fallback reason in /metrics:\n" +
                        "\n".join(l for l in metrics.splitlines() if "sampler" in l))
                h.check("heapprofd_inprocess_fallbacks_total 1" in metrics, "fallback not counted")
                h.check("traced by process" in d.get("/debug/pprof/")[1].decode(),
                        "no fallback reason on the index page")
            finally:
                try:
                    tracer.wait(60)
                except subprocess.TimeoutExpired:
                    tracer.kill()
                    tracer.wait()
            w.stop_and_check()

    def test_a_target_rule_chooses_the_sampler(self):
        """--comm 'stress sampler=inprocess' with the default sampler uprobe: the
        rule's processes get the in-process sampler, others (exact) uprobes."""
        with Stress() as w, h.Workload("exact") as other, \
                h.Daemon("--comm", "stress sampler=inprocess", "--sampler", "uprobe") as d:
            metrics = metrics_once_picked_up(d, w.pid)
            h.check(f'heapprofd_target_sampler{{pid="{w.pid}",comm="stress",sampler="inprocess"'
                    in metrics, "the rule's process is not on the in-process sampler:\n" +
                    "\n".join(l for l in metrics.splitlines() if "sampler" in l))
            d.profile(f"/debug/pprof/heap?pid={other.pid}")
            metrics = d.get("/metrics")[1].decode()
            h.check(f'heapprofd_target_sampler{{pid="{other.pid}",comm="exact",sampler="uprobe"'
                    in metrics, "a process no rule names is not on the default sampler")
            w.stop_and_check()
            other.finish()

    def test_redis_server_is_profiled_with_the_callers_of_malloc(self):
        """Debian's redis-server (jemalloc, linked) under the in-process sampler:
        its profile's leaves are redis's own allocation wrappers (zmalloc and
        friends, the callers of malloc), and no frame is the sampler's."""
        port = h.free_port()
        redis = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                                  "--save", "", "--appendonly", "no"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 10
            while subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True,
                                 text=True).stdout.strip() != "PONG":
                h.check(time.monotonic() < deadline and redis.poll() is None,
                        "redis-server did not answer PING")
                time.sleep(0.05)
            with h.Daemon("--sampler", "inprocess", "--sample-interval", "4096") as d:
                attach(d, redis.pid, comm="redis-server")
                out = subprocess.run(["redis-benchmark", "-p", str(port), "-t", "set,get", "-d",
                                      "128", "-P", "16", "-n", "50000", "-q"], capture_output=True,
                                     text=True, timeout=120)
                h.check(out.returncode == 0, f"redis-benchmark failed: {out.stderr}")
                prof = h.decode(d.profile(f"/debug/pprof/allocs?pid={redis.pid}"))
                leaves = {s.leaf() for s in prof.samples}
                h.check(any(l.startswith("zmalloc") for l in leaves),
                        f"no zmalloc* leaf in redis's profile: {sorted(leaves)[:20]}")
                frames = {f for s in prof.samples for f in s.frames}
                h.check(not any(f.startswith("hp_") for f in frames),
                        f"sampler frames in the profile: {sorted(frames)[:20]}")
            h.check(redis.poll() is None, "redis-server died")
        finally:
            redis.terminate()
            redis.wait(30)

    def test_a_forked_child_runs_on_and_a_rule_adopts_its_patch(self):
        """A child forked by a patched process inherits the patch and runs
        correctly; a target rule that picks it up adopts the inherited patch
        (the same sampler mapping, the entries as they are) and profiles it."""
        with h.Workload("forker") as w, \
                h.Daemon("--sampler", "inprocess", "--sample-interval", "4096",
                         "--comm", "hp_forked_child") as d:
            attach(d, w.pid, comm="forker")
            w.go()
            line = w._expect_line(10, "child PID")
            h.check(line.startswith("child "), f"forker said {line!r}")
            child = int(line.split()[1])
            metrics = metrics_once_picked_up(d, child)
            h.check(f'heapprofd_target_sampler{{pid="{child}",comm="hp_forked_child",'
                    f'sampler="inprocess"' in metrics,
                    "the rule's child is not on the in-process sampler:\n" +
                    "\n".join(l for l in metrics.splitlines() if "sampler" in l) +
                    f"\n{d.stderr()}")
            with open(f"/proc/{child}/maps") as f:
                mapped = [l for l in f if is_sampler_mapping(l)]
            h.check(len(mapped) == 3, f"the child has {len(mapped)} sampler mappings, not its "
                                      f"parent's 3 (a second one mapped?): {mapped}")
            time.sleep(1)
            prof = h.decode(d.profile(f"/debug/pprof/allocs?pid={child}"))
            h.check(any(s.leaf() == "child_allocates" for s in prof.samples),
                    f"no sample of child_allocates in the child's profile: "
                    f"{h.describe(prof.samples)}")
            w.finish(30)


    def test_targets_share_one_root_owned_sampler_file(self):
        """Two targets map the one file the daemon published in its
        sampler-dir (root's, 0444, in a directory only root can write), and
        the exact totals come through the probes registered once for it."""
        with tempfile.TemporaryDirectory(prefix="heapprofd-sdir-") as base:
            sdir = os.path.join(base, "run")
            with h.Daemon("--sample-interval", "1", "--sampler-dir", sdir) as d, \
                    h.Workload("exact") as a, h.Workload("exact") as b:
                for w in (a, b):
                    d.profile(f"/debug/pprof/heap?pid={w.pid}")  # attaches
                files = [f for f in os.listdir(sdir) if f.startswith("sampler-")]
                h.check(len(files) == 1, f"{sdir} holds {files}, not one sampler file")
                path = os.path.join(sdir, files[0])
                st, dst = os.stat(path), os.stat(sdir)
                h.check(st.st_uid == 0 and (st.st_mode & 0o777) == 0o444,
                        f"{path}: uid {st.st_uid} mode {st.st_mode & 0o777:o}")
                h.check(dst.st_uid == 0 and (dst.st_mode & 0o777) == 0o755,
                        f"{sdir}: uid {dst.st_uid} mode {dst.st_mode & 0o777:o}")
                for w in (a, b):
                    with open(f"/proc/{w.pid}/maps") as f:
                        mapped = {l.split()[4] for l in f if l.rstrip().endswith(path)}
                    h.check_equal(mapped, {str(st.st_ino)}, f"pid {w.pid}: inodes mapped from "
                                                           f"{path}")
                    w.run()
                    prof = h.decode(d.profile(f"/debug/pprof/allocs?pid={w.pid}"))
                    n = sum(s.values[0] for s in prof.samples if s.leaf() == "alloc_small")
                    h.check_equal(n, 1000, f"pid {w.pid}: alloc_small objects at interval 1")
                    w.finish()

    def test_a_process_in_another_mount_namespace_gets_its_own_memfd(self):
        """A target whose /run is another filesystem cannot open the shared
        file (or opens another file by that path): it is given a memfd and
        probes of its own, and its totals are exact all the same."""
        path = os.path.join(h.WORKLOADS, "exact")
        command = ["unshare", "-m", "--propagation", "private", "sh", "-c",
                   f"mount -t tmpfs tmpfs /run && exec {path}"]
        with h.Daemon("--sample-interval", "1") as d, h.Workload("exact", command=command) as w:
            d.profile(f"/debug/pprof/heap?pid={w.pid}")  # attaches
            with open(f"/proc/{w.pid}/maps") as f:
                mapped = [l for l in f if is_sampler_mapping(l)]
            h.check(mapped and all("/memfd:heapprofd-sampler" in l for l in mapped),
                    f"not mapped from a memfd of its own: {mapped}")
            w.run()
            prof = h.decode(d.profile(f"/debug/pprof/allocs?pid={w.pid}"))
            n = sum(s.values[0] for s in prof.samples if s.leaf() == "alloc_small")
            h.check_equal(n, 1000, "alloc_small objects at interval 1")
            w.finish()


if __name__ == "__main__":
    h.main()
