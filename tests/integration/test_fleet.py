"""A fleet of 100 targets of 512 stacks each (fleet_worker.c), profiled at
interval 1, as a backend scrapes them (issues 32 and 36):
- a scrape of one target costs its own rows: beside 100 others it takes
  within 1.3x of its time beside one;
- SIGTERM ends the daemon within 2 s, and a restart on its pinned maps
  adopts every target with its counts;
- the 100 others exit at once: every one is let go of, and scrapes of the
  live target meanwhile take within 1.5x of their time before.
Times are the lower quartile of 31 scrapes, each side measured in turn on
the same 2-core machine, which five other sessions share: their bursts
of load moved medians of 15 scrapes by 1.7x between two runs of the same
code, while the lower quartile tracks what a scrape itself costs. The old
code took 8x (issue 32). About 40 s here (2 cores shared with other work): most
of it starting and attaching the workers."""

import os
import shutil
import signal
import statistics
import time
import unittest

import heapprof_harness as h

# The fleet: one target measured, beside this many others.
OTHERS = 100
STACKS = 512
# Scrapes whose lower quartile is compared.
SCRAPES = 31
# How much slower a scrape may be beside OTHERS targets than beside one,
# and while they exit than before. Reading one target's rows by key costs
# the same whatever the others hold; the rest is CPU the reaper and the
# other sessions of a shared 2-core machine take, which the quartile damps.
# The walk of every row this replaced took 8x here (issue 32).
BESIDE_BOUND = 1.3
DURING_EXITS_BOUND = 1.5
# From SIGTERM to the daemon's exit (issue 36; systemd's TimeoutStopSec
# in systemd/heapprofd.service says more, for a loaded machine).
STOP_BOUND_S = 2.0


def quartile(times):
    """The lower quartile of `times`."""
    return statistics.quantiles(times, n=4)[0]


def scrape_quartile(d, pid, n=SCRAPES):
    """The lower quartile of the seconds of n scrapes of pid, and the last
    profile."""
    times, body = [], None
    for _ in range(n):
        t0 = time.monotonic()
        body = d.profile(f"/debug/pprof/heap?pid={pid}")
        times.append(time.monotonic() - t0)
    return quartile(times), body


def start_workers(d, n):
    """n fleet workers, each attached and done allocating."""
    workers = []
    try:
        for _ in range(n):
            w = h.Workload("fleet_worker", STACKS)
            workers.append(w)
            d.profile(f"/debug/pprof/heap?pid={w.pid}")
            w.go()
        for w in workers:
            w.wait_done()
    except BaseException:
        for w in workers:
            w.kill()
        raise
    return workers


def inuse_objects(body):
    """The in-use objects of a profile."""
    return sum(s.values[2] for s in h.decode(body).samples)


class FleetTest(unittest.TestCase):
    def test_a_fleet_is_scraped_stopped_adopted_and_reaped(self):
        pin = f"/sys/fs/bpf/heapprofd-test-fleet-{os.getpid()}"
        args = ("--sample-interval", "1", "--pin-dir", pin, "--max-targets", str(OTHERS + 8))
        workers = []
        try:
            d = h.Daemon(*args)
            d.__enter__()
            try:
                workers = start_workers(d, 2)
                one, mine = workers[0], workers[1]
                scrape_quartile(d, mine.pid, 3)  # symbols cached
                alone, body = scrape_quartile(d, mine.pid)
                h.check_equal(inuse_objects(body), STACKS, "in-use objects of the measured target")
                workers += start_workers(d, OTHERS - 1)
                beside, body = scrape_quartile(d, mine.pid)
                h.check_equal(inuse_objects(body), STACKS, "the same beside the fleet")
                h.check(beside <= BESIDE_BOUND * alone,
                        f"a scrape beside {OTHERS} targets took {beside * 1e3:.1f} ms, beside one "
                        f"{alone * 1e3:.1f} ms: over {BESIDE_BOUND}x")
                t0 = time.monotonic()
                d.proc.send_signal(signal.SIGTERM)
                d.proc.wait(30)
                stop = time.monotonic() - t0
                h.check_equal(d.proc.returncode, 0, "heapprofd's exit status after SIGTERM")
                h.check(stop <= STOP_BOUND_S,
                        f"SIGTERM with {len(workers)} targets took {stop:.2f} s to exit, "
                        f"over {STOP_BOUND_S} s; stderr:\n{d.stderr()[-3000:]}")
            finally:
                d._stop()
            with h.Daemon(*args) as d:
                h.check(f"adopted {len(workers)} processes" in d.stderr(),
                        f"the restarted daemon did not adopt all {len(workers)}:\n"
                        f"{d.stderr()[-3000:]}")
                before, body = scrape_quartile(d, mine.pid)
                h.check_equal(inuse_objects(body), STACKS, "in-use objects after the restart")
                others = [w for w in workers if w is not mine]
                for w in others:
                    w.proc.kill()
                for w in others:
                    w.proc.wait()
                gone = {w.pid for w in others}
                during = []
                while gone & d.profiled_pids() or not d.settled():
                    t0 = time.monotonic()
                    d.profile(f"/debug/pprof/heap?pid={mine.pid}")
                    during.append(time.monotonic() - t0)
                    h.check(len(during) < 2000, "the exits were not reaped within 2000 scrapes")
                h.check_equal(d.profiled_pids(), {mine.pid}, "profiled after the exits")
                if len(during) >= 4:
                    q = quartile(during)
                    h.check(q <= DURING_EXITS_BOUND * before,
                            f"scrapes while {len(others)} targets exited took {q * 1e3:.1f} ms "
                            f"(lower quartile of {len(during)}), before {before * 1e3:.1f} ms: "
                            f"over {DURING_EXITS_BOUND}x")
                after, body = scrape_quartile(d, mine.pid, 3)
                h.check_equal(inuse_objects(body), STACKS, "in-use objects after the exits")
        finally:
            for w in workers:
                w.kill()
            shutil.rmtree(pin, ignore_errors=True)


if __name__ == "__main__":
    h.main()
