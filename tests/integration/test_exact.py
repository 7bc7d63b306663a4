"""Exact profiles: with --sample-interval 1 every allocation of the exact
workload (tests/workloads/exact.c) is recorded, so the totals per allocating
function must equal the table below, for every allocator entry point
(malloc, free, calloc, realloc, realloc(NULL), posix_memalign, aligned_alloc,
reallocarray), with glibc's allocator and with jemalloc preloaded. Also checks
the stacks (main calls each function), /debug/pprof/allocs, debug=1 and that
`go tool pprof -top` and `-traces` read the profiles; and that glibc's
functions that jump to one another (reallocarray to realloc to malloc) are
counted once, at their caller, by threads switched out in the middle of them
(tests/workloads/tailcalls.c), also where another tool's return probes
hide return addresses on the stack."""

import contextlib
import os
import re
import unittest

import heapprof_harness as h
import perf_uretprobe

# Expected totals per leaf function of exact.c:
#   [alloc_objects, alloc_space, inuse_objects, inuse_space]
#
#   function              calls and sizes                          alloc             in use
#   alloc_small           1000 x malloc(100)                       1000  100000      1000  100000
#   alloc_big             10 x malloc(100000)                      10    1000000     10    1000000
#   alloc_freed           500 x malloc(64), all freed              500   32000       0     0
#   alloc_calloc          200 x calloc(4, 50)                      200   40000       200   40000
#   alloc_realloc         100 x malloc(10) + realloc(p, 300)       200   31000       100   30000
#   alloc_realloc_null    50 x realloc(NULL, 128)                  50    6400        50    6400
#   alloc_posix_memalign  20 x posix_memalign(&p, 64, 256)         20    5120        20    5120
#   alloc_aligned         30 x aligned_alloc(64, 512)              30    15360       30    15360
#   alloc_reallocarray    40 x reallocarray(NULL, 8, 16)           40    5120        40    5120
#
# realloc counts as free(old) + malloc(new): alloc_realloc allocates 100 x 10
# and 100 x 300 bytes and keeps only the 300-byte blocks.
EXPECTED = h.EXACT_EXPECTED
VALUE_NAMES = ["alloc_objects", "alloc_space", "inuse_objects", "inuse_space"]


def check_exact_totals(profile, what):
    """Fails unless every function of exact.c has exactly its EXPECTED totals."""
    totals = h.totals_by_leaf(profile.samples)
    wrong = []
    for fn, want in EXPECTED.items():
        got = totals.get(fn)
        if got != want:
            wrong.append(f"  {fn}: expected {want}, got {got}")
    if wrong:
        raise h.Failure(f"{what}: totals per leaf ({', '.join(VALUE_NAMES)}) differ:\n"
                        + "\n".join(wrong)
                        + f"\nall totals by leaf: {totals}\nsamples:\n"
                        + h.describe(profile.samples))


def profile_exact(env=None):
    """Runs exact under heapprofd --sample-interval 1; returns its profiles.

    The result holds the heap and allocs profiles (bytes and decoded), the
    debug=1 text and /proc/PID/maps of the workload, all taken after `done`.
    """
    out = {}
    with h.Daemon("--sample-interval", "1") as d, h.Workload("exact", env=env) as w:
        out["maps"] = w.maps()
        d.profile(f"/debug/pprof/heap?pid={w.pid}")  # attaches; may be empty
        w.run()
        out["heap"] = d.profile(f"/debug/pprof/heap?pid={w.pid}")
        out["allocs"] = d.profile(f"/debug/pprof/allocs?pid={w.pid}")
        status, body = d.get(f"/debug/pprof/heap?pid={w.pid}&debug=1")
        h.check_equal(status, 200, f"GET heap?pid={w.pid}&debug=1: status ({body[:200]!r})")
        out["debug1"] = body.decode("utf-8", "replace")
        w.finish()
        d.check_alive()
    out["heap_decoded"] = h.decode(out["heap"])
    out["allocs_decoded"] = h.decode(out["allocs"])
    return out


# tailcalls.c: 8 threads x 3000 rounds of one call of each kind, freed at once:
#   [alloc_objects, alloc_space, inuse_objects, inuse_space] per leaf.
TAILCALL_CALLS = 8 * 3000
TAILCALLS_EXPECTED = {
    "tail_reallocarray": [TAILCALL_CALLS, TAILCALL_CALLS * 120, 0, 0],
    "tail_realloc_null": [TAILCALL_CALLS, TAILCALL_CALLS * 200, 0, 0],
    "tail_malloc": [TAILCALL_CALLS, TAILCALL_CALLS * 72, 0, 0],
    "tail_jump": [TAILCALL_CALLS, TAILCALL_CALLS * 56, 0, 0],
}
# Where another tool's return probes go in the second run: a function that
# jumps to malloc, and one whose frame is in every stack.
OTHER_TOOL_URETPROBES = ["jump_to_malloc", "one_round"]


def profile_tailcalls(other_tool=False):
    """Runs tailcalls under heapprofd --sample-interval 1, with another
    tool's return probes if asked; returns its decoded allocs profile,
    taken after `done`."""
    with h.Daemon("--sample-interval", "1") as d, h.Workload("tailcalls") as w:
        d.profile(f"/debug/pprof/allocs?pid={w.pid}")  # attaches; may be empty
        path = os.path.join(h.WORKLOADS, "tailcalls")
        with (perf_uretprobe.uretprobes(w.pid, path, OTHER_TOOL_URETPROBES) if other_tool
              else contextlib.nullcontext()):
            w.run()
        allocs = d.profile(f"/debug/pprof/allocs?pid={w.pid}")
        w.finish()
        d.check_alive()
    return h.decode(allocs)


def check_tailcalls(profile, what):
    """Fails unless each call of tailcalls.c is counted once, at its caller,
    called from one_round, worker and start_thread. A leaf in [uprobes] (a
    return probe's trampoline in place of the caller's return address) or a
    count off by any call fails."""
    totals = h.totals_by_leaf(profile.samples)
    wrong = [f"  {fn}: expected {want}, got {totals.get(fn)}"
             for fn, want in TAILCALLS_EXPECTED.items() if totals.get(fn) != want]
    extra = {fn: v for fn, v in totals.items() if fn not in TAILCALLS_EXPECTED and any(v)}
    bad = [s for s in profile.samples if s.leaf() not in TAILCALLS_EXPECTED and any(s.values)]
    h.check(not wrong and not extra,
            f"{what}: totals per leaf ({', '.join(VALUE_NAMES)}) differ:\n"
            + "\n".join(wrong) + f"\nunexpected leaves: {extra}\nsamples with them:\n"
            + h.describe(bad))
    callers = [s for s in profile.samples
               if s.frames[1:4] != ["one_round", "worker", "start_thread"]]
    h.check(not callers, f"{what}: samples not called from one_round <- worker <- start_thread:\n"
            + h.describe(callers))


class GlibcTest(unittest.TestCase):
    """exact.c with glibc's allocator, profiled once for all these tests."""

    @classmethod
    def setUpClass(cls):
        cls.glibc = profile_exact()

    def test_heap_profile_has_the_four_sample_types_and_the_period(self):
        h.check_heap_shape(self.glibc["heap_decoded"], 1, "heap profile")

    def test_every_allocator_entry_point_is_counted_exactly(self):
        check_exact_totals(self.glibc["heap_decoded"], "heap profile (glibc malloc)")

    def test_main_is_the_caller_of_each_allocating_function(self):
        samples = [s for s in self.glibc["heap_decoded"].samples if s.leaf() in EXPECTED]
        h.check(samples, "no samples with a leaf from exact.c")
        bad = [s for s in samples if len(s.frames) < 2 or s.frames[1] != "main"]
        h.check(not bad, "samples whose second frame is not main:\n" + h.describe(bad))

    def test_pprof_top_and_traces_name_every_function(self):
        heap = self.glibc["heap"]
        top = h.pprof(heap, "-top", "-nodefraction=0", "-sample_index=alloc_space")
        tr = h.traces(heap, "-sample_index=alloc_space")
        for fn in list(EXPECTED) + ["main"]:
            h.check(re.search(rf"\b{fn}\b", top), f"go tool pprof -top does not name {fn}:\n{top}")
            h.check(re.search(rf"\b{fn}\b", tr), f"go tool pprof -traces does not name {fn}:\n{tr}")

    def test_heap_profile_defaults_to_inuse_space(self):
        top = h.pprof(self.glibc["heap"], "-top")
        h.check(re.search(r"^Type: inuse_space$", top, re.M),
                f"heap profile: -top header should say Type: inuse_space:\n{top[:400]}")

    def test_allocs_profile_has_the_same_totals(self):
        p = self.glibc["allocs_decoded"]
        h.check_heap_shape(p, 1, "allocs profile")
        check_exact_totals(p, "allocs profile")

    def test_allocs_profile_defaults_to_alloc_space(self):
        p = self.glibc["allocs_decoded"]
        h.check_equal(p.default_type, "alloc_space",
                      "allocs profile: default sample type ([dflt] in pprof -raw)")
        top = h.pprof(self.glibc["allocs"], "-top")
        h.check(re.search(r"^Type: alloc_space$", top, re.M),
                f"allocs profile: -top header should say Type: alloc_space:\n{top[:400]}")

    def test_debug_1_is_the_legacy_text_with_the_same_totals(self):
        text = self.glibc["debug1"]
        h.check(text.startswith("heap profile:"),
                f"debug=1 should start with 'heap profile:', got {text[:200]!r}")
        # Go: heap profile: <inuse objs>: <inuse bytes> [<alloc objs>: <alloc bytes>] @ heap/<2R>
        m = re.match(r"heap profile: (\d+): (\d+) \[(\d+): (\d+)\] @ heap/(\d+)", text)
        h.check(m is not None, f"debug=1 header not in Go's form: {text.splitlines()[0]!r}")
        inuse_n, inuse_b, alloc_n, alloc_b, rate = (int(x) for x in m.groups())
        sums = [sum(s.values[i] for s in self.glibc["heap_decoded"].samples) for i in range(4)]
        h.check_equal([alloc_n, alloc_b, inuse_n, inuse_b], sums,
                      "debug=1 header totals vs the proto profile's totals "
                      "[alloc_objects, alloc_space, inuse_objects, inuse_space]")
        # Go writes heap/<2*R> (a quirk kept from the C++ heap profiler); R is fine too.
        h.check(rate in (1, 2), f"debug=1 header: heap/{rate}, expected heap/2 (Go's 2*R) or heap/1")


class TailcallsTest(unittest.TestCase):
    """glibc's allocator entries that jump to one another, from threads."""

    def test_tail_calls_of_threads_switched_out_mid_call_are_counted_once_at_their_caller(self):
        check_tailcalls(profile_tailcalls(), "tailcalls")

    def test_another_tool_s_return_probes_hide_no_caller(self):
        check_tailcalls(profile_tailcalls(other_tool=True),
                        f"tailcalls with return probes on {OTHER_TOOL_URETPROBES} (perf events)")

    def test_each_continuation_is_known_on_the_unsampled_path_too(self):
        """Nothing sampled (the largest interval): glibc's reallocarray jumps to
        realloc once per call, and the probes must tell each of these entries
        from a call of the program although their threads are switched out
        between the two entries. A miss counts the resize twice down (harmless
        to the estimates, waits being memoryless, but a sign that the record of
        the first entry was lost) and would be recorded at a second sample."""
        with h.Daemon("--sample-interval", "4294967296", "--sampler", "uprobe") as d, \
                h.Workload("tailcalls", "resize") as w:
            d.profile(f"/debug/pprof/allocs?pid={w.pid}")  # attaches
            before = d.metric("heapprofd_nested_calls_total")
            w.run()
            after = d.metric("heapprofd_nested_calls_total")
            w.finish()
            d.check_alive()
        h.check_equal(after - before, TAILCALL_CALLS,
                      "heapprofd_nested_calls_total: continuations of reallocarray(p, 1, n) "
                      "into realloc, one per call (8 threads x 3000, 4 more yielding the CPU)")


class JemallocTest(unittest.TestCase):
    """exact.c with jemalloc preloaded, profiled once for these tests."""

    @classmethod
    def setUpClass(cls):
        cls.jemalloc = profile_exact({"LD_PRELOAD": h.JEMALLOC})

    def test_jemalloc_is_mapped_in_the_preloaded_workload(self):
        maps = self.jemalloc["maps"]
        h.check("libjemalloc.so" in maps,
                f"LD_PRELOAD={h.JEMALLOC}: libjemalloc is not in /proc/PID/maps:\n{maps}")

    def test_every_allocator_entry_point_is_counted_exactly_with_jemalloc(self):
        check_exact_totals(self.jemalloc["heap_decoded"], "heap profile (jemalloc preloaded)")


if __name__ == "__main__":
    h.main()
