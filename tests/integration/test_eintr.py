"""No EINTR from an in-process attach or detach (issue 26, item 1).

Linux fails some blocking calls with EINTR after a stop, even in a thread
that blocks every signal (signal(7), "Interruption of system calls and
library functions by stop signals"; docs/sampler.md lists them). The
workload (tests/workloads/eintr.c) has one thread per call, every signal
blocked, each looping on epoll_wait, epoll_pwait, poll, select,
sem_timedwait, nanosleep, futex (FUTEX_WAIT with a timeout), recv with
SO_RCVTIMEO or ppoll, and two that run a little between 1 ms epoll_waits
or ppolls (the thread an attach prefers, running, and likely blocked by
the time it is stopped). epoll_pwait and ppoll wait with a signal mask of
their own, which the kernel swaps back once they return: a stop that took
the call's mask for the thread's would leave it with the call's.

Across 50 attach/detach cycles of the injection library, then 5 through
heapprofd (delta windows, which detach at their end), no call may fail
with EINTR: the exact bound is 0, since nothing else signals these
threads; and after no call may a thread be left with the call's mask.
Without the restart in thread_stop.c, 2-4 EINTRs a run.

Cost: about 8 s (50 library cycles of 0-20 ms each, 5 daemon cycles of a
little over 1 s each).
"""

import os
import re
import subprocess
import unittest

import heapprof_harness as h

LIBRARY_CYCLES = 50
DAEMON_CYCLES = 5


def inject_cycles(pid, n):
    """Runs the injection library (tests/integration/inject_cycles.c) on pid."""
    tool = os.environ.get("INJECT_CYCLES")
    h.check(tool and os.access(tool, os.X_OK), f"INJECT_CYCLES={tool!r} is not built")
    return subprocess.run([tool, str(pid), str(n)], capture_output=True, text=True, timeout=300)


def counts(w):
    """Stops the workload's threads; {call: (calls, eintr)}."""
    w.go()
    out = {}
    while True:
        line = w._expect_line(30, "counts")
        if line == "done":
            return out
        m = re.fullmatch(r"(\S+) calls (\d+) eintr (\d+) mask (\d+)", line)
        h.check(m is not None, f"eintr workload said {line!r}")
        out[m.group(1)] = (int(m.group(2)), int(m.group(3)), int(m.group(4)))


class EintrTest(unittest.TestCase):
    def test_no_call_fails_with_eintr_across_attach_detach_cycles(self):
        with h.Workload("eintr") as w:
            out = inject_cycles(w.pid, LIBRARY_CYCLES)
            h.check(out.returncode == 0, f"inject_cycles failed: {out.stderr}{out.stdout}")
            print(f"  {out.stdout.strip()}", flush=True)
            with h.Daemon("--sampler", "inprocess") as d:
                for i in range(DAEMON_CYCLES):
                    d.profile(f"/debug/pprof/heap?pid={w.pid}&seconds=1")
                    d.wait_detached(w.pid, f"daemon cycle {i}")
                entry = d.metrics()
                h.check_equal(entry.get("heapprofd_inprocess_fallbacks_total", 0), 0,
                              "processes that fell back to uprobes")
            result = counts(w)
            w.finish()
        for call, (n, eintr, lost) in sorted(result.items()):
            print(f"  {call}: {n} calls, {eintr} EINTR, {lost} with the thread's mask lost",
                  flush=True)
        h.check_equal(sorted(result), sorted(["epoll_wait", "epoll_pwait", "poll", "select",
                                              "sem_timedwait", "nanosleep", "futex", "recv",
                                              "epoll_wait_busy", "ppoll", "ppoll_busy"]),
                      "calls reported")
        failed = {c: e for c, (n, e, lost) in result.items() if e}
        h.check(not failed, f"calls that failed with EINTR during {LIBRARY_CYCLES} + "
                            f"{DAEMON_CYCLES} attach/detach cycles: {failed}")
        lost = {c: k for c, (n, e, k) in result.items() if k}
        h.check(not lost, f"calls after which the thread had the call's signal mask, not its "
                          f"own: {lost}")

    def test_a_thread_waiting_without_a_timeout_is_stopped_and_waits_on(self):
        """A process whose one thread waits in epoll_wait without a timeout (an
        idle event loop) is attached in-process: its call, which a stop fails
        with EINTR, is made again with the same arguments, so it waits on as
        if nothing happened and never sees EINTR."""
        with h.Workload("eintr", "forever") as w:
            out = inject_cycles(w.pid, 20)
            h.check(out.returncode == 0, f"inject_cycles failed: {out.stderr}{out.stdout}")
            result = counts(w)
            w.finish()
        n, eintr, _ = result["epoll_wait_forever"]
        print(f"  epoll_wait(-1): {n} calls, {eintr} EINTR over 20 attach/detach cycles",
              flush=True)
        h.check_equal(eintr, 0, "EINTR seen by epoll_wait without a timeout")


if __name__ == "__main__":
    h.main()
