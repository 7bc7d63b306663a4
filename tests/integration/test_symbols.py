"""Symbols people can read: the C++ workload (tests/workloads/cxx_symbols.cpp)
profiled at --sample-interval 1 must show demangled short names, files and
lines that match `addr2line -f -i -C` for every frame of its own, inlined
calls as frames of their own, no allocator frames, and honest mappings.
Copies of it built here with their own build IDs must still be named when
stripped with their debug file under a build-id directory inside their own
mount namespace (at a path ours does not have), when stripped to .dynsym
alone, and when deleted after start. A symbolize=0 profile has no functions,
and upstream pprof names it from the binaries as heapprofd does."""

import os
import queue
import re
import shutil
import subprocess
import tempfile
import threading
import unittest

import heapprof_harness as h
from elf_layout import vaddr_of

HERE = os.path.dirname(os.path.abspath(__file__))
WORKLOAD_SRC = os.path.join(HERE, "..", "workloads")
UPSTREAM_PPROF = os.environ.get("UPSTREAM_PPROF", "")

# The flags CMake builds cxx_symbols with (tests/workloads/CMakeLists.txt).
CXX_FLAGS = ["-O1", "-g", "-fno-omit-frame-pointer", "-fno-optimize-sibling-calls"]

# What a name made of these looks like in a profile: never the allocator's.
ALLOCATOR_NAMES = {"malloc", "operator new", "operator new[]", "__libc_malloc"}

def build_id_of(path):
    """The GNU build ID readelf shows for a file."""
    out = subprocess.run(["readelf", "-n", path], capture_output=True, text=True).stdout
    m = re.search(r"Build ID: ([0-9a-f]+)", out)
    return m.group(1) if m else ""


def addr2line(path, vaddrs):
    """{vaddr: [(function, file, line)]}, innermost first, from addr2line -a -f -i -C."""
    out = subprocess.run(["addr2line", "-a", "-f", "-i", "-C", "-e", path] +
                         [f"{a:#x}" for a in vaddrs], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    result, current, i = {}, None, 0
    while i < len(out):
        if out[i].startswith("0x"):
            current = int(out[i], 16)
            result[current] = []
            i += 1
            continue
        where = re.sub(r" \(discriminator \d+\)$", "", out[i + 1])
        file, _, line = where.rpartition(":")
        result[current].append((out[i], file, int(line) if line.isdigit() else 0))
        i += 2
    return result


def check_lines_match_addr2line(profile, path, what):
    """Every location in path's mapping has addr2line's functions, files and lines."""
    mid, m = profile.mapping_of(path)
    locs = [(a, lines) for a, mp, lines in profile.locations.values() if mp == mid]
    vaddrs = [vaddr_of(path, a - m.start + m.offset) for a, _ in locs]
    oracle = addr2line(path, vaddrs)
    for (address, lines), vaddr in zip(locs, vaddrs):
        want = oracle[vaddr]
        where = f"{what}: location {address:#x} ({path} {vaddr:#x}): ours {lines}, addr2line {want}"
        h.check_equal(len(lines), len(want), where + ": number of lines")
        for ours, (func, file, line) in zip(lines, want):
            # addr2line names a frame without a linkage name (a lambda's
            # concrete code nested in its class) by DW_AT_name alone.
            bare = "::" not in func
            h.check(ours.system_name == func or (bare and ours.name.endswith("::" + func)),
                    where + f": name {ours.system_name!r} vs {func!r}")
            if line > 0:  # addr2line knows the line: ours must be the same
                h.check(ours.file == file and ours.line == line,
                        where + f": {ours.file}:{ours.line} vs {file}:{line}")
    return len(locs)


# --- Running workloads --------------------------------------------------------

class Spawned(h.Workload):
    """A workload started by any command line (unshare, a copy elsewhere)."""

    def __init__(self, argv, name):  # h.Workload.__init__ wants a built workload name
        self.name = name
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self._lines = queue.Queue()
        threading.Thread(target=self._read_stdout, daemon=True).start()
        line = self._expect_line(h.READY_TIMEOUT_S, "ready")
        m = re.fullmatch(r"ready (\d+)", line)
        h.check(m is not None, f"{name}: expected 'ready <pid>', got {line!r}")
        self.pid = int(m.group(1))
        h.check_equal(self.pid, self.proc.pid, f"{name}: pid in 'ready'")


def profile_of(d, w, *query):
    """Attaches to w, lets it run, and returns its heap profiles for each query."""
    d.profile(f"/debug/pprof/heap?pid={w.pid}")
    w.run()
    bodies = [d.profile(f"/debug/pprof/heap?pid={w.pid}{q}") for q in query]
    w.finish()
    return bodies


def compile_copy(directory, name, build_id, *extra):
    """Builds cxx_symbols again as directory/name with its own build ID, so the
    daemon's cache (keyed by build ID) cannot answer for it from another file."""
    out = os.path.join(directory, name)
    obj = os.path.join(directory, "handshake.o")
    if not os.path.exists(obj):
        subprocess.run(["gcc", "-c", "-O1", "-g", "-fno-omit-frame-pointer", "-o", obj,
                        os.path.join(WORKLOAD_SRC, "handshake.c")], check=True)
    subprocess.run(["g++"] + CXX_FLAGS + list(extra) +
                   [f"-Wl,--build-id=0x{build_id}", "-I", WORKLOAD_SRC, "-o", out,
                    os.path.join(WORKLOAD_SRC, "cxx_symbols.cpp"), obj], check=True)
    return out


# --- Fixtures -----------------------------------------------------------------

def start_daemon():
    return h.Daemon("--sample-interval", "1")


# The daemon the tests share and a scratch directory for the programs they
# build (setUpModule).
daemon = None
SCRATCH = None


def setUpModule():
    global daemon, SCRATCH
    SCRATCH = tempfile.mkdtemp(prefix="heapprof-symbols-")
    unittest.addModuleCleanup(shutil.rmtree, SCRATCH, ignore_errors=True)
    daemon = unittest.enterModuleContext(start_daemon())


def cxx_profiles():
    """The workload's symbolized and symbolize=0 profiles."""
    with h.Workload("cxx_symbols") as w:
        return profile_of(daemon, w, "", "&symbolize=0")


CXX_BINARY = os.path.join(h.WORKLOADS, "cxx_symbols")


# --- Tests --------------------------------------------------------------------


def upstream_pprof(body, *flags):
    """Runs upstream pprof with local symbolization from the binaries at their
    mapping paths (PPROF_BINARY_PATH=/); returns its output."""
    h.check(UPSTREAM_PPROF and os.access(UPSTREAM_PPROF, os.X_OK),
            f"upstream pprof not built at {UPSTREAM_PPROF!r} (Debian: "
            f"golang-github-google-pprof-dev; target upstream_pprof)")
    with tempfile.TemporaryDirectory(prefix="heapprof-pprof-") as tmp:
        path = os.path.join(tmp, "bare.pb.gz")
        with open(path, "wb") as f:
            f.write(body)
        env = dict(os.environ, HOME=tmp, PPROF_TMPDIR=tmp, PPROF_BINARY_PATH="/")
        r = subprocess.run([UPSTREAM_PPROF, "-symbolize=local"] + list(flags) + [path],
                           env=env, capture_output=True, text=True, timeout=60)
        h.check(r.returncode == 0, f"pprof -symbolize=local failed: {r.stderr}")
        return r.stdout


def top_names(text):
    """The function names of `pprof -top` output."""
    names = set()
    for line in text.splitlines():
        m = re.match(r"^\s*\S+\s+\S+%\s+\S+%\s+\S+\s+\S+%\s+(.*)$", line)
        if m:
            names.add(m.group(1).strip().removesuffix(" (inline)"))
    h.check(names, f"no rows in -top output:\n{text}")
    return names


class CxxTest(unittest.TestCase):
    """cxx_symbols.cpp, profiled once (symbolized and symbolize=0) for these tests."""

    @classmethod
    def setUpClass(cls):
        cls.cxx = cxx_profiles()

    def test_every_frame_matches_addr2line(self):
        n = check_lines_match_addr2line(h.decode(self.cxx[0]), CXX_BINARY, "cxx_symbols")
        h.check(n >= 6, f"only {n} locations in cxx_symbols")

    def test_traces_show_short_names_and_inlined_calls_as_frames(self):
        traces = h.traces(self.cxx[0])
        stacks = [[ln.strip() for ln in block.splitlines()[1:]]
                  for block in traces.split("-----------+")[1:]]
        frames = [[re.sub(r"^\S+\s+", "", s[0])] + s[1:] for s in stacks if s]

        def stack_with(leaf):
            for f in frames:
                if f and f[0] == leaf:
                    return f
            h.check(False, f"no stack with leaf {leaf!r} in:\n{traces}")

        grow = stack_with("shapes::MallocAllocator::allocate (inline)")
        for want in ["std::allocator_traits::allocate (inline)", "std::_Vector_base::_M_allocate (inline)",
                     "std::vector::_M_realloc_insert", "std::vector::push_back (inline)",
                     "shapes::Grid::grow", "main"]:
            h.check(want in grow, f"{want!r} missing from the vector's stack {grow}")
        h.check(grow.index("std::vector::_M_realloc_insert") < grow.index("shapes::Grid::grow"),
                f"frames out of order: {grow}")
        label = stack_with("shapes::make_label (inline)")
        h.check_equal(label[1:3], ["shapes::label_all", "main"], "the forced-inline stack")
        strings = [f for f in frames if "main::{lambda(int)#1}::operator()" in f]
        h.check(strings, f"no stack through the lambda in:\n{traces}")
        for f in frames:
            for name in f:
                h.check(name.split(" (inline)")[0] not in ALLOCATOR_NAMES,
                        f"allocator frame {name!r} in stack {f}")

    def test_mappings_are_honest_and_every_location_has_one(self):
        p = h.decode(self.cxx[0])
        for lid, (address, mapping, lines) in p.locations.items():
            h.check(mapping in p.mappings, f"location {lid} at {address:#x} has no mapping")
        _, own = p.mapping_of(CXX_BINARY)
        h.check_equal(own.build_id, build_id_of(CXX_BINARY), "cxx_symbols build ID")
        # _start comes from crt1.o, which has no line information: no [FL]
        h.check("[FN]" in own.flags, f"cxx_symbols mapping flags {own.flags}")
        for m in p.mappings.values():
            if "libstdc++" in m.file and not os.path.exists(
                    f"/usr/lib/debug/.build-id/{m.build_id[:2]}/{m.build_id[2:]}.debug"):
                h.check("[FL]" not in m.flags and "[IN]" not in m.flags,
                        f"libstdc++ has no debug file, yet flags {m.flags}")
            if m.file.startswith("/"):
                h.check(m.build_id != "", f"mapping of {m.file} without build ID")

    def test_symbolize_0_serves_addresses_that_pprof_names_alike(self):
        named, bare = self.cxx
        p = h.decode(bare)
        for lid, (address, mapping, lines) in p.locations.items():
            h.check(not lines, f"symbolize=0: location {lid} has lines {lines}")
            h.check(mapping in p.mappings, f"symbolize=0: location {lid} has no mapping")
        h.check(all(m.flags == "" for m in p.mappings.values()),
                f"symbolize=0: mappings claim symbols:\n{p.raw}")
        # pprof finds the binaries by their paths and checks their build IDs.
        theirs, ours = h.parse_raw(upstream_pprof(bare, "-raw")), h.decode(named)
        mid, _ = ours.mapping_of(CXX_BINARY)
        by_address = {a: lines for a, _, lines in theirs.locations.values()}
        names_ours, names_theirs = set(), set()
        for address, mapping, lines in ours.locations.values():
            if mapping != mid:
                continue  # libraries: pprof's symbolizer and ours may pick other aliases
            want = [ln.name for ln in by_address.get(address, [])]
            h.check_equal([ln.name for ln in lines], want, f"names at {address:#x}")
            names_ours |= {ln.name for ln in lines}
            names_theirs |= set(want)
        h.check_equal(names_theirs, names_ours, "cxx_symbols function names, pprof's vs ours")
        top_ours = top_names(h.pprof(named, "-top", "-nodecount=1000"))
        top_theirs = top_names(upstream_pprof(bare, "-top", "-nodecount=1000"))
        h.check(names_ours <= top_ours and names_theirs <= top_theirs,
                f"-top names: ours {sorted(top_ours)}, pprof's {sorted(top_theirs)}")


class BuiltProgramsTest(unittest.TestCase):
    """Programs built or changed at test time: their own names, debug files, deletions."""

    def test_symbolize_takes_0_or_1_only(self):
        for bad in ("2", "yes", "", "-1", "1x"):
            status, body = daemon.get(f"/debug/pprof/heap?pid=1&symbolize={bad}")
            h.check_equal(status, 400, f"symbolize={bad!r}")
            h.check_one_line_reason(body, f"symbolize={bad!r}")
            h.check(b"symbolize" in body, f"symbolize={bad!r}: reason {body!r} names no parameter")

    def test_stripped_binary_in_its_own_mount_namespace_uses_its_debug_file(self):
        tmp = SCRATCH
        binary = compile_copy(tmp, "ns_app", "a11ce5ec0000000000000000000000000000ee01")
        build_id = build_id_of(binary)
        debug = os.path.join(tmp, "debugroot", ".build-id", build_id[:2])
        os.makedirs(debug)
        subprocess.run(["objcopy", "--only-keep-debug", binary,
                        os.path.join(debug, build_id[2:] + ".debug")], check=True)
        subprocess.run(["strip", binary], check=True)
        # Inside: a tmpfs over an empty directory of ours holds the binary, and
        # the debug files the process sees are ours bind-mounted over /usr/lib/debug.
        inside = os.path.join(tmp, "nsroot")
        os.makedirs(inside)
        made_debug_dir = not os.path.isdir("/usr/lib/debug")
        if made_debug_dir:
            os.makedirs("/usr/lib/debug")
        script = (f"mount -t tmpfs tmpfs {inside} && mkdir {inside}/app && "
                  f"cp {binary} {inside}/app/ns_app && "
                  f"mount --bind {tmp}/debugroot /usr/lib/debug && exec {inside}/app/ns_app")
        try:
            with Spawned(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                         "ns_app") as w:
                path = f"{inside}/app/ns_app"
                h.check(not os.path.exists(path), f"{path} exists outside the namespace")
                (body,) = profile_of(daemon, w, "")
        finally:
            if made_debug_dir:
                os.rmdir("/usr/lib/debug")
        p = h.decode(body)
        _, m = p.mapping_of(path)
        h.check_equal(m.build_id, build_id, "ns_app build ID")
        lines = [ln for _, mp, ls in p.locations.values() for ln in ls]
        label = [ln for ln in lines if ln.name == "shapes::label_all"]
        h.check(label and label[0].file.endswith("cxx_symbols.cpp") and label[0].line > 0,
                f"shapes::label_all without its file and line from the debug file: {lines}")
        h.check("shapes::make_label" in p.names(), f"inlined make_label missing: {p.names()}")

    def test_binary_with_only_dynsym_is_named_without_files(self):
        tmp = SCRATCH
        binary = compile_copy(tmp, "dynsym_app", "a11ce5ec0000000000000000000000000000ee02",
                              "-rdynamic")
        subprocess.run(["strip", binary], check=True)
        with Spawned([binary], "dynsym_app") as w:
            (body,) = profile_of(daemon, w, "")
        p = h.decode(body)
        mid, m = p.mapping_of(binary)
        h.check("[FL]" not in m.flags and "[LN]" not in m.flags and "[IN]" not in m.flags,
                f".dynsym only, yet mapping flags {m.flags}")
        names = {ln.name for _, mp, ls in p.locations.values() if mp == mid for ln in ls}
        for want in ("shapes::label_all", "main"):
            h.check(want in names, f"{want} not named from .dynsym: {names}")
        files = {ln.file for _, mp, ls in p.locations.values() if mp == mid for ln in ls}
        h.check(files <= {""}, f"files without debug information: {files}")

    def test_binary_deleted_after_start_is_still_named(self):
        tmp = SCRATCH
        binary = compile_copy(tmp, "deleted_app", "a11ce5ec0000000000000000000000000000ee03")
        with Spawned([binary], "deleted_app") as w:
            os.unlink(binary)
            (body,) = profile_of(daemon, w, "")
        p = h.decode(body)
        _, m = p.mapping_of(binary)
        h.check_equal(m.build_id, "a11ce5ec0000000000000000000000000000ee03", "deleted_app build ID")
        lines = [ln for _, _, ls in p.locations.values() for ln in ls]
        label = [ln for ln in lines if ln.name == "shapes::label_all"]
        h.check(label and label[0].file.endswith("cxx_symbols.cpp"),
                f"deleted binary not named with files: {lines}")


if __name__ == "__main__":
    h.main()
