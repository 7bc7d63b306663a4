"""Other tools walk a profiled process's stack through the in-process
sampler as through a process without it (issue 34, part 3).

1. The sampler file: every function in it has symbols and CFI (an FDE
   covering it whole, read with readelf), and no wrapper of an allocating
   entry calls the allocator on its unsampled path: it jumps, so that no
   frame of the sampler is on the stack while the allocator runs
   (objdump). Fails on the code before the change: hp_wrap_malloc and the
   others called the allocator and checked its result.
2. gdb, attached to the `frames` workload (-O2, no frame pointers) with a
   breakpoint on libc's malloc for the workload's size, prints the same
   backtrace, frame for frame by name, before and after the process is put
   on the in-process sampler. The daemon runs at the largest interval
   (4 GiB), so that the stop is at a call the sampler does not sample: a
   sampled call (one in about interval/size calls at other intervals) has
   the wrapper's frame on the stack, which gdb cannot walk (it reads
   symbols and CFI only of modules in the loader's list; docs/sampler.md,
   "Frames other tools can walk"). Fails before the change: gdb showed
   `#1 0x... in ?? ()` and then garbage.
3. perf record --call-graph dwarf on the same workload, put on the sampler
   mapped from a memfd (`--sampler-dir none`, as a target in another mount
   namespace gets it), whose file perf cannot open: at least 95% of the
   samples inside libc's malloc have frames_leaf, its caller, on their
   stack. Fails before the change: 0%, the stack stopped at the wrapper.

About 20 s in all (perf records for 3 s; gdb attaches twice; two daemons).
"""

import os
import re
import subprocess
import tempfile
import unittest

import heapprof_harness as h

# Keep in step with tests/workloads/frames.c.
SIZE = 777
CHAIN = ["frames_leaf", "frames_inner", "frames_outer", "frames_loop", "main"]
# The largest interval the daemon takes: no call of the workload's is sampled.
NEVER = str(1 << 32)
# Only bounds a gdb that never stops: attaching and reading libc's symbols
# takes 1-5 s here.
GDB_TIMEOUT_S = 60
PERF_SECONDS = 3
# Of the perf samples in malloc, the share whose stack must reach the
# caller. A sampled call (777 / 524288 of them at the default interval) is
# the one kind that may stop at the sampler's memfd, which perf cannot read.
PERF_MIN_SHARE = 0.95
PERF_MIN_SAMPLES = 10
SAMPLER_SO = os.path.join(os.path.dirname(os.environ.get("HEAPPROFD", "")),
                          "sampler", "hp_sampler.so")


def run(cmd, timeout=GDB_TIMEOUT_S):
    """Runs cmd; fails with its output if it cannot be run or fails."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise h.Failure(f"{cmd[0]} is not installed (scripts/install-deps.sh)") from None
    except subprocess.TimeoutExpired:
        raise h.Failure(f"{' '.join(cmd)} did not finish within {timeout} s") from None
    h.check(r.returncode == 0, f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return r.stdout


# The breakpoint goes on malloc's second instruction, where %rdi is still
# the size. Not on its first: Linux treats an int3 in a process that has
# uprobes (the sampler's report probes) as a uprobe whenever any process has
# one registered on the same file and offset (handle_swbp() finds it by
# inode), and the uprobe sampler of tests run beside this one probes
# malloc's entry: gdb's trap is swallowed and it never stops.
GDB_BREAK = ("python a = int(gdb.parse_and_eval('(long)&__libc_malloc')); "
             "n = gdb.selected_inferior().architecture().disassemble(a)[0]['length']; "
             f"gdb.execute('break *%d if $rdi == {SIZE}' % (a + n))")


def gdb_backtrace(pid):
    """The function names of gdb's backtrace at the workload's malloc,
    from #1 (the caller of malloc) on."""
    out = run(["gdb", "-batch", "-nx", "-p", str(pid),
               "-ex", "set debuginfod enabled off", "-ex", GDB_BREAK,
               "-ex", "continue", "-ex", "bt 12"])
    frames = re.findall(r"^#(\d+)\s+(?:0x[0-9a-f]+ in )?(\S+) \(", out, re.M)
    h.check(frames and frames[0][1].endswith("malloc"),
            f"gdb did not stop in malloc:\n{out}")
    return [name for _, name in frames[1:]]


class SamplerFileTest(unittest.TestCase):
    """What a tool reading the mapped file finds in it."""

    def test_every_function_has_symbols_and_cfi(self):
        fdes = [(int(a, 16), int(b, 16)) for a, b in re.findall(
            r"FDE cie=\w+ pc=([0-9a-f]+)\.\.([0-9a-f]+)",
            run(["readelf", "--debug-dump=frames", SAMPLER_SO]))]
        funcs = []
        for line in run(["nm", "-S", "--defined-only", SAMPLER_SO]).splitlines():
            parts = line.split()
            if len(parts) == 4 and parts[2] in "tT":
                funcs.append((parts[3], int(parts[0], 16), int(parts[1], 16)))
        h.check(any(name == "hp_wrap_malloc" for name, _, _ in funcs),
                f"no symbol hp_wrap_malloc in {SAMPLER_SO}: {funcs}")
        bare = [name for name, lo, size in funcs
                if not any(a <= lo and lo + size <= b for a, b in fdes)]
        h.check_equal(bare, [], "functions of the sampler file without CFI")

    def test_no_wrapper_calls_the_allocator_when_it_does_not_sample(self):
        # The one call through the configuration's orig[] table in each
        # wrapper must be a jump: a call would leave the wrapper's frame
        # under the allocator's. (The slow paths, slow_*, call it.)
        text = run(["objdump", "-d", "--no-show-raw-insn", SAMPLER_SO])
        calls = []
        for m in re.finditer(r"^[0-9a-f]+ <(hp_wrap_\w+)>:\n(.*?)(?=\n\n|\Z)", text, re.M | re.S):
            if m.group(1) in ("hp_wrap_dlopen", "hp_wrap_dlmopen"):
                continue
            calls += [f"{m.group(1)}: {line.strip()}" for line in m.group(2).splitlines()
                      if re.search(r"\bcall\s+\*.*<hp_sampler_config", line)]
        h.check_equal(calls, [], "wrappers that call the allocator")


class GdbTest(unittest.TestCase):
    """gdb's backtrace at a malloc, before and after the attach."""

    def test_gdb_sees_the_same_frames_with_the_sampler(self):
        with h.Daemon("--sampler", "inprocess", "--sample-interval", NEVER) as d, \
                h.Workload("frames") as w:
            w.go()
            before = gdb_backtrace(w.pid)
            h.check_equal(before[:len(CHAIN)], CHAIN, "gdb's backtrace without the sampler")
            d.profile(f"/debug/pprof/heap?pid={w.pid}")
            h.check_equal(d.index_entry(w.pid).get("sampler"), "inprocess", "sampler")
            h.check("heapprofd-sampler" in w.maps() or "sampler-" in w.maps(),
                    "the sampler is not mapped")
            after = gdb_backtrace(w.pid)
            h.check_equal(after, before, "gdb's backtrace with the in-process sampler")


class PerfTest(unittest.TestCase):
    """perf's DWARF unwinding through malloc, the sampler in a memfd."""

    def test_perf_finds_the_callers_of_malloc(self):
        with tempfile.TemporaryDirectory(prefix="heapprof-perf-") as tmp, \
                h.Daemon("--sampler", "inprocess", "--sampler-dir", "none") as d, \
                h.Workload("frames") as w:
            w.go()
            d.profile(f"/debug/pprof/heap?pid={w.pid}")
            h.check("/memfd:heapprofd-sampler" in w.maps(), "the sampler is not in a memfd")
            data = os.path.join(tmp, "perf.data")
            run(["perf", "record", "-q", "-o", data, "--call-graph", "dwarf,4096", "-F", "1999",
                 "-p", str(w.pid), "--", "sleep", str(PERF_SECONDS)], timeout=120)
            script = run(["perf", "script", "-i", data, "-F", "ip,sym,dso"], timeout=120)
        in_malloc = reached = 0
        for block in script.split("\n\n"):
            lines = [line.split(None, 1)[1] for line in block.strip().splitlines()
                     if len(line.split(None, 1)) == 2]
            user = [x for x in lines if "[kernel.kallsyms]" not in x]
            # The innermost frame in libc's malloc (perf names inlined
            # frames without their file).
            if not user or not re.match(r"\S*malloc\S* \((inlined|\S*/libc\.so)", user[0]):
                continue
            in_malloc += 1
            reached += any(x.startswith("frames_leaf ") for x in user)
        print(f"  perf: {reached} of {in_malloc} samples in malloc reach frames_leaf",
              flush=True)
        h.check(in_malloc >= PERF_MIN_SAMPLES,
                f"only {in_malloc} perf samples in malloc (want {PERF_MIN_SAMPLES})")
        h.check(reached >= PERF_MIN_SHARE * in_malloc,
                f"{reached} of {in_malloc} perf samples in malloc reach frames_leaf "
                f"(want {PERF_MIN_SHARE:.0%})")


if __name__ == "__main__":
    h.main()
