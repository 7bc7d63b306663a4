"""An unprivileged user against the root daemon (issue 33, docs/security.md).

Each test runs an attack as a user made for it (hostile_users.py) and
checks that it fails:
- pid reuse over a delta window, with a pid and without: the user's
  process exits in the window and root's takes its pid (clone3 set_tid,
  standing in for the user's fork cycling); the user receives none of
  root's stacks.
- a program of the user's whose .gnu_debuglink names a FIFO, a symlink to
  a device node, or a symlink to a root-only debug file: no request
  blocks, and the daemon opens none of them (inotify sees no open) and
  shows no name from the root-only file; the user's own debug file is
  still read.
- 64 delta requests of one user: /healthz and root's requests answer
  within HEALTHZ_DEADLINE_S throughout (the user's requests past its
  share are refused at once, 429); a selection with nothing in it is
  answered at once, not after its window.
- a comm= rule that names no owner, and twelve namesakes of the user's
  under --max-targets 12: they count against the user's cap (12/8 = 1),
  and root's process of that name is attached.
- root's process exits and the user's takes its pid before the next
  history tick: the user is served none of root's history.
- eight processes of the user fill their shares of the stacks map: the
  user's processes together hold only the owner's share (a quarter), and
  root's process is still recorded exactly at --sample-interval 1.
"""

import concurrent.futures
import contextlib
import ctypes
import json
import os
import secrets
import shutil
import stat
import subprocess
import tempfile
import time
import unittest

import heapprof_harness as h
import hostile_users as u

# The delta window of the pid reuse attack: long enough to kill the user's
# process, see it detached (the reaper scans every second), start root's
# at its pid and let it allocate, on a loaded machine.
REUSE_WINDOW_S = 8


# The history's period: long enough that, in the history reuse test, the
# exit, the new process at the pid and the request all fall between two
# ticks.
HISTORY_PERIOD_S = 10


def setUpModule():
    """The user, and the daemon the tests share (all but the rule test's,
    which needs rules of its own): one start instead of five."""
    global D
    unittest.enterModuleContext(u.Accounts())
    D = unittest.enterModuleContext(h.Daemon("--sample-interval", "1", "--history-interval",
                                             f"{HISTORY_PERIOD_S}s"))


class SharedDaemonTest(unittest.TestCase):
    """A test on the file's shared daemon, self.d."""

    @property
    def d(self):
        return D


def samples_of(body):
    """The samples of a profile with any value (a delta keeps zero rows out)."""
    return [s for s in h.decode(body).samples if any(s.values)]


class PidReuseTest(SharedDaemonTest):
    """A delta profile reads only the process the access check approved."""

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


# A program of the user's: "ready PID", then on a line 100 allocations from
# a function whose name is only in its debug file, "done", and a line to exit.
DEBUGGED_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
__attribute__((noinline)) void *hostile_named_in_debug_file_only(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" : : "r"(p) : "memory");
    return p;
}
int main(void)
{
    char line[16];
    printf("ready %d\n", getpid());
    fflush(stdout);
    if (!fgets(line, sizeof(line), stdin))
        return 1;
    for (int i = 0; i < 100; i++)
        hostile_named_in_debug_file_only(1000);
    printf("done\n");
    fflush(stdout);
    fgets(line, sizeof(line), stdin);
    return 0;
}
"""
LEAF = "hostile_named_in_debug_file_only"
# How long a profile request may take here: a blocked one never ends.
ANSWER_TIMEOUT_S = 20
# How soon /healthz must answer meanwhile: it is served in a thread of its
# own and takes no lock a profile holds, so anything near this is a block;
# above 1 s for the machine's load (a parallel build on 2 cores).
HEALTHZ_DEADLINE_S = 3.0
IN_OPEN = 0x20
IN_NONBLOCK = os.O_NONBLOCK


class OpenWatch:
    """inotify IN_OPEN on one file: whether anything opened it (an O_PATH
    lookup is no open)."""

    def __init__(self, path):
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(IN_NONBLOCK)
        h.check(self.fd >= 0, f"inotify_init1: errno {ctypes.get_errno()}")
        wd = self.libc.inotify_add_watch(self.fd, path.encode(), IN_OPEN)
        h.check(wd >= 0, f"inotify_add_watch {path}: errno {ctypes.get_errno()}")
        self.path = path

    def opened(self):
        try:
            return len(os.read(self.fd, 4096)) > 0
        except BlockingIOError:
            return False

    def close(self):
        os.close(self.fd)


class DebugLinkTest(SharedDaemonTest):
    """Paths a target controls: its debug link (docs/security.md)."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = cls.enterClassContext(tempfile.TemporaryDirectory(prefix="hphst-root-"))
        os.chmod(cls.tmp, 0o700)  # root's: the user cannot reach into it
        cls.src = os.path.join(cls.tmp, "debugged.c")
        with open(cls.src, "w") as f:
            f.write(DEBUGGED_C)

    def user_program(self, name):
        """Builds the program with a build ID of its own (the symbol cache
        keeps files by build ID), split into a stripped program in a
        directory of the user's, linked to "prog.debug", and its debug file,
        kept in root's directory; returns (program, the user's directory,
        the debug file)."""
        built = os.path.join(self.tmp, name)
        r = subprocess.run(["gcc", "-O1", "-g", f"-Wl,--build-id=0x{secrets.token_hex(20)}",
                            "-o", built, self.src], capture_output=True, text=True, timeout=60)
        h.check(r.returncode == 0, f"gcc: {r.stderr}")
        debug = os.path.join(self.tmp, name + "-dir", "prog.debug")
        os.mkdir(os.path.dirname(debug), 0o700)
        for argv in (["objcopy", "--only-keep-debug", built, debug],
                     ["objcopy", "--strip-all", f"--add-gnu-debuglink={debug}", built]):
            r = subprocess.run(argv, capture_output=True, text=True, timeout=60)
            h.check(r.returncode == 0, f"{' '.join(argv)}: {r.stderr}")
        os.chmod(debug, 0o600)
        where = os.path.join(u.home(), name)
        os.mkdir(where)
        prog = os.path.join(where, "prog")
        shutil.copy(built, prog)
        os.chmod(prog, 0o755)
        os.chown(where, u.uid(), u.uid())
        return prog, where, debug

    def profile_as_user(self, prog):
        """Runs `prog` as the user, attaches it and lets it allocate, then
        asks for its profile as the user while root asks for /healthz;
        returns the profile's leaf names. Fails if a request blocks."""
        d = self.d
        with u.UserWorkload("prog", path=prog) as w, \
                concurrent.futures.ThreadPoolExecutor(1) as pool:
            url = d.url(f"/debug/pprof/heap?pid={w.pid}")
            h.check_equal(u.curl(url, max_time=ANSWER_TIMEOUT_S)[0], 200, "attach as the user")
            w.run()
            request = pool.submit(u.curl, url, max_time=ANSWER_TIMEOUT_S)
            while not request.done():
                t0 = time.monotonic()
                status, _ = h.get(d.url("/healthz"), timeout=5)
                took = time.monotonic() - t0
                h.check(status == 200 and took < HEALTHZ_DEADLINE_S,
                        f"/healthz while the user's profile is built: {status} in {took:.1f} s")
                time.sleep(0.2)
            status, body = request.result()
            h.check_equal(status, 200, f"the user's profile (0: none within {ANSWER_TIMEOUT_S} s, "
                                       f"a blocked open): {body[:300]!r}")
            return set(h.totals_by_leaf(h.decode(body).samples))

    def test_a_debug_link_to_a_fifo_blocks_nothing(self):
        prog, where, _ = self.user_program("fifo")
        fifo = os.path.join(where, "prog.debug")
        os.mkfifo(fifo)
        os.chown(fifo, u.uid(), u.uid())
        self.profile_as_user(prog)

    def test_a_debug_link_to_a_device_node_is_never_opened(self):
        prog, where, _ = self.user_program("device")
        node = os.path.join(self.tmp, "device-node")
        os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # like /dev/null
        os.symlink(node, os.path.join(where, "prog.debug"))
        watch = OpenWatch(node)
        try:
            self.profile_as_user(prog)
            h.check(not watch.opened(), f"the daemon opened the device node {node}")
        finally:
            watch.close()

    def test_a_debug_link_to_a_root_only_file_is_not_read_for_the_user(self):
        prog, where, debug = self.user_program("rootonly")
        os.chmod(os.path.dirname(debug), 0o755)  # the file itself stays 0600
        os.symlink(debug, os.path.join(where, "prog.debug"))
        watch = OpenWatch(debug)
        try:
            leaves = self.profile_as_user(prog)
            h.check(LEAF not in leaves, f"the user's profile names {LEAF}, read from root's "
                                        f"0600 debug file: {sorted(leaves)}")
            h.check(not watch.opened(), f"the daemon opened root's 0600 file {debug}")
        finally:
            watch.close()

    def test_the_users_own_debug_file_is_still_read(self):
        prog, where, debug = self.user_program("own")
        own = os.path.join(where, "prog.debug")
        shutil.copy(debug, own)
        os.chown(own, u.uid(), u.uid())
        leaves = self.profile_as_user(prog)
        h.check(LEAF in leaves, f"the user's own debug file was not read: {sorted(leaves)}")


class HistoryReuseTest(SharedDaemonTest):
    """A history is found by pid and start time."""

    def test_roots_history_is_not_served_for_the_users_process_at_its_pid(self):
        d = self.d
        with h.Workload("exact") as roots:
            pid = roots.pid
            h.check_equal(h.get(d.url(f"/debug/pprof/heap?pid={pid}"))[0], 200, "root attaching")
            roots.run()

            def points():
                status, body = h.get(d.url(f"/debug/pprof/history?pid={pid}"))
                return json.loads(body)["points"] if status == 200 else []
            first = len(points())
            # Right after a tick: the rest of the period is the attack's.
            d.wait_until(lambda: len(points()) > first, HISTORY_PERIOD_S * 3,
                         "a new point of root's history")
            roots.kill()
            setpriv = u.as_user([os.path.join(h.WORKLOADS, "exact")])
            setpriv[0] = shutil.which("setpriv")
            with h.SpawnedWorkload(pid, setpriv[0], *setpriv[1:]):
                status, body = u.curl(d.url(f"/debug/pprof/history?pid={pid}"))
            served = json.loads(body)["points"] if status == 200 else []
            h.check(not served, f"the user's process at root's old pid {pid} was served "
                                f"{len(served)} points of root's history: {body[:300]!r}")



# The user's delta windows in the connection test: longer than the test's
# checks, short enough that the daemon stops soon after (it waits for them).
HELD_WINDOW_S = 8
# Requests one untrusted uid may have in progress (caller_limits.h).
PER_UID_REQUESTS = 4


class ConnectionsTest(SharedDaemonTest):
    """One user's requests cannot take the server's connections."""

    def test_an_empty_selection_is_answered_at_once(self):
        t0 = time.monotonic()
        status, body = u.curl(self.d.url("/debug/pprof/heap?seconds=30"), max_time=10)
        took = time.monotonic() - t0
        h.check(status == 200 and took < HEALTHZ_DEADLINE_S,
                f"a delta of nothing (the user profiles no process): {status} after {took:.1f} s, "
                f"{body[:200]!r}")

    def test_one_users_windows_leave_healthz_and_root_answered(self):
        d = self.d
        with u.UserWorkload("exact") as theirs, h.Workload("exact") as roots:
            h.check_equal(u.curl(d.url(f"/debug/pprof/heap?pid={theirs.pid}"))[0], 200,
                          "the user attaching its own process")
            h.check_equal(h.get(d.url(f"/debug/pprof/heap?pid={roots.pid}"))[0], 200,
                          "root attaching its process")
            url = d.url(f"/debug/pprof/heap?pid={theirs.pid}&seconds={HELD_WINDOW_S}")
            curls = [subprocess.Popen(u.curl_argv(url, max_time=HELD_WINDOW_S + 30),
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
                     for _ in range(64)]
            try:
                d.wait_until(lambda: d.metric("heapprofd_delta_windows_open") >= PER_UID_REQUESTS,
                             h.DELTA_OPEN_TIMEOUT_S, "the user's windows to open")
                deadline = time.monotonic() + 3
                while time.monotonic() < deadline:
                    for path in ("/healthz", f"/debug/pprof/heap?pid={roots.pid}"):
                        t0 = time.monotonic()
                        try:
                            status, _ = h.get(d.url(path), timeout=HEALTHZ_DEADLINE_S)
                        except OSError as e:
                            status = f"no answer ({e})"
                        took = time.monotonic() - t0
                        h.check(status == 200 and took < HEALTHZ_DEADLINE_S,
                                f"root's {path} beside 64 delta requests of one user: {status} "
                                f"after {took:.1f} s")
                refused = [c for c in curls if c.poll() is not None]
                codes = {u.parse_curl(c.stdout.read())[0] for c in refused}
                h.check(len(refused) >= 64 - PER_UID_REQUESTS and codes == {429},
                        f"the user's requests past its {PER_UID_REQUESTS}: {len(refused)} "
                        f"answered, with {codes}")
            finally:
                for c in curls:
                    if c.poll() is None:
                        c.kill()
                    c.wait()
                    c.stdout.close()


# The command name of the rule test's processes (at most 15 characters).
NAMESAKE = "hphst-namesake"
# How long the rule's scan (every second) may take to attach root's
# process on a loaded machine: a deadline, not a bound.
RULE_ATTACH_TIMEOUT_S = 15.0


class RuleOwnerTest(unittest.TestCase):
    """A rule's processes of an owner it does not name count against that
    owner's cap."""

    def test_a_users_namesakes_leave_a_slot_for_roots_process(self):
        alias = os.path.join(u.home(), NAMESAKE)
        os.symlink(os.path.join(h.WORKLOADS, "exact"), alias)
        with h.Daemon("--comm", NAMESAKE, "--max-targets", "12") as d, \
                contextlib.ExitStack() as stack:
            theirs = [stack.enter_context(u.UserWorkload(NAMESAKE, path=alias))
                      for _ in range(12)]
            d.wait_until(lambda: any(w.pid in d.profiled_pids() for w in theirs),
                         RULE_ATTACH_TIMEOUT_S, "a namesake of the user's attached by the rule")
            roots = stack.enter_context(h.Workload(NAMESAKE, command=[alias]))
            d.wait_until(lambda: roots.pid in d.profiled_pids(), RULE_ATTACH_TIMEOUT_S,
                         f"root's {NAMESAKE} (pid {roots.pid}) attached beside the user's twelve")
            held = [w.pid for w in theirs if w.pid in d.profiled_pids()]
            h.check(len(held) <= 1, f"the user's namesakes attached: {held}, over its cap of 1")


# The owner test's stacks map: a process's share is an eighth (64), an
# owner's a quarter (128), so eight processes of one user at their own
# share would fill it. many_stacks.c makes about 125 distinct stacks.
OWNER_TEST_MAX_STACKS = 512
OWNER_STACK_SHARE = OWNER_TEST_MAX_STACKS // 4
# Processes of the user: what one process's share times this fills.
OWNER_TEST_PROCESSES = 8
# Stacks the share checks may let past (one per CPU per race, tested
# before the add: bpf/process_share.bpf.h): a bound, with room to spare.
SHARE_RACE_SLACK = 2 * (os.cpu_count() or 1)


class OwnerShareTest(unittest.TestCase):
    """One user's processes together hold only their owner's share of the
    maps; root's process keeps recording. About 5 s."""

    def test_eight_processes_of_one_user_leave_root_recorded_exactly(self):
        with h.Daemon("--sample-interval", "1", "--max-stacks",
                      str(OWNER_TEST_MAX_STACKS)) as d, contextlib.ExitStack() as stack:
            theirs = [stack.enter_context(u.UserWorkload("many_stacks"))
                      for _ in range(OWNER_TEST_PROCESSES)]
            for w in theirs:
                h.check_equal(u.curl(d.url(f"/debug/pprof/heap?pid={w.pid}"))[0], 200,
                              f"the user attaching its process {w.pid}")
            for w in theirs:
                w.go()
            for w in theirs:
                w.wait_done()
            m = d.metrics()
            stored = m.labelled[("heapprofd_map_entries", (("map", "stacks"),))]

            with h.Workload("exact") as roots:
                d.profile(f"/debug/pprof/heap?pid={roots.pid}")  # attaches
                roots.run()
                profile = h.decode(d.profile(f"/debug/pprof/heap?pid={roots.pid}"))
            totals = h.totals_by_leaf(profile.samples)
            wrong = [f"  {fn}: expected {want}, got {totals.get(fn)}"
                     for fn, want in h.EXACT_EXPECTED.items() if totals.get(fn) != want]
            full = d.metric("heapprofd_samples_dropped_stack_map_full_total")
            h.check(not wrong and full == 0,
                    "root's process beside the user's full shares: totals per leaf differ:\n"
                    + "\n".join(wrong) + f"\nsamples dropped on a full stack map: {full}; "
                    f"the user's processes stored {stored} stacks")
            h.check(stored <= OWNER_STACK_SHARE + SHARE_RACE_SLACK,
                    f"the user's {OWNER_TEST_PROCESSES} processes stored {stored} stacks, over "
                    f"their owner's share of {OWNER_STACK_SHARE} (+{SHARE_RACE_SLACK})")
            # A full owner's share is counted, never silent.
            refused = m.get("heapprofd_samples_dropped_owner_stack_share_total")
            h.check(refused, f"samples refused for the owner's share: {refused}")

if __name__ == "__main__":
    h.main()
