"""The .eh_frame unwinder against gdb: sampled stacks of code without frame
pointers must be the stacks gdb's backtrace shows at the same malloc calls.

1. The unwind workload (tests/workloads/unwind.c, unwind_tail.c and
   libunwind_shlib.so, all -O2 -fomit-frame-pointer -g) runs under heapprofd
   --sample-interval 1 and, separately, under gdb with a breakpoint on
   malloc's first instruction whose stop hook dumps gdb's backtrace when the
   size argument is one of the workload's five site sizes. Each site's
   sampled stack must equal gdb's, frame for frame, from gdb's #1 (#0 is
   malloc; our leaf is malloc's caller) to the outermost frame, past main
   to _start (`set backtrace past-main on`). "Equal" (same_frame): the
   same code address in the same file for every frame, and the same
   function name in the workload's own files; gdb's inline and tail-call
   frames, which are not on the machine stack, are left out
   (comparable_gdb_frames). The five sites: a 14-frame chain crossing the
   shared library both ways with 5-deep recursion and a VLA frame, a tail
   call, an alloca frame, a signal handler (see the test of that site for
   what is compared past the signal frame), and a malloc inside the library.
2. Debian's python3 (no .symtab: many of its functions have no name) runs a
   script whose allocate_here() allocates 100 KB bytes objects, under
   heapprofd at a 65536-byte interval: at least 90% of its samples (by count
   of stacks and by bytes) must be 8+ frames deep and end where a process
   starts (main, __libc_start_call_main, __libc_start_main or _start), and
   the stack of allocate_here's malloc must match gdb's at that malloc in at
   least 90% of gdb's frames, by address (the figure is printed).
3. /metrics after each run: the heapprofd_unwind_* counters are printed, and
   stacks must have been walked with tables.

The comparison is by address because names alone cannot be: the same code
can have several names (gdb names libc's frames from DWARF:
__GI___libc_malloc, __libc_start_main_impl; heapprofd may use the symbol
table: malloc, __libc_start_main), and python3's static functions have no
name at all. Addresses are compared as (file, file offset): gdb's
frame pc and our location address (a return address minus one, see
docs/design.md) + 1. gdb's process and ours map the files at different
addresses (ASLR), so each side's addresses are turned into file offsets with
its own mappings (gdb's from /proc/PID/maps at the stop, ours from the
profile's mappings).
"""

import atexit
import os
import shutil
import subprocess
import tempfile
import unittest

import heapprof_harness as h

# --- What the workload does (keep in step with tests/workloads/unwind.c) ----

SITE_COUNT = 3  # allocations per site
# size -> (site, the function that calls malloc)
SITES = {
    1111: ("deep chain through the library, recursion and a VLA frame", "alloc_deep"),
    2222: ("a tail call (tail_caller jumps to tail_callee)", "alloc_after_tail"),
    3333: ("under an alloca frame", "alloc_under_alloca"),
    4444: ("in a signal handler", "alloc_in_handler"),
    5555: ("inside the shared library", "lib_alloc"),
}
WORKLOAD = "unwind"
SHLIB = "libunwind_shlib.so"
# Files whose functions have symbols on both sides: there names must match too.
NAMED_FILES = (WORKLOAD, SHLIB)

# gdb's frame types (gdb.Frame.type(): gdb.NORMAL_FRAME, ...).
GDB_NORMAL, GDB_INLINE, GDB_TAILCALL, GDB_SIGTRAMP = 0, 2, 3, 4
GDB_TYPE_NAMES = {0: "normal", 1: "dummy", 2: "inline", 3: "tailcall", 4: "sigtramp",
                  5: "arch", 6: "sentinel"}

# Where a process starts: the outermost frames of a complete stack.
START_NAMES = {"main", "__libc_start_call_main", "__libc_start_main",
               "__libc_start_main_impl", "_start"}

# --- Debian's python3 -------------------------------------------------------

PYTHON = "/usr/bin/python3"  # Debian's (package python3), not one on PATH
PY_INTERVAL = 65536
PY_BYTES = 100000        # b"x" * PY_BYTES: malloc(PY_BYTES + 33) in 3.11
PY_COUNT_PROFILED = 2000  # ~200 MB allocated, ~3000 samples; at most 64 kept
PY_COUNT_GDB = 2
PY_MIN_DEPTH = 8
PY_MIN_FRACTION = 0.90

# The allocating script; it speaks the workloads' handshake (handshake.h).
# allocate_here is called from Holder.__init__, which list(map(Holder, ...))
# calls from C.
PY_SCRIPT = f"""\
import os, sys

def allocate_here(count):
    kept = []
    for _ in range(count):
        kept.append(b"x" * {PY_BYTES})
        if len(kept) > 64:
            del kept[:32]
    return len(kept)

class Holder:
    def __init__(self, count):
        self.kept = allocate_here(count)

count = int(sys.argv[1])
sys.stdout.write(f"ready {{os.getpid()}}\\n")
sys.stdout.flush()
sys.stdin.readline()
# Through C code and back (list, map, the type call of Holder, its __init__):
# interpreter frames with more C frames between them than a plain call.
holders = list(map(Holder, [count]))
sys.stdout.write("done\\n")
sys.stdout.flush()
sys.stdin.readline()
"""

# --- gdb ---------------------------------------------------------------------

GDB_TIMEOUT_S = 60

# Runs inside gdb (its Python API walks the same frames `bt` prints, with
# their types, which the text of `bt` does not say reliably). SIZES is
# prepended. The breakpoint is on malloc's first instruction (`*malloc`), so
# %rdi is the size; it is set once libc is loaded (at __libc_start_main) so
# that `malloc` means libc's and not a PLT stub. It never stops the program.
GDB_DUMP = r'''
import gdb

def _maps():
    out = []
    with open("/proc/%d/maps" % gdb.selected_inferior().pid) as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) == 6:
                lo, hi = (int(x, 16) for x in parts[0].split("-"))
                out.append((lo, hi, int(parts[2], 16), parts[5].strip()))
    return out

class _Malloc(gdb.Breakpoint):
    def stop(self):
        size = int(gdb.parse_and_eval("$rdi"))
        if size not in SIZES:
            return False
        maps = _maps()
        print("GDB-STOP %d" % size)
        frame, level = gdb.newest_frame(), 0
        while frame is not None:
            pc = frame.pc()
            m = next((m for m in maps if m[0] <= pc < m[1]), None)
            where = "%s %#x" % (m[3], pc - m[0] + m[2]) if m else "- -1"
            print("GDB-FRAME %d %d %#x %s %s" % (level, frame.type(), pc,
                                                  frame.name() or "??", where))
            frame, level = frame.older(), level + 1
        print("GDB-END")
        return False

class _Start(gdb.Breakpoint):
    def stop(self):
        _Malloc("*malloc", internal=True)
        return False

_Start("__libc_start_main", internal=True)
'''


class GdbFrame:
    """One frame of gdb's backtrace."""

    def __init__(self, level, ftype, pc, name, path, offset):
        self.level, self.type, self.pc, self.name = level, ftype, pc, name
        self.file = os.path.basename(path) if path != "-" else None
        self.offset = offset  # pc as an offset in self.file, or -1

    def __repr__(self):
        return (f"#{self.level} {GDB_TYPE_NAMES.get(self.type, self.type)} {self.name} "
                f"{self.file}+{self.offset:#x}")


def gdb_backtraces(argv, sizes, stdin_text):
    """Runs argv under gdb with stdin_text as its stdin; returns
    {size: [backtraces, each [GdbFrame] from #0]} of every malloc of one of
    sizes."""
    with tempfile.TemporaryDirectory(prefix="heapprof-gdb-") as tmp:
        script = os.path.join(tmp, "dump.py")
        with open(script, "w") as f:
            f.write(f"SIZES = {set(sizes)!r}\n" + GDB_DUMP)
        stdin_path = os.path.join(tmp, "stdin")
        with open(stdin_path, "w") as f:
            f.write(stdin_text)
        cmd = ["gdb", "-batch", "-nx",
               "-ex", "set debuginfod enabled off",
               "-ex", "set breakpoint pending on",
               "-ex", "set backtrace past-main on",
               "-ex", "handle SIGUSR1 nostop noprint pass",
               "-x", script, "-ex", "run", "--args"] + list(argv)
        env = dict(os.environ)
        env.pop("DEBUGINFOD_URLS", None)
        with open(stdin_path) as stdin:
            try:
                r = subprocess.run(cmd, stdin=stdin, capture_output=True, env=env,
                                   timeout=GDB_TIMEOUT_S)
            except FileNotFoundError:
                raise h.Failure("gdb is not installed (Debian: gdb)") from None
            except subprocess.TimeoutExpired:
                raise h.Failure(f"gdb did not finish within {GDB_TIMEOUT_S} s: "
                                f"{' '.join(cmd)}") from None
    out = r.stdout.decode("utf-8", "replace")
    err = r.stderr.decode("utf-8", "replace")
    h.check("exited normally" in out + err,
            f"the program did not exit normally under gdb (status {r.returncode}); "
            f"command: {' '.join(cmd)}\nstdout:\n{out}\nstderr:\n{err}")
    stacks, current = {}, None
    for line in out.splitlines():
        if line.startswith("GDB-STOP "):
            current = []
            stacks.setdefault(int(line.split()[1]), []).append(current)
        elif line.startswith("GDB-FRAME ") and current is not None:
            _, level, ftype, pc, name, path, offset = line.split(" ", 6)
            current.append(GdbFrame(int(level), int(ftype), int(pc, 16), name, path,
                                    int(offset, 16) if offset != "-1" else -1))
        elif line == "GDB-END":
            current = None
    return stacks


def comparable_gdb_frames(bt):
    """gdb's frames past #0 (malloc) that exist on the machine stack:
    without inline frames (they share their pc with the real frame that
    follows) and tail-call frames (gdb infers them from DWARF call-site
    information; a function that jumped to another has no frame left, so no
    stack walk can see it: glibc's __pthread_kill_internal on the signal
    path is one)."""
    return [f for f in bt[1:] if f.type not in (GDB_INLINE, GDB_TAILCALL)]


# --- Our side: profiles with addresses ---------------------------------------

class OurFrame:
    """One location of a sample: address, the file it is in, its offset
    there (of the address itself, a return address minus one) and the
    function name heapprofd gave it (None if none)."""

    def __init__(self, address, file, offset, name):
        self.address, self.file, self.offset, self.name = address, file, offset, name

    def __repr__(self):
        return f"{self.name or '??'} {self.file}+{self.offset:#x}"


class OurSample:
    def __init__(self, values, frames):
        self.values, self.frames = values, frames

    def __repr__(self):
        return f"{self.values}: " + " <- ".join(map(repr, self.frames))


def our_samples(profile_bytes):
    """The samples of a profile with each frame's address, file and offset
    (h.Sample keeps locations; this adds where each is in its file)."""
    p = h.decode(profile_bytes)
    samples = []
    for s in p.samples:
        frames = []
        for loc in s.locations:
            name = loc.lines[0].name if loc.lines else None
            m = p.mappings.get(loc.mapping)
            if m is None:
                frames.append(OurFrame(loc.address, None, -1, name))
            else:
                frames.append(OurFrame(loc.address, os.path.basename(m.file),
                                       loc.address - m.start + m.offset, name))
        samples.append(OurSample(s.values, frames))
    return samples


def same_frame(ours, theirs):
    """True if our frame is gdb's: same file and code address (ours is a
    return address minus one, gdb's pc the return address itself, or for the
    frame a signal interrupted, the pc; heapprofd subtracts one there too),
    and in the workload's files the same function name."""
    if ours is None or theirs is None:
        return False
    if ours.file != theirs.file or ours.offset < 0 or ours.offset + 1 != theirs.offset:
        return False
    if ours.file in NAMED_FILES and ours.name != theirs.name:
        return False
    return True


def side_by_side(ours, theirs):
    """Both stacks, one frame a line, for failure messages."""
    lines = [f"  {'':2} {'heapprofd (leaf first)':52} gdb (from #1)"]
    for i in range(max(len(ours), len(theirs))):
        o = ours[i] if i < len(ours) else None
        t = theirs[i] if i < len(theirs) else None
        mark = "==" if same_frame(o, t) else "!="
        lines.append(f"  {mark} {repr(o) if o else '-':52} {repr(t) if t else '-'}")
    return "\n".join(lines)


def matching_frames(ours, theirs):
    """How many of gdb's frames our stack has at the same position."""
    return sum(1 for i, t in enumerate(theirs) if i < len(ours) and same_frame(ours[i], t))


def metrics(daemon):
    """The heapprofd_unwind_* values of /metrics: {name: value}."""
    return {k: v for k, v in daemon.metrics().items() if k.startswith("heapprofd_unwind_")}


def print_metrics(what, values):
    print(f"{what}: " + ", ".join(f"{k[len('heapprofd_'):]}={v:g}"
                                  for k, v in sorted(values.items())), flush=True)


def check_walked_with_tables(values, at_least, what):
    name = "heapprofd_unwind_stacks_with_tables_total"
    h.check(name in values, f"{what}: /metrics has no {name}: {values}")
    h.check(values[name] >= at_least,
            f"{what}: {name} = {values[name]:g}, expected at least {at_least}")


# --- Fixtures ------------------------------------------------------------------

def profile_under_heapprofd(argv, interval, endpoint):
    """Workload argv, run once under heapprofd --sample-interval `interval`:
    (its profile from `endpoint` as samples with addresses, unwind metrics)."""
    with h.Daemon("--sample-interval", str(interval)) as d, h.Workload(*argv) as w:
        d.profile(f"/debug/pprof/heap?pid={w.pid}")  # attaches; may be empty
        w.run()
        body = d.profile(f"/debug/pprof/{endpoint}?pid={w.pid}")
        w.finish()
        values = metrics(d)
        d.check_alive()
    return our_samples(body), values


def profile_workload():
    """The unwind workload under heapprofd --sample-interval 1."""
    return profile_under_heapprofd([WORKLOAD], 1, "heap")


def gdb_workload():
    """gdb's backtraces at the workload's mallocs: {size: [backtraces]}."""
    return gdb_backtraces([os.path.join(h.WORKLOADS, WORKLOAD)], SITES, "go\n\n")


def python_script():
    """The allocating script, in a file that lives as long as the test."""
    tmp = tempfile.mkdtemp(prefix="heapprof-py-")
    atexit.register(shutil.rmtree, tmp, True)
    path = os.path.join(tmp, "allocate.py")
    with open(path, "w") as f:
        f.write(PY_SCRIPT)
    return path


def python_argv(script, count):
    h.check(os.access(PYTHON, os.X_OK), f"{PYTHON} is missing (Debian package python3)")
    # -I -S: no user site, no site module, no environment: fewer stray imports.
    return [os.path.realpath(PYTHON), "-I", "-S", script, str(count)]


def profile_python(script):
    """python3 running allocate_here under heapprofd at PY_INTERVAL, its allocs profile."""
    # An absolute path as the workload name: os.path.join keeps it as it is.
    return profile_under_heapprofd(python_argv(script, PY_COUNT_PROFILED), PY_INTERVAL, "allocs")


def gdb_python(script):
    """gdb's backtraces at allocate_here's malloc(PY_BYTES + 33): b"x" * n
    is PyObject_Malloc(offsetof(PyBytesObject, ob_sval) + 1 + n), which
    passes sizes over 512 to malloc. Fails if no malloc had that size."""
    size = PY_BYTES + 33
    stacks = gdb_backtraces(python_argv(script, PY_COUNT_GDB), [size], "go\n\n").get(size, [])
    h.check(len(stacks) >= PY_COUNT_GDB,
            f"gdb saw {len(stacks)} malloc({size}) calls of python3, expected "
            f"{PY_COUNT_GDB} (has b'x' * n another allocation size in this Python?)")
    return stacks


# --- Tests: the workload ----------------------------------------------------

def site_samples(t, size):
    """Our samples of one site: those whose objects all have its size."""
    samples, _ = t.workload
    return [s for s in samples if s.values[0] and s.values[1] == size * s.values[0]]


def site_backtrace(t, size):
    """gdb's backtrace at the site (all its mallocs have the same one)."""
    stacks = t.workload_gdb.get(size, [])
    h.check(len(stacks) == SITE_COUNT,
            f"gdb stopped {len(stacks)} times at malloc({size}), expected {SITE_COUNT}")
    for bt in stacks[1:]:
        h.check([(f.name, f.offset) for f in bt] == [(f.name, f.offset) for f in stacks[0]],
                f"gdb's backtraces at malloc({size}) differ:\n{stacks[0]}\n{bt}")
    return stacks[0]


def check_site(t, size):
    """Fails unless the site's one sample (3 objects) in test t's profile
    has gdb's stack."""
    what, leaf = SITES[size]
    ours = site_samples(t, size)
    h.check(len(ours) == 1,
            f"site {size} ({what}): expected 1 sample of {SITE_COUNT} x {size} bytes, got "
            f"{len(ours)}:\n" + "\n".join(map(repr, t.workload[0])))
    h.check_equal(ours[0].values, [SITE_COUNT, SITE_COUNT * size] * 2,
                  f"site {size} ({what}): sample values")
    theirs = comparable_gdb_frames(site_backtrace(t, size))
    h.check(theirs and theirs[0].name == leaf,
            f"site {size} ({what}): gdb's #1 is not {leaf}: {theirs}")
    h.check(any(f.name == "main" for f in theirs), f"site {size}: gdb never reached main")
    frames = ours[0].frames
    ok = len(frames) == len(theirs) and matching_frames(frames, theirs) == len(theirs)
    h.check(ok, f"site {size} ({what}): the sampled stack is not gdb's "
                f"({len(frames)} frames, gdb {len(theirs)}):\n" + side_by_side(frames, theirs))
    return frames, theirs


# --- Tests: python3 -----------------------------------------------------------

def python_ends_at_start(sample, gdb_outermost):
    """True if the sample's outermost frame is where a process starts: by
    name, or at gdb's outermost frame (_start) by address."""
    if not sample.frames:
        return False
    last = sample.frames[-1]
    return last.name in START_NAMES or same_frame(last, gdb_outermost)


class WorkloadTest(unittest.TestCase):
    """The unwind workload's sites, profiled once and run once under gdb."""

    @classmethod
    def setUpClass(cls):
        cls.workload = profile_workload()
        cls.workload_gdb = gdb_workload()

    def test_the_deep_chain_through_the_library_matches_gdb(self):
        # 14 frames to main: exe -> library -> exe callback -> 5 x recurse ->
        # a VLA frame (CFA from %rbp) -> the leaf.
        frames, theirs = check_site(self, 1111)
        names = [f.name for f in theirs]
        h.check(names.count("recurse") == 5 and "vla_frame" in names and "lib_chain_2" in names
                and names.index("main") >= 13,
                f"the deep site is not the chain the workload means: {names}")

    def test_the_tail_called_function_returns_to_the_callers_caller_as_in_gdb(self):
        # tail_caller jumped to tail_callee: it is on neither stack, and
        # tail_callee's caller is lib_to_exe in the library.
        frames, theirs = check_site(self, 2222)
        names = [f.name for f in theirs]
        h.check("tail_caller" not in names and names[:3] == ["alloc_after_tail", "tail_callee",
                                                             "lib_to_exe"],
                f"the tail-call site is not the chain the workload means: {names}")

    def test_the_alloca_frame_matches_gdb(self):
        check_site(self, 3333)

    def test_the_signal_handler_stack_goes_through_the_signal_frame_as_in_gdb(self):
        # Compared, frame for frame: the handler's frames (alloc_in_handler,
        # on_sigusr1); the signal frame, whose pc is libc's __restore_rt (gdb's
        # <signal handler called>; our name for it does not matter, its address
        # does: the return address the kernel gave the handler, minus one); then
        # the interrupted frames, starting with the exact pc the signal
        # interrupted in libc (__pthread_kill_implementation after tgkill), raise,
        # and the workload's signal_chain_2 ... main ... _start. gdb's tail-call
        # frame __pthread_kill_internal (inferred, not on the stack) is left out.
        frames, theirs = check_site(self, 4444)
        types = [f.type for f in theirs]
        h.check(GDB_SIGTRAMP in types and theirs[types.index(GDB_SIGTRAMP) - 1].name == "on_sigusr1",
                f"gdb's backtrace has no signal frame after the handler: {theirs}")

    def test_the_allocation_inside_the_shared_library_matches_gdb(self):
        check_site(self, 5555)

    def test_every_workload_stack_ends_at_start(self):
        samples, _ = self.workload
        bad = [s for s in samples if not s.frames or s.frames[-1].name != "_start"]
        h.check(samples and not bad,
                "samples whose outermost frame is not _start:\n" + "\n".join(map(repr, bad)))

    def test_the_workload_stacks_were_walked_with_tables(self):
        _, values = self.workload
        print_metrics("unwind metrics after the workload", values)
        # Each of the 5 x 3 sampled allocations was walked with the tables.
        check_walked_with_tables(values, len(SITES) * SITE_COUNT, "workload")


class PythonTest(unittest.TestCase):
    """Debian's python3 running allocate_here, profiled once and run once under gdb."""

    @classmethod
    def setUpClass(cls):
        script = python_script()
        cls.python = profile_python(script)
        cls.python_gdb = gdb_python(script)

    def test_python_stacks_go_through_the_interpreter_down_to_the_start(self):
        samples, _ = self.python
        outermost = comparable_gdb_frames(self.python_gdb[0])[-1]
        h.check(samples, "the python3 profile has no samples")
        good = [s for s in samples
                if len(s.frames) >= PY_MIN_DEPTH and python_ends_at_start(s, outermost)]
        by_count = len(good) / len(samples)
        total_bytes = sum(s.values[1] for s in samples)
        by_bytes = sum(s.values[1] for s in good) / total_bytes if total_bytes else 0.0
        print(f"python3: {len(good)} of {len(samples)} stacks ({by_count:.1%}), "
              f"{by_bytes:.1%} of sampled bytes, are {PY_MIN_DEPTH}+ frames deep and end "
              f"at the start", flush=True)
        bad = [s for s in samples if s not in good]
        h.check(by_count >= PY_MIN_FRACTION and by_bytes >= PY_MIN_FRACTION,
                f"python3: only {by_count:.1%} of stacks and {by_bytes:.1%} of bytes are "
                f"{PY_MIN_DEPTH}+ frames deep and end at the start; the others:\n"
                + "\n".join(map(repr, bad[:20])))
        interpreter = [s for s in good if any(f.name == "_PyEval_EvalFrameDefault"
                                              for f in s.frames)]
        h.check(interpreter, "no python3 stack goes through _PyEval_EvalFrameDefault:\n"
                             + "\n".join(map(repr, samples[:20])))

    def test_python_allocate_here_stack_matches_gdb(self):
        theirs = comparable_gdb_frames(self.python_gdb[0])
        samples, _ = self.python
        # Our samples of that malloc: the leaf is gdb's #1 (in PyObject_Malloc).
        candidates = [s for s in samples if s.frames and same_frame(s.frames[0], theirs[0])]
        h.check(candidates, f"no python3 sample has gdb's #1 {theirs[0]} as leaf; samples:\n"
                            + "\n".join(map(repr, samples[:20])))
        best = max(candidates, key=lambda s: (matching_frames(s.frames, theirs), s.values[1]))
        matched = matching_frames(best.frames, theirs)
        print(f"python3: {matched} of {len(theirs)} of gdb's frames match "
              f"(our stack: {len(best.frames)} frames, {best.values[0]} allocations, "
              f"{best.values[1]} bytes):\n" + side_by_side(best.frames, theirs), flush=True)
        h.check(matched >= PY_MIN_FRACTION * len(theirs),
                f"python3: only {matched} of {len(theirs)} of gdb's frames match:\n"
                + side_by_side(best.frames, theirs))

    def test_the_python_stacks_were_walked_with_tables(self):
        _, values = self.python
        print_metrics("unwind metrics after python3", values)
        check_walked_with_tables(values, 1, "python3")


if __name__ == "__main__":
    h.main()
