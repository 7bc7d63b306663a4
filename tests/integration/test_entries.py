"""Every allocation entry under every allocator: with --sample-interval 1,
each form of operator new and delete (tests/workloads/cxx_entries.cpp) is
counted exactly, at its caller, on both samplers, with glibc's allocator
(libstdc++'s operator new, which calls malloc: counted once), and with
jemalloc, tcmalloc and mimalloc, each preloaded and linked. Linked, the
workload also calls the allocator's own API (mallocx/rallocx/sdallocx/
dallocx, tc_malloc/tc_free/tc_new/tc_delete, mi_malloc/mi_zalloc_aligned/
mi_realloc/mi_free) directly: exact too. An operator new that throws
std::bad_alloc through the in-process sampler's wrapper is caught by the
program (the workload exits 0).

One daemon per sampler profiles the seven workloads one after the other
(about 1 s each)."""

import unittest

import heapprof_harness as h

LIBDIR = "/usr/lib/x86_64-linux-gnu/"
PRELOADS = {
    "jemalloc": LIBDIR + "libjemalloc.so.2",
    "tcmalloc": LIBDIR + "libtcmalloc_minimal.so.4",
    "mimalloc": LIBDIR + "libmimalloc.so.2",
}

# Expected totals per leaf of cxx_entries.cpp:
#   [alloc_objects, alloc_space, inuse_objects, inuse_space]
# 20 calls each; the in-use ones are those no delete form freed.
CXX_EXPECTED = {
    "new_plain": [20, 20 * 100, 5, 5 * 100],
    "new_array": [20, 20 * 200, 5, 5 * 200],
    "new_nothrow": [20, 20 * 300, 10, 10 * 300],
    "new_array_nothrow": [20, 20 * 400, 10, 10 * 400],
    "new_aligned": [20, 20 * 512, 3, 3 * 512],
    "new_array_aligned": [20, 20 * 1024, 3, 3 * 1024],
    "new_aligned_nothrow": [20, 20 * 576, 10, 10 * 576],
    "new_array_aligned_nothrow": [20, 20 * 640, 10, 10 * 640],
}
# The allocator's own API, linked builds only: 20 x 700 bytes, 15 freed;
# and 20 resizes from 50 to 5000 bytes (a resize is a free and an
# allocation), 15 freed; tcmalloc's is 20 x tc_new(5000) instead.
FAMILY_ALLOC = {"family_alloc": [20, 20 * 700, 5, 5 * 700]}
FAMILY_EXPECTED = {
    "jemalloc": {**FAMILY_ALLOC, "family_resize": [40, 20 * 50 + 20 * 5000, 5, 5 * 5000]},
    "tcmalloc": {**FAMILY_ALLOC, "family_resize": [20, 20 * 5000, 5, 5 * 5000]},
    "mimalloc": {**FAMILY_ALLOC, "family_resize": [40, 20 * 50 + 20 * 5000, 5, 5 * 5000]},
}

# The two std::bad_alloc thrown by new_throws(): libstdc++ allocates each
# with malloc (its 128-byte header and the 8-byte object), freed once caught.
THROWN = {"__cxa_allocate_exception": [2, 2 * 136, 0, 0]}

# The runs: (label, workload, its arguments, environment, expected totals).
# The workload throws std::bad_alloc from operator new unless told "no-throw":
# Debian's mimalloc aborts instead.
RUNS = [("glibc", "cxx_entries", [], {}, {**CXX_EXPECTED, **THROWN})]
for name, lib in PRELOADS.items():
    args, thrown = (["no-throw"], {}) if name == "mimalloc" else ([], THROWN)
    RUNS.append((f"{name} preloaded", "cxx_entries", args, {"LD_PRELOAD": lib},
                 {**CXX_EXPECTED, **thrown}))
    RUNS.append((f"{name} linked", f"cxx_entries_{name}", args, {},
                 {**CXX_EXPECTED, **FAMILY_EXPECTED[name], **thrown}))


def profile_all(sampler):
    """Profiles every run under one daemon with `sampler`; returns
    {label: (decoded heap profile, /proc/PID/maps, fell back)}."""
    out = {}
    with h.Daemon("--sample-interval", "1", "--sampler", sampler) as d:
        for label, workload, args, env, _ in RUNS:
            with h.Workload(workload, *args, env=env) as w:
                maps = w.maps()
                d.profile(f"/debug/pprof/heap?pid={w.pid}")  # attaches; may be empty
                w.run()
                heap = d.profile(f"/debug/pprof/heap?pid={w.pid}")
                w.finish()
            # A return probe armed by another process's links on the same
            # library (the kernel arms one for every consumer whose task
            # filter skips the call) would sit on the frame the workload
            # throws std::bad_alloc through: the next run waits for this
            # one's links to go (docs/sampler.md, "Exceptions").
            d.wait_detached(w.pid, f"{label} after its exit")
            fell_back = f"pid {w.pid}: in-process sampler not used" in d.stderr()
            out[label] = (h.decode(heap), maps, fell_back)
        d.check_alive()
    return out


def check_run(test, results, sampler):
    """Fails unless each run's totals per leaf are exactly its expected ones."""
    wrong = []
    for label, workload, args, env, expected in RUNS:
        profile, maps, fell_back = results[label]
        if env.get("LD_PRELOAD"):
            lib = env["LD_PRELOAD"].rsplit("/", 1)[1]
            h.check(lib in maps, f"{label}: {lib} is not in /proc/PID/maps:\n{maps}")
        if sampler == "inprocess" and fell_back:
            wrong.append(f"{label}: fell back to uprobes")
            continue
        totals = h.totals_by_leaf(profile.samples)
        bad = {fn: (want, totals.get(fn)) for fn, want in expected.items()
               if totals.get(fn) != want}
        extra = {fn: v for fn, v in totals.items() if fn not in expected and any(v)}
        if bad or extra:
            wrong.append(f"{label}: expected vs got per leaf {bad}; other leaves {extra}")
    h.check(not wrong, f"sampler {sampler}: totals per leaf "
            "[alloc_objects, alloc_space, inuse_objects, inuse_space] differ:\n  "
            + "\n  ".join(wrong))


class UprobeTest(unittest.TestCase):
    """The uprobe sampler: probes on each allocator's own definitions."""

    def test_every_form_of_new_and_delete_and_each_allocator_api_is_counted_exactly(self):
        check_run(self, profile_all("uprobe"), "uprobe")


class InprocessTest(unittest.TestCase):
    """The in-process sampler: a wrapper on every slot bound to an entry."""

    def test_every_form_of_new_and_delete_and_each_allocator_api_is_counted_exactly(self):
        check_run(self, profile_all("inprocess"), "inprocess")


if __name__ == "__main__":
    h.main()
