"""The sampler's installer and the dynamic linker's locks (issue 34, part 1).

tests/workloads/loader_hold.c holds one of the loader's locks on purpose,
in a thread the daemon never runs its installer on (it waits in recv):

- the load lock, inside a dlopen whose constructor waits: the installer
  walks the modules under that lock, waits for it 250 ms at most, and
  gives up. The attach falls back to uprobes with that reason, the
  process runs on, and no thread keeps the installer's signal mask;
- the load lock marked held by a thread that is not in the process, as a
  fork child inherits it from a glibc that does not free it there: the
  installer does not wait for it at all, and the attach falls back with
  that reason;
- the list's write lock, inside a dl_iterate_phdr callback that waits:
  the installer does not take that lock (a fork child may inherit it held
  for ever), so the attach is in-process and quick. The code before this
  walked inside dl_iterate_phdr: there the installer waited on that lock,
  the daemon gave up after 2 s and left the thread blocked inside, with
  every signal blocked, until the callback returned.

Each test checks every thread's SigBlk against what it was before the
attach. Cost: about 15 s.
"""

import os
import time
import unittest

import heapprof_harness as h

# Every signal blocked but SIGKILL and SIGSTOP: the mask of a thread that
# runs the installer.
INSTALLER_MASK = 0xfffffffffffbfeff
# An attach waits for the load lock 250 ms (sampler/loader_lock.c), and
# the daemon gives up on an installer at 2 s (THREAD_CALL_TIMEOUT_MS).
ATTACH_BOUND_S = 1.5


def thread_masks(pid):
    """{tid: SigBlk} of every thread of `pid`."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                for line in f:
                    if line.startswith("SigBlk:"):
                        out[int(tid)] = int(line.split()[1], 16)
        except FileNotFoundError:
            pass
    return out


def steady_masks(pid):
    """thread_masks(pid) once two reads 50 ms apart agree (a thread being
    created runs with every signal blocked for a moment)."""
    masks = thread_masks(pid)
    for _ in range(40):
        time.sleep(0.05)
        again = thread_masks(pid)
        if again == masks:
            return masks
        masks = again
    raise h.Failure(f"the signal masks of {pid} never settled: {masks}")


def hold(mode):
    """The workload in `mode`, its lock held."""
    lib = os.path.join(h.WORKLOADS, "plugins", "libslow_ctor.so")
    w = h.Workload("loader_hold", lib, mode)
    w.go()
    h.check_equal(w._expect_line(10, "held"), "held", "loader_hold")
    return w


def release_and_finish(w):
    """Lets the lock go; checks the process runs on and exits cleanly."""
    w._send_line("release")
    h.check_equal(w._expect_line(10, "released"), "released", "loader_hold")
    w._send_line("")
    line = w._expect_line(10, "ops")
    h.check(line.startswith("ops ") and int(line.split()[1]) > 0, f"loader_hold said {line!r}")
    w.wait_done(10)
    w.finish()


class LoaderLockTest(unittest.TestCase):
    def attach(self, d, w):
        """Attaches w; (seconds it took, its index entry, masks before, after)."""
        before = steady_masks(w.pid)
        start = time.monotonic()
        d.profile(f"/debug/pprof/heap?pid={w.pid}")
        took = time.monotonic() - start
        entry = d.index_entry(w.pid)
        h.check(entry is not None, f"pid {w.pid} is not in the index")
        after = thread_masks(w.pid)
        print(f"  attach {took:.3f} s, masks before {before}, after {after}", flush=True)
        return took, entry, before, after

    def check_masks(self, before, after):
        for tid, mask in after.items():
            h.check(mask != INSTALLER_MASK, f"thread {tid} kept the installer's mask")
        for tid, mask in before.items():
            h.check_equal(hex(after.get(tid, mask)), hex(mask), f"thread {tid}: SigBlk")

    def test_an_attach_while_a_dlopen_holds_the_load_lock_falls_back_with_its_reason(self):
        with h.Daemon("--sampler", "inprocess") as d, hold("dlopen") as w:
            took, entry, before, after = self.attach(d, w)
            h.check_equal(entry["sampler"], "uprobe", f"sampler ({entry})")
            h.check("load lock stayed held" in entry["sampler_note"],
                    f"the reason: {entry['sampler_note']!r}")
            h.check(took < ATTACH_BOUND_S, f"the attach took {took:.2f} s")
            self.check_masks(before, after)
            release_and_finish(w)

    def test_a_load_lock_held_by_no_thread_of_the_process_is_not_waited_for(self):
        with h.Daemon("--sampler", "inprocess") as d, hold("dead") as w:
            took, entry, before, after = self.attach(d, w)
            h.check_equal(entry["sampler"], "uprobe", f"sampler ({entry})")
            h.check("held by a thread that is not in this process" in entry["sampler_note"],
                    f"the reason: {entry['sampler_note']!r}")
            self.check_masks(before, after)
            release_and_finish(w)

    def test_a_thread_inside_dl_iterate_phdr_holds_up_no_attach(self):
        with h.Daemon("--sampler", "inprocess") as d, hold("iterate") as w:
            took, entry, before, after = self.attach(d, w)
            h.check_equal(entry["sampler"], "inprocess",
                          f"sampler ({entry['sampler_note']!r})")
            h.check(took < ATTACH_BOUND_S, f"the attach took {took:.2f} s")
            self.check_masks(before, after)
            release_and_finish(w)


if __name__ == "__main__":
    h.main()
