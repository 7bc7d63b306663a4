"""A slow attach stalls no one: while the daemon attaches to a process
with large libraries (clang-14 maps libLLVM and libclang-cpp, 160 MiB of
code: reading their ELF files, building their unwind tables and writing
about two million rows into the BPF map take half a second to a second and
a half here), /healthz, /metrics and the index each answer within 100 ms
(the issue's bound). Those used to wait for the whole attach: it built the
tables under the locks /metrics and the index take.
"""

import shutil
import subprocess
import threading
import time
import unittest

import heapprof_harness as h

# The program whose attach is slow: Debian's clang-14 (package clang, which
# the build needs anyway), reading a C file from stdin until it closes.
CLANG = "clang-14"
# What it must map before the test starts: the largest of its libraries.
BIG_LIBRARY = "libLLVM-14.so"
# The bound on each answer while the attach runs.
ANSWER_BOUND_S = 0.1
# An attach quicker than this could not show a stall of the bound's size:
# the test then says it could not run rather than pass.
MIN_ATTACH_S = 0.3
# How often each endpoint is asked while the attach runs.
POLL_S = 0.01


def start_big_process():
    """clang-14 waiting on stdin, once its libraries are mapped."""
    clang = shutil.which(CLANG)
    h.check(clang, f"{CLANG} is not installed (Debian: clang); this test attaches to it")
    p = subprocess.Popen([clang, "-E", "-x", "c", "-"], stdin=subprocess.PIPE,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def mapped():
        h.check(p.poll() is None, f"{CLANG} (pid {p.pid}) exited with {p.returncode}")
        try:
            with open(f"/proc/{p.pid}/maps") as f:
                return BIG_LIBRARY in f.read()
        except OSError:
            return False

    try:
        h.wait_until(mapped, 10, f"{CLANG} (pid {p.pid}) mapping {BIG_LIBRARY}")
    except h.Failure:
        p.kill()
        p.wait()
        raise
    return p


def attach_round():
    """Attaches a fresh daemon to a fresh clang-14 while asking each
    endpoint in turn; returns (attach seconds, {path: (worst seconds, times
    asked)}) over the answers asked for while the attach ran."""
    big = start_big_process()
    try:
        with h.Daemon() as d:
            done = {}

            def attach():
                t0 = time.monotonic()
                done["response"] = d.request(f"/debug/pprof/heap?pid={big.pid}")
                done["took"] = time.monotonic() - t0

            worst = {"/healthz": (0.0, 0), "/metrics": (0.0, 0), "/debug/pprof/": (0.0, 0)}
            attacher = threading.Thread(target=attach)
            attacher.start()
            while attacher.is_alive():
                for path, (slowest, asked) in worst.items():
                    during = attacher.is_alive()  # asked after the attach ended: not counted
                    t0 = time.monotonic()
                    r = d.request(path)
                    took = time.monotonic() - t0
                    h.check_equal(r.status, 200, f"GET {path} during the attach")
                    if during:
                        worst[path] = (max(slowest, took), asked + 1)
                time.sleep(POLL_S)
            attacher.join()
            r = done["response"]
            h.check(r.status == 200, f"the attach of {CLANG} (pid {big.pid}): {r.status} "
                                     f"{r.text()!r}")
            return done["took"], worst
    finally:
        big.kill()
        big.wait()


class LocksTest(unittest.TestCase):
    def test_a_slow_attach_stalls_neither_healthz_nor_metrics_nor_the_index(self):
        """Two rounds, each a fresh daemon attaching a fresh clang-14; per
        endpoint, the better round's worst answer must be within the bound. A
        stall as the old locks made lasts the rest of the attach in every round;
        the machine's own hiccups (it is shared: other builds run beside) rarely
        hit both."""
        rounds = [attach_round() for _ in range(2)]
        summary = "; ".join(f"attach {took:.2f} s: " + ", ".join(
            f"{p} {s * 1000:.0f} ms at worst of {n}" for p, (s, n) in worst.items())
            for took, worst in rounds)
        print(f"{CLANG}: {summary}", flush=True)
        for took, _ in rounds:
            h.check(took >= MIN_ATTACH_S,
                    f"an attach of {CLANG} took {took:.3f} s, under {MIN_ATTACH_S} s: too quick "
                    f"to show a stall of {ANSWER_BOUND_S} s, so this test cannot tell anything on "
                    f"this machine ({summary})")
        for path in rounds[0][1]:
            best = min(worst[path][0] for _, worst in rounds)
            h.check(best <= ANSWER_BOUND_S,
                    f"GET {path} took over {ANSWER_BOUND_S * 1000:.0f} ms during the attach of "
                    f"{CLANG} in both rounds, {best * 1000:.0f} ms in the better ({summary})")
        for path in rounds[0][1]:
            for _, worst in rounds:
                h.check(worst[path][1] >= 3,
                        f"GET {path} was asked fewer than 3 times during an attach ({summary})")


if __name__ == "__main__":
    h.main()
