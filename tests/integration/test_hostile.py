"""An unprivileged user against the root daemon (issue 33, docs/security.md).

Each test runs an attack as a user made for it (hostile_users.py) and
checks that it fails:
- pid reuse over a delta window, with a pid and without: the user's
  process exits in the window and root's takes its pid (clone3 set_tid,
  standing in for the user's fork cycling); the user receives none of
  root's stacks.
"""

import concurrent.futures
import os
import unittest

import heapprof_harness as h
import hostile_users as u

# The delta window of the pid reuse attack: long enough to kill the user's
# process, see it detached (the reaper scans every second), start root's
# at its pid and let it allocate, on a loaded machine.
REUSE_WINDOW_S = 8


def setUpModule():
    unittest.enterModuleContext(u.Accounts())


def samples_of(body):
    """The samples of a profile with any value (a delta keeps zero rows out)."""
    return [s for s in h.decode(body).samples if any(s.values)]


class PidReuseTest(unittest.TestCase):
    """A delta profile reads only the process the access check approved."""

    @classmethod
    def setUpClass(cls):
        cls.d = cls.enterClassContext(h.Daemon("--sample-interval", "1"))

    def reuse_during_window(self, query):
        """The user asks for a delta profile (`query`, with {pid} for its
        process's pid); its process exits in the window, and root's exact
        workload takes the pid, is attached by a root request and
        allocates. Returns the user's (status, body)."""
        d = self.d
        with u.UserWorkload("exact") as theirs, \
                concurrent.futures.ThreadPoolExecutor(1) as pool:
            pid = theirs.pid
            h.check_equal(u.curl(d.url(f"/debug/pprof/heap?pid={pid}"))[0], 200,
                          "the user attaching its own process")
            url = d.url("/debug/pprof/heap?" + query.format(pid=pid) + f"&seconds={REUSE_WINDOW_S}")
            request = pool.submit(u.curl, url)
            h.wait_delta_window_open(d, request)
            theirs.kill()
            d.wait_detached(pid, "the user's exited process")
            with h.SpawnedWorkload(pid, "exact") as roots:
                h.check_equal(h.get(d.url(f"/debug/pprof/heap?pid={pid}"))[0], 200,
                              "root attaching its process at the reused pid")
                roots.run()
                h.check(not request.done(), "the window ended before root's process ran; "
                                            "a loaded machine: REUSE_WINDOW_S is too short")
                return request.result(timeout=h.REQUEST_TIMEOUT_S + REUSE_WINDOW_S)

    def test_a_delta_by_pid_is_not_of_the_next_process_at_that_pid(self):
        status, body = self.reuse_during_window("pid={pid}")
        leaked = samples_of(body) if status == 200 else []
        h.check(status == 404 or (status == 200 and not leaked),
                f"the user's delta after its pid was reused: status {status}, "
                f"{len(leaked)} samples of root's process: {body[:300]!r}")

    def test_a_delta_of_all_processes_leaves_a_reused_pid_out(self):
        status, body = self.reuse_during_window("debug=0")
        h.check_equal(status, 200, f"the user's all-process delta: {body[:300]!r}")
        leaked = samples_of(body)
        h.check(not leaked, f"the user's all-process delta holds {len(leaked)} samples "
                            f"of root's process at its old pid: {h.describe(leaked[:3])}")


if __name__ == "__main__":
    h.main()
