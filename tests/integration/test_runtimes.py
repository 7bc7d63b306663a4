"""Runtimes people run, with Debian's packages: stacks through JIT code and
through frame-pointer code without CFI, JIT names from perf maps, musl, and
stripped static binaries.

- node (--perf-basic-prof): Buffers allocated from a named JS function. The
  walk goes through V8's builtins (in the node binary, without CFI) and JIT
  code by frame pointers: at least 90% of allocated bytes have stacks that
  reach `main` or `start_thread`, and the JS function appears by name.
- OpenJDK 17 (-XX:+PreserveFramePointer): direct ByteBuffers from a named
  method. Stacks reach `start_thread` through interpreted and JIT frames,
  which `jcmd PID Compiler.perfmap` names (Debian has no perf-map agent;
  the JDK's own command writes the map).
- Python 3.11 (Debian's python3): bytearrays from a named function; the
  interpreter has CFI, so stacks reach `main` (3.11 writes no perf map:
  3.12's -X perf would add Python function names).
- musl, static and dynamic: no CFI for its start code and no frame
  pointers; complete stacks must be counted as complete, with exact totals.
- node and Java again once they have exited: the profile kept then has
  the JIT names the last one served while they ran had (the perf map can
  no longer be read), and unnamed JIT code reads "[jit node]".
- busybox-static (stripped, static): 422 with a reason and a log line, not
  404; a stripped static glibc program (exact_static) with a debug file of
  its build ID is profiled from that file's symbols, with exact totals.

The fraction each runtime reaches is printed: the figures for docs and notes.
"""

import os
import re
import shutil
import subprocess
import tempfile
import unittest

import heapprof_harness as h

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "..", "workloads", "runtimes")
JAVA_HOME = "/usr/lib/jvm/java-17-openjdk-amd64"  # Debian's openjdk-17-jdk-headless
PYTHON = "/usr/bin/python3"  # Debian's python3 (3.11 on Debian 12), not one on PATH
BUSYBOX = "/bin/busybox"     # Debian's busybox-static
# How long the daemon's log line may take to reach us after the answer.
LOG_TIMEOUT_S = 5.0

# Names of the outermost frames a whole stack reaches: a program's main,
# glibc's call of it (main may tail-call: node's main jumps to node::Start,
# python3's to Py_BytesMain), or the start of a thread (glibc's start_thread).
ROOTS = {"main", "__libc_start_call_main", "start_thread"}
# The share of allocated bytes whose stacks must reach a root (the issue's
# bar): the rest are stacks of threads that stop early for reasons of
# their own (a frame-pointer chain broken in a runtime's stub).
MIN_REACHING = 0.90


def reaching_fraction(samples, roots=ROOTS):
    """(fraction of alloc_space bytes whose stack has a `roots` frame, total bytes)."""
    total = sum(s.values[1] for s in samples)
    reach = sum(s.values[1] for s in samples if any(f in roots for f in s.frames))
    return (reach / total if total else 0.0), total


def unwind_metrics(d):
    """The counters of /metrics, {name without heapprofd_: value}, after
    checking that every stack walked is counted once by how it ended."""
    values = {k[len("heapprofd_"):]: v for k, v in d.metrics().items()}
    ends = ["unwind_stacks_complete_total", "stacks_truncated_total", "stack_read_errors_total"]
    ends += [k for k in values if k.startswith("unwind_stopped_")]
    counted = ", ".join(f"{k}={values.get(k, 0):g}" for k in ends)
    h.check_equal(sum(values.get(k, 0) for k in ends), values["unwind_stacks_with_tables_total"],
                  f"stacks counted by how they ended ({counted}) against stacks walked")
    return values


def run_profiled(name, command, interval, after_done=None, env=None, kept=None):
    """Runs `command` (speaking the handshake) under heapprofd at `interval`;
    returns (the allocs profile's bytes, unwind metrics, pid). after_done(pid)
    runs between "done" and the scrape (to have a runtime write its map).
    Given a list `kept`, the profile kept once the process has exited is
    appended to it (its bytes)."""
    with h.Daemon("--sample-interval", str(interval)) as d, \
            h.Workload(name, command=command, env=env) as w:
        try:
            d.profile(f"/debug/pprof/heap?pid={w.pid}")  # attaches
            w.run()
            if after_done:
                after_done(w.pid)
            body = d.profile(f"/debug/pprof/allocs?pid={w.pid}")
            values = unwind_metrics(d)
            w.finish(timeout=30)
            if kept is not None:
                d.wait_detached(w.pid, f"{name} after its exit")
                kept.append(d.profile(f"/debug/pprof/allocs?pid={w.pid}"))
            d.check_alive()
        finally:
            remove_perf_map(w.pid)
    return body, values, w.pid


def check_jit_names_kept(what, live, kept):
    """The JIT frames of the profile kept after exit have the names the last
    one served while the process ran had: read from the perf map then, the
    file can no longer be opened once the process is gone (issue 26). An
    unnamed one reads "[jit EXE]", never a bare "[jit]"."""
    def names(body):
        return {n for s in h.decode(body).samples for n, f in frames_with_files(s)
                if f == "[jit]"}
    before, after = names(live), names(kept)
    named = {n for n in before if not n.startswith("[jit")}
    h.check(named, f"{what}: no named JIT frame while it ran: {sorted(before)[:10]}")
    h.check(named <= after, f"{what}: JIT names lost once it exited: "
                            f"{sorted(named - after)[:10]} (kept: {sorted(after)[:10]})")
    h.check("[jit]" not in after, f"{what}: an unnamed JIT frame reads '[jit]' after exit")
    print(f"{what}: {len(named)} JIT names while it ran, all kept after exit; unnamed as "
          f"{sorted(n for n in after if n.startswith('[jit'))}")


def remove_perf_map(pid):
    """Removes /tmp/perf-PID.map: runtimes leave it behind."""
    try:
        os.unlink(f"/tmp/perf-{pid}.map")
    except FileNotFoundError:
        pass


def report(what, samples, values, roots=ROOTS):
    """Prints the figures of one runtime and returns the reaching fraction."""
    frac, total = reaching_fraction(samples, roots)
    walked = values.get("unwind_stacks_with_tables_total", 0)
    complete = values.get("unwind_stacks_complete_total", 0)
    print(f"{what}: {frac:.1%} of {total} allocated bytes have stacks reaching "
          f"{' or '.join(sorted(roots))}; {complete:g} of {walked:g} stacks walked to their end; "
          f"frames by frame pointer {values.get('unwind_frames_by_frame_pointer_total', 0):g}",
          flush=True)
    return frac


def require(path, package):
    h.check(os.access(path, os.X_OK), f"{path} is missing (Debian package {package}; "
                                      f"scripts/install-deps.sh installs it)")


def frames_with_files(sample):
    """[(name, file), ...] of a sample, leaf first (JIT frames have the file "[jit]")."""
    return [(ln.name, ln.file) for loc in sample.locations for ln in loc.lines]


# --- node --------------------------------------------------------------------

def node_binary():
    path = shutil.which("node") or shutil.which("nodejs")
    h.check(path is not None, "node is missing (Debian package nodejs; "
                              "scripts/install-deps.sh installs it)")
    return path


# --- Java --------------------------------------------------------------------


# --- Python ------------------------------------------------------------------


# --- musl --------------------------------------------------------------------

MUSL_EXPECTED = {  # [alloc_objects, alloc_space, inuse_objects, inuse_space]
    "alloc_in_main_thread": [1000, 1000000, 1000, 1000000],
    "alloc_in_thread": [1000, 3000000, 500, 1500000],
}
MUSL_CALLERS = {"alloc_in_main_thread": "main", "alloc_in_thread": "thread_main"}


def check_musl(kind):
    name = f"musl_threads_{kind}"
    path = os.path.join(h.WORKLOADS, name)
    h.check(os.access(path, os.X_OK), f"{path} is not built: musl-gcc is missing (Debian "
                                      f"package musl-tools; scripts/install-deps.sh installs it)")
    with h.Daemon("--sample-interval", "1") as d, h.Workload(name) as w:
        d.profile(f"/debug/pprof/heap?pid={w.pid}")
        w.run()
        body = d.profile(f"/debug/pprof/heap?pid={w.pid}")
        values = unwind_metrics(d)
        w.finish()
        d.check_alive()
    samples = h.decode(body).samples
    # musl's thread start has no name in its stripped libc.so: the thread's function stands in.
    report(f"musl ({kind})", samples, values, roots={"main", "thread_main"})
    h.check_equal(h.totals_by_leaf(samples), MUSL_EXPECTED, f"musl {kind}: totals by leaf")
    for leaf, caller in MUSL_CALLERS.items():
        bad = [s for s in samples if s.leaf() == leaf and caller not in s.frames[1:3]]
        h.check(not bad, f"musl {kind}: {leaf} stacks without {caller}:\n" + h.describe(bad))
    walked = values["unwind_stacks_with_tables_total"]
    h.check_equal(values["unwind_stacks_complete_total"], walked,
                  f"musl {kind}: stacks counted complete, of {walked:g} walked "
                  f"(every stack ends at musl's start code); counters {values}")


# --- Stripped static binaries ---------------------------------------------------


class RuntimesTest(unittest.TestCase):
    def test_node_stacks_reach_main_through_jit_code_with_js_names(self):
        node = node_binary()
        # --interpreted-frames-native-stack gives each interpreted function a
        # trampoline of its own in the map, so it is named before V8 compiles it.
        kept = []
        body, values, _ = run_profiled(
            "node", [node, "--perf-basic-prof", "--interpreted-frames-native-stack",
                     os.path.join(SCRIPTS, "buffers.js")], 1, kept=kept)
        check_jit_names_kept("node", body, kept[0])
        samples = h.decode(body).samples
        h.check(samples, "the node profile has no samples")
        frac = report("node " + subprocess.run([node, "--version"], capture_output=True,
                                               text=True).stdout.strip(), samples, values)
        h.check(frac >= MIN_REACHING,
                f"node: only {frac:.1%} of allocated bytes have stacks reaching main or a "
                f"thread's start (want {MIN_REACHING:.0%}); largest stacks:\n" +
                h.describe(sorted(samples, key=lambda s: -s.values[1])[:10]))
        named = [s for s in samples if any("allocateNamedBuffers" in f for f in s.frames)]
        h.check(named, "node: no stack names the JS function allocateNamedBuffers (from "
                       "/tmp/perf-PID.map); largest stacks:\n" +
                h.describe(sorted(samples, key=lambda s: -s.values[1])[:5]))
        by_named = sum(s.values[1] for s in named) / sum(s.values[1] for s in samples)
        print(f"node: {by_named:.1%} of allocated bytes have allocateNamedBuffers on their stack")

    def test_jvm_stacks_reach_start_thread_through_named_jit_frames(self):
        java, javac, jcmd = (os.path.join(JAVA_HOME, "bin", t) for t in ("java", "javac", "jcmd"))
        for tool in (java, javac, jcmd):
            require(tool, "openjdk-17-jdk-headless")
        with tempfile.TemporaryDirectory(prefix="heapprof-java-") as classes:
            r = subprocess.run([javac, "-d", classes, os.path.join(SCRIPTS, "AllocDirect.java")],
                               capture_output=True, text=True, timeout=120)
            h.check(r.returncode == 0, f"javac failed: {r.stderr}")

            def write_perf_map(pid):
                r = subprocess.run([jcmd, str(pid), "Compiler.perfmap"], capture_output=True,
                                   text=True, timeout=60)
                h.check(r.returncode == 0, f"jcmd {pid} Compiler.perfmap failed: {r.stdout}{r.stderr}")

            kept = []
            body, values, _ = run_profiled(
                "java", [java, "-XX:+PreserveFramePointer", "-XX:MaxDirectMemorySize=1g",
                         "-cp", classes, "AllocDirect"], 65536, after_done=write_perf_map,
                kept=kept)
        check_jit_names_kept("java", body, kept[0])
        samples = h.decode(body).samples
        h.check(samples, "the java profile has no samples")
        frac = report("OpenJDK 17 (-XX:+PreserveFramePointer)", samples, values)
        h.check(frac >= MIN_REACHING,
                f"java: only {frac:.1%} of allocated bytes reach start_thread; stacks:\n" +
                h.describe(sorted(samples, key=lambda s: -s.values[1])[:10]))
        # The direct buffers' stacks: Unsafe_AllocateMemory0 <- JIT frames <- JavaCalls.
        ours = [(s.values, fs) for s, fs in ((s, frames_with_files(s)) for s in samples)
                if any(n == "Unsafe_AllocateMemory0" for n, _ in fs)]
        h.check(ours, "java: no stack goes through Unsafe_AllocateMemory0")
        through_jit = [(v, fs) for v, fs in ours
                       if any(f == "[jit]" for _, f in fs) and any(n in ROOTS for n, _ in fs)]
        h.check(sum(v[1] for v, _ in through_jit) >= MIN_REACHING * sum(v[1] for v, _ in ours),
                f"java: direct buffer stacks that pass JIT frames and reach start_thread: "
                f"{len(through_jit)} of {len(ours)}")
        unnamed = {n for _, fs in ours for n, f in fs if f == "[jit]" and n == "[jit java]"}
        names = {n for _, fs in ours for n, f in fs if f == "[jit]"}
        h.check(any("java.nio.ByteBuffer.allocateDirect" in n for n in names),
                f"java: the JIT frames are not named from the perf map (jcmd Compiler.perfmap): "
                f"{sorted(names)[:20]}")
        print(f"java: JIT frame names include {sorted(names)[:6]}; unnamed: {sorted(unnamed)}")

    def test_python_311_stacks_reach_main(self):
        require(PYTHON, "python3")
        body, values, _ = run_profiled(
            "python3", [PYTHON, os.path.join(SCRIPTS, "blocks.py")], 65536)
        samples = h.decode(body).samples
        h.check(samples, "the python3 profile has no samples")
        frac = report("Python " + subprocess.run([PYTHON, "--version"], capture_output=True,
                                                 text=True).stdout.strip(), samples, values)
        h.check(frac >= MIN_REACHING,
                f"python3: only {frac:.1%} of allocated bytes reach main; stacks:\n" +
                h.describe(sorted(samples, key=lambda s: -s.values[1])[:10]))
        h.check(any("_PyEval_EvalFrameDefault" in s.frames for s in samples),
                "python3: no stack goes through the interpreter loop")

    def test_musl_static_stacks_are_complete_and_counted_so(self):
        check_musl("static")

    def test_musl_dynamic_stacks_are_complete_and_counted_so(self):
        check_musl("dynamic")

    def test_a_stripped_static_busybox_is_422_with_a_reason_and_a_log_line(self):
        require(BUSYBOX, "busybox-static")
        proc = subprocess.Popen([BUSYBOX, "sleep", "60"])
        try:
            with h.Daemon() as d:
                status, body = d.get(f"/debug/pprof/heap?pid={proc.pid}")
                h.check_equal(status, 422, f"status for busybox (body {body!r})")
                h.check_one_line_reason(body, "busybox refusal")
                h.check(b"statically linked" in body and b"malloc" in body,
                        f"the reason should say why: {body!r}")
                want = f"heapprofd: process {proc.pid} cannot be profiled"
                d.wait_until(lambda: want in d.stderr(), LOG_TIMEOUT_S, f"the log line {want!r}")
                d.check_alive()
        finally:
            proc.kill()
            proc.wait()

    def test_a_stripped_static_program_is_profiled_from_its_debug_file(self):
        """exact_static (exact.c, linked statically) stripped, its symbols in
        /usr/lib/debug/.build-id/ of a mount namespace of its own (so nothing is
        written to the host's): the same exact totals as from glibc's libc.so."""
        built = os.path.join(h.WORKLOADS, "exact_static")
        h.check(os.access(built, os.X_OK), f"{built} is not built")
        h.check(shutil.which("unshare"), "unshare is missing (Debian package util-linux)")
        with tempfile.TemporaryDirectory(prefix="heapprof-debug-") as tmp:
            stripped, debug = os.path.join(tmp, "exact_static"), os.path.join(tmp, "exact.debug")
            subprocess.run(["objcopy", "--only-keep-debug", built, debug], check=True)
            subprocess.run(["objcopy", "--strip-all", built, stripped], check=True)
            out = subprocess.run(["readelf", "-n", built], capture_output=True, text=True).stdout
            m = re.search(r"Build ID: ([0-9a-f]+)", out)
            h.check(m is not None, f"exact_static has no build ID:\n{out}")
            build_id = m.group(1)
            tree = os.path.join(tmp, "debug-root", ".build-id", build_id[:2])
            os.makedirs(tree)
            shutil.copy(debug, os.path.join(tree, build_id[2:] + ".debug"))
            script = f"mount --bind {tmp}/debug-root /usr/lib/debug && exec {stripped}"
            with h.Daemon("--sample-interval", "1") as d, h.Workload(
                    "exact_static (stripped)",
                    command=["unshare", "--mount", "--propagation", "private", "sh", "-c",
                             script]) as w:
                d.profile(f"/debug/pprof/heap?pid={w.pid}")
                w.run()
                body = d.profile(f"/debug/pprof/heap?pid={w.pid}")
                w.finish()
                d.check_alive()
        totals = h.totals_by_leaf(h.decode(body).samples)
        for leaf, want in h.EXACT_EXPECTED.items():
            h.check_equal(totals.get(leaf), want, f"{leaf} totals (all leaves: {totals})")


if __name__ == "__main__":
    h.main()
