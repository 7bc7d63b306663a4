"""Sampled profiles: at the default sample interval (524288 bytes) the
estimates of the sampled workload (tests/workloads/sampled.c) are unbiased
and as tight as Poisson sampling allows: for each allocating function,
alloc_objects and alloc_space are within 5 standard deviations of the truth,
in-use of alloc_4k (half of its blocks kept) likewise, and the in-use of the
functions that free everything is exactly 0."""

import math
import unittest

import heapprof_harness as h

# The default mean sampling interval R, in bytes (design: Go's and jemalloc's).
DEFAULT_INTERVAL = 524288

# What sampled.c does: function -> (calls N, size s, blocks kept after done).
WORKLOAD = {
    "alloc_4k": (200000, 4096, 100000),
    "alloc_1m": (500, 1 << 20, 0),
    "alloc_tiny": (2000000, 16, 0),
}

# How many standard deviations an estimate may stray: with 8 estimates per
# run, a correct profiler fails about once in 10^5 runs (normal tails; the
# estimates are sums of many independent draws).
SIGMAS = 5.0


def sigma_of_count(n, size, interval):
    """The standard deviation of the estimated count of n allocations of size.

    Each allocation of size s is sampled independently (exponential gaps are
    memoryless) with probability p = 1 - exp(-s/R) and then weighs 1/p, so the
    estimate is (1/p) * Binomial(n, p): its variance is n(1-p)/p, its standard
    deviation sqrt(n(1-p)/p). The bytes estimate is s times that:
    s * sqrt(n(1-p)/p).
    """
    p = 1.0 - math.exp(-size / interval)
    return math.sqrt(n * (1.0 - p) / p)


def profile_sampled():
    """Runs sampled under heapprofd with the default interval; returns the
    decoded heap profile taken after `done`."""
    with h.Daemon() as d, h.Workload("sampled") as w:
        d.profile(f"/debug/pprof/heap?pid={w.pid}")  # attaches; may be empty
        w.run(timeout=150)
        body = d.profile(f"/debug/pprof/heap?pid={w.pid}")
        w.finish()
        d.check_alive()
    return h.decode(body)


def check_estimate(fn, what, got, truth, sigma):
    """Fails unless |got - truth| <= SIGMAS * sigma, printing all three."""
    h.check(abs(got - truth) <= SIGMAS * sigma,
            f"{fn} {what}: estimate {got}, truth {truth}, off by {got - truth} "
            f"= {(got - truth) / sigma:+.2f} sigma (sigma {sigma:.1f}, bound {SIGMAS} sigma)")


def totals(profile):
    """Totals by leaf of profile."""
    return h.totals_by_leaf(profile.samples)


class SampledTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sampled = profile_sampled()

    def test_profile_uses_the_default_interval_as_its_period(self):
        h.check_heap_shape(self.sampled, DEFAULT_INTERVAL, "sampled heap profile")

    def test_every_allocating_function_has_samples(self):
        t = totals(self.sampled)
        missing = [fn for fn in WORKLOAD if fn not in t]
        h.check(not missing, f"no samples for {missing}; totals by leaf: {t}")

    def test_alloc_estimates_are_within_five_sigma_of_the_truth(self):
        t = totals(self.sampled)
        errors = []
        for fn, (n, size, _) in WORKLOAD.items():
            got = t.get(fn, [0, 0, 0, 0])
            sd = sigma_of_count(n, size, DEFAULT_INTERVAL)
            for what, value, truth, sigma in (("alloc_objects", got[0], n, sd),
                                              ("alloc_space", got[1], n * size, sd * size)):
                try:
                    check_estimate(fn, what, value, truth, sigma)
                except h.Failure as e:
                    errors.append(str(e))
        h.check(not errors, "\n".join(errors))

    def test_inuse_estimate_of_the_half_kept_blocks_is_within_five_sigma(self):
        n, size, kept = WORKLOAD["alloc_4k"]
        got = totals(self.sampled).get("alloc_4k", [0, 0, 0, 0])
        sd = sigma_of_count(kept, size, DEFAULT_INTERVAL)
        check_estimate("alloc_4k", "inuse_objects", got[2], kept, sd)
        check_estimate("alloc_4k", "inuse_space", got[3], kept * size, sd * size)

    def test_functions_that_free_everything_have_nothing_in_use(self):
        t = totals(self.sampled)
        for fn in ("alloc_1m", "alloc_tiny"):
            got = t.get(fn)
            h.check(got is not None and got[0] > 0, f"{fn}: no samples; totals by leaf: {t}")
            h.check(got[2] == 0 and got[3] == 0,
                    f"{fn}: every block was freed, so in use should be [0, 0]; "
                    f"got inuse_objects {got[2]}, inuse_space {got[3]} (all values {got})")

    def test_every_sample_of_the_workload_has_main_as_caller(self):
        ours = [s for s in self.sampled.samples if s.leaf() in WORKLOAD]
        bad = [s for s in ours if len(s.frames) < 2 or s.frames[1] != "main"]
        h.check(not bad, "samples whose second frame is not main:\n" + h.describe(bad))


if __name__ == "__main__":
    h.main()
