"""Who may profile what, tested with users and a group made for the test.

On loopback TCP (IPv4 and IPv6) a caller is the owner uid of its socket
(sock_diag): root profiles any process, another user only its own (403 on
another's), a trust-group member or trust-uid any; the index, the
all-process view and /metrics show each caller only its own processes; one
untrusted uid may hold only --max-targets-per-uid targets; every attach is
logged as an audit line; --open-loopback trusts every local caller and says
so at start. A bearer token (--token-file) is required on TCP when
configured and grants what trust grants; a non-loopback address needs
--allow-remote, which needs a token. The unix socket listener identifies
callers by SO_PEERCRED with the same rule.

The accounts are named hpacc<pid of this run><letter>; the accounts of an
earlier run that crashed (its pid gone) are removed first, so a run never
trips over them and parallel runs never share them.
"""

import grp
import os
import pwd
import re
import subprocess
import tempfile
import unittest

import heapprof_harness as h

PREFIX = "hpacc"
TAG = f"{PREFIX}{os.getpid()}"
PLAIN = f"{TAG}u"     # an ordinary user
TRUSTED = f"{TAG}t"   # a member of GROUP
GROUP = f"{TAG}g"     # the group a daemon is told to trust
OUR_NAME = re.compile(rf"^{PREFIX}(\d+)[a-z]$")
# How long a detach may take to free a slot: the scan runs every second;
# the rest is headroom for a loaded machine (this is a wait, not a bound).
REAP_TIMEOUT_S = 10.0
# How long an audit line may take to reach us through the daemon's stderr.
AUDIT_TIMEOUT_S = 5.0


def _run(argv):
    """Runs an account command; fails with its stderr unless it succeeds."""
    r = subprocess.run(argv, capture_output=True, timeout=60)
    h.check(r.returncode == 0, f"{' '.join(argv)}: status {r.returncode}: "
                               f"{r.stderr.decode('utf-8', 'replace').strip()}")


def _stale(name):
    """Whether `name` is one of ours from a run that is over."""
    return h.stale_account(name, OUR_NAME, "test_access.py")


def remove_stale_accounts():
    """Removes the users and groups that earlier runs of this test left."""
    for u in pwd.getpwall():
        if _stale(u.pw_name):
            subprocess.run(["userdel", "-f", u.pw_name], capture_output=True, timeout=60)
    for g in grp.getgrall():
        if _stale(g.gr_name):
            subprocess.run(["groupdel", g.gr_name], capture_output=True, timeout=60)
    left = [u.pw_name for u in pwd.getpwall() if _stale(u.pw_name)] + \
           [g.gr_name for g in grp.getgrall() if _stale(g.gr_name)]
    h.check(not left, f"accounts of an earlier run could not be removed: {left}")


class Accounts:
    """PLAIN, TRUSTED and GROUP (TRUSTED a member), for the tests of this
    file; removed on the way out, whatever happened."""

    def __enter__(self):
        remove_stale_accounts()
        try:
            _run(["groupadd", "-r", GROUP])
            for name, extra in ((PLAIN, []), (TRUSTED, ["-G", GROUP])):
                _run(["useradd", "-r", "-M", "-U", "-s", "/usr/sbin/nologin"] + extra + [name])
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, exc_type, exc, tb):
        for name in (PLAIN, TRUSTED):
            subprocess.run(["userdel", "-f", name], capture_output=True, timeout=60)
        for name in (GROUP, PLAIN, TRUSTED):  # user-private groups userdel may have left
            subprocess.run(["groupdel", name], capture_output=True, timeout=60)
        return False


def user(name):
    """The passwd entry of one of the test's users."""
    return pwd.getpwnam(name)


def as_user(name, argv):
    """argv run as user `name`, with its groups from the user database."""
    u = user(name)
    return ["setpriv", f"--reuid={u.pw_uid}", f"--regid={u.pw_gid}", "--init-groups"] + argv


def curl_as(name, url, extra=()):
    """GETs url (TCP or, with --unix-socket in extra, a unix socket) with curl,
    as user `name` or as root if None; returns (status, body)."""
    argv = ["curl", "-s", "-g", "--noproxy", "*", "-o", "-", "-w", "\n%{http_code}",
            *extra, url]
    if name is not None:
        argv = as_user(name, argv)
    r = subprocess.run(argv, capture_output=True, timeout=60)
    body, _, code = r.stdout.rpartition(b"\n")
    h.check(code.isdigit() and int(code) != 0,
            f"curl {url} as {name}: no answer (status {r.returncode}, {r.stderr!r})")
    return int(code), body


class UserWorkload:
    """The exact workload, or another program that prints "ready PID", run
    as one of the test's users (setpriv execs it in place, so the pid it
    prints is the one started)."""

    def __init__(self, name, argv=None):
        argv = argv or [os.path.join(h.WORKLOADS, "exact")]
        self.proc = subprocess.Popen(as_user(name, argv), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE)
        line = self.proc.stdout.readline().decode().strip()
        h.check(line.startswith("ready "), f"{argv[0]} as {name}: {line!r}")
        self.pid = int(line.split()[1])

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close()
        return False

    def run(self):
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.flush()
        h.check_equal(self.proc.stdout.readline().decode().strip(), "done", "workload line")

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def audit_lines(d, pid):
    """The daemon's audit lines about attaching `pid`, once there is one (the
    daemon logs before it answers, but its stderr is read by another thread
    here); fails if none comes within AUDIT_TIMEOUT_S."""
    def lines():
        return [line for line in d.stderr().splitlines()
                if line.startswith("heapprofd: audit: attach ") and f" pid={pid} " in line]
    h.wait_until(lambda: lines(), AUDIT_TIMEOUT_S,
                 lambda: f"an audit line of attaching pid {pid} in:\n{d.stderr()}")
    return lines()


def check_own_not_others(d, name, own, roots):
    """`name` gets 200 with its functions on its own process and 403 with the
    reason on root's; root gets 200 on both."""
    status, body = curl_as(name, d.url(f"/debug/pprof/heap?pid={own.pid}"))
    h.check_equal(status, 200, f"{name} attaching its own process: {body!r}")
    own.run()
    status, body = curl_as(name, d.url(f"/debug/pprof/heap?pid={own.pid}"))
    h.check_equal(status, 200, f"{name} profiling its own process: {body!r}")
    leaves = h.totals_by_leaf(h.decode(body).samples)
    h.check_equal(leaves.get("alloc_small"), h.EXACT_EXPECTED["alloc_small"],
                  f"{name}'s own profile, alloc_small")
    status, body = curl_as(name, d.url(f"/debug/pprof/heap?pid={roots.pid}"))
    h.check_equal(status, 403, f"{name} profiling root's process")
    h.check_one_line_reason(body, "403 body")
    h.check(f"uid {user(name).pw_uid} may not profile process {roots.pid}".encode() in body,
            f"403 reason: {body!r}")
    for pid in (own.pid, roots.pid):
        h.check_equal(curl_as(None, d.url(f"/debug/pprof/heap?pid={pid}"))[0], 200,
                      f"root profiling pid {pid}")


def write_token_file(tmp, token):
    """A token file of mode 0600 in tmp; returns its path."""
    path = os.path.join(tmp, "token")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, (token + "\n").encode())
    os.close(fd)
    return path


def check_contradiction(args, names):
    """heapprofd with args exits with status 2 (settings that contradict
    each other: a restart would not help) naming `names`, without serving."""
    r = subprocess.run([h.HEAPPROFD, "--pin-dir", "none", *args], capture_output=True,
                       text=True, timeout=30)
    h.check(r.returncode == 2 and all(n in r.stderr for n in names)
            and "listening on" not in r.stderr,
            f"heapprofd {' '.join(args)}: expected status 2 naming {names}; got "
            f"{r.returncode}: {r.stderr}")


# A process of the user's own that may or may not be dumpable (argv[1]: the
# flag for prctl(PR_SET_DUMPABLE)), as ssh-agent and gpg-agent make
# themselves not; it prints "ready PID" and waits for a line.
DUMPABLE_SCRIPT = """
import ctypes, os, sys
if ctypes.CDLL(None, use_errno=True).prctl(4, int(sys.argv[1]), 0, 0, 0) != 0:
    sys.exit(f"prctl(PR_SET_DUMPABLE): {os.strerror(ctypes.get_errno())}")
print("ready", os.getpid(), flush=True)
sys.stdin.readline()
"""


def user_python(name, dumpable):
    """python3 running DUMPABLE_SCRIPT as user `name`."""
    return UserWorkload(name, ["python3", "-c", DUMPABLE_SCRIPT, str(int(dumpable))])


def setUpModule():
    unittest.enterModuleContext(Accounts())



class AccessTest(unittest.TestCase):
    def test_tcp_callers_profile_only_their_own_processes(self):
        with h.Daemon("--sample-interval", "1") as d, h.Workload("exact") as roots, \
                UserWorkload(PLAIN) as theirs:
            check_own_not_others(d, PLAIN, theirs, roots)
            lines = audit_lines(d, theirs.pid)
            h.check_equal(len(lines), 1, f"audit lines of attaching pid {theirs.pid}: {lines}")
            want = (f"sampler=inprocess uid={user(PLAIN).pw_uid} via=tcp listener=\"{d.address}\" "
                    "trusted=no")
            h.check(want in lines[0], f"audit line {lines[0]!r} lacks {want!r}")
            h.check(" comm=\"exact\" " in lines[0], f"audit line {lines[0]!r} names no comm")
            h.check(any("uid=0 via=tcp" in line for line in audit_lines(d, roots.pid)),
                    f"no audit line of root attaching {roots.pid}: {d.stderr()}")

    def test_ipv6_loopback_callers_are_identified_too(self):
        d = h.Daemon("--sample-interval", "1")
        d.address = f"[::1]:{d.port}"
        with d, h.Workload("exact") as roots, UserWorkload(PLAIN) as theirs:
            check_own_not_others(d, PLAIN, theirs, roots)

    def test_trusted_callers_profile_any_process(self):
        with tempfile.TemporaryDirectory() as tmp:
            config = os.path.join(tmp, "heapprofd.conf")
            with open(config, "w") as f:
                f.write(f"trust-uid = {PLAIN}\n")
            # A trust-group member (the flag), a trust-uid (the config key).
            for args, name in ((["--trust-group", GROUP], TRUSTED), (["--config", config], PLAIN)):
                with h.Daemon(*args) as d, h.Workload("exact") as roots:
                    status, body = curl_as(name, d.url(f"/debug/pprof/heap?pid={roots.pid}"))
                    h.check_equal(status, 200, f"{name} (trusted by {args}) on root's process: "
                                               f"{body!r}")
                    h.check_equal(curl_as(name, d.url("/debug/pprof/"))[1].count(
                        f"heap?pid={roots.pid}\"".encode()), 1, f"root's process in {name}'s index")
                    other = PLAIN if name == TRUSTED else TRUSTED
                    h.check_equal(curl_as(other, d.url(f"/debug/pprof/heap?pid={roots.pid}"))[0],
                                  403, f"{other} (not trusted by {args}) on root's process")
                    lines = audit_lines(d, roots.pid)
                    h.check(len(lines) == 1 and "trusted=yes" in lines[0] and
                            f"uid={user(name).pw_uid} " in lines[0], f"audit lines: {lines}")

    def test_the_index_the_all_process_view_and_metrics_are_filtered_per_caller(self):
        with h.Daemon("--sample-interval", "1") as d, h.Workload("exact") as roots, \
                UserWorkload(PLAIN) as theirs:
            for pid in (roots.pid, theirs.pid):
                d.profile(f"/debug/pprof/heap?pid={pid}")
            roots.run()
            theirs.run()
            rows = {who: curl_as(who, d.url("/debug/pprof/"))[1].decode() for who in (None, PLAIN)}
            for who, pids in ((None, (roots.pid, theirs.pid)), (PLAIN, (theirs.pid,))):
                shown = sorted(int(p) for p in re.findall(r"<tr><td>(\d+)</td>", rows[who]))
                h.check_equal(shown, sorted(pids), f"pids in the index for {who or 'root'}")
            status, body = curl_as(PLAIN, d.url("/debug/pprof/heap"))
            h.check_equal(status, 200, "the all-process view for a user")
            labelled = sorted(set(int(p) for p in re.findall(r"pid:\[(\d+)\]",
                                                              h.pprof(body, "-raw").replace(" ", ""))))
            h.check_equal(labelled, [theirs.pid], "pids in a user's all-process view")
            for who, pids in ((None, {roots.pid, theirs.pid}), (PLAIN, {theirs.pid})):
                status, body = curl_as(who, d.url("/metrics"))
                h.check_equal(status, 200, f"/metrics for {who or 'root'}")
                series = set(int(p) for p in re.findall(
                    r'^heapprofd_target_inuse_bytes\{pid="(\d+)"', body.decode(), re.M))
                h.check_equal(series, pids, f"per-process series in /metrics for {who or 'root'}")

    def test_a_selector_shows_a_caller_only_its_own_processes_and_attaches_no_others(self):
        exe = os.path.realpath(os.path.join(h.WORKLOADS, "exact"))
        with h.Daemon("--sample-interval", "1") as d, h.Workload("exact") as roots, \
                UserWorkload(PLAIN) as theirs:
            status, body = curl_as(PLAIN, d.url("/debug/pprof/heap?comm=exact"))  # attaches its own
            h.check_equal(status, 200, f"?comm=exact for {PLAIN}: {body!r}")
            h.check(roots.pid not in d.profiled_pids(), "a user's selector attached root's process")
            theirs.run()
            roots.run()
            status, body = curl_as(PLAIN, d.url(f"/debug/pprof/heap?exe={exe}"))
            h.check_equal(status, 200, f"?exe= for {PLAIN}")
            p = h.decode(body)
            h.check_equal({s.labels.get("pid") for s in p.samples}, {str(theirs.pid)},
                          f"the pids in {PLAIN}'s ?exe= profile")
            # Only root's processes match: the same empty answer as a name nothing has.
            status, body = curl_as(PLAIN, d.url(f"/debug/pprof/heap?comm=exact&pid={roots.pid}"))
            h.check_equal(status, 403, "a guard on root's pid: 403 before anything is said of it")
            h.check(b"does not match" not in body, f"the 403 tells what root's process is: {body!r}")
            for query in (f"comm=exact&cgroup=/heapprofd-none-{TAG}", f"comm=hpnone{TAG}"):
                status, body = curl_as(PLAIN, d.url(f"/debug/pprof/heap?{query}"))
                h.check_equal(status, 200, f"?{query} for {PLAIN}")
                p = h.decode(body)
                h.check(not p.samples and any("no process that this caller may profile matches" in c
                                              for c in p.comments), f"?{query}: {p.comments}")
            h.check(roots.pid not in d.profiled_pids(), "root's process attached by a user")
            lines = audit_lines(d, theirs.pid)
            h.check(len(lines) == 1 and f"uid={user(PLAIN).pw_uid}" in lines[0],
                    f"the audit line of the selector's attach: {lines}")

    def test_one_uid_may_hold_only_its_share_of_the_targets(self):
        # --max-targets 8 and no --max-targets-per-uid: the default share, 8/8 = 1.
        with h.Daemon("--max-targets", "8") as d, UserWorkload(PLAIN) as first, \
                UserWorkload(PLAIN) as second, UserWorkload(PLAIN) as third:
            h.check_equal(curl_as(PLAIN, d.url(f"/debug/pprof/heap?pid={first.pid}"))[0], 200,
                          "a user's first process")
            status, body = curl_as(PLAIN, d.url(f"/debug/pprof/heap?pid={second.pid}"))
            h.check_equal(status, 503, "a user's second process, over its share")
            h.check_one_line_reason(body, "503 body")
            h.check(b"max-targets-per-uid" in body, f"503 reason: {body!r}")
            h.check_equal(curl_as(None, d.url(f"/debug/pprof/heap?pid={second.pid}"))[0], 200,
                          "root on the user's second process (root has no share)")
            h.check_equal(curl_as(PLAIN, d.url(f"/debug/pprof/heap?pid={second.pid}"))[0], 200,
                          "the user on its process root attached (not held by the user)")
            first.close()  # once it is detached, the user's slot is free again
            last = []

            def third_attached():
                last[:] = curl_as(PLAIN, d.url(f"/debug/pprof/heap?pid={third.pid}"))
                return last[0] == 200

            h.wait_until(third_attached, REAP_TIMEOUT_S,
                         lambda: f"the user's third process once the first exited: {last}")

    def test_open_loopback_trusts_every_local_caller_and_says_so(self):
        with h.Daemon("--open-loopback") as d, h.Workload("exact") as roots:
            h.check(f"heapprofd: open-loopback: every local user may profile every process "
                    f"through {d.address}" in d.stderr(), f"no open-loopback line:\n{d.stderr()}")
            h.check_equal(curl_as(PLAIN, d.url(f"/debug/pprof/heap?pid={roots.pid}"))[0], 200,
                          "a user on root's process under --open-loopback")
            lines = audit_lines(d, roots.pid)
            h.check(len(lines) == 1 and "via=open-loopback" in lines[0] and "trusted=yes" in lines[0]
                    and f"uid={user(PLAIN).pw_uid} " in lines[0], f"audit lines: {lines}")

    def test_a_token_is_required_on_tcp_when_configured(self):
        with tempfile.TemporaryDirectory() as tmp:
            token = "s3cret-token-of-the-test-0123456789"
            token_file = write_token_file(tmp, token)
            with h.Daemon("--token-file", token_file) as d, h.Workload("exact") as w:
                status, body = d.get("/metrics")
                h.check_equal(status, 401, "/metrics without a token")
                h.check_one_line_reason(body, "401 body")
                h.check_equal(d.get(f"/debug/pprof/heap?pid={w.pid}")[0], 401, "profile without token")
                h.check_equal(d.get("/healthz")[0], 200, "/healthz needs no token")
                r = h.request_with_headers(d.url(f"/debug/pprof/heap?pid={w.pid}"),
                                           {"Authorization": f"Bearer {token}"})
                h.check_equal(r.status, 200, "profile with the token")
                r = h.request_with_headers(d.url("/metrics"), {"Authorization": "Bearer wrong"})
                h.check_equal(r.status, 401, "a wrong token")
                # The token grants what trust grants, whoever presents it.
                status, _ = curl_as(PLAIN, d.url(f"/debug/pprof/allocs?pid={w.pid}"),
                                    ["-H", f"Authorization: Bearer {token}"])
                h.check_equal(status, 200, "a user with the token on root's process")
            # A token others can read is refused at start.
            os.chmod(token_file, 0o644)
            proc = subprocess.run([h.HEAPPROFD, "--listen", f"127.0.0.1:{h.free_port()}",
                                   "--pin-dir", "none", "--token-file", token_file],
                                  capture_output=True, timeout=30)
            h.check(proc.returncode != 0 and b"readable by others" in proc.stderr,
                    f"a world-readable token file: rc {proc.returncode}, {proc.stderr!r}")

    def test_a_remote_listener_needs_allow_remote_and_a_token(self):
        h.check_refuses(["--listen", f"0.0.0.0:{h.free_port()}"], "--listen 0.0.0.0",
                        names=["not a loopback address"])
        check_contradiction(["--listen", f"0.0.0.0:{h.free_port()}", "--allow-remote"],
                            ["allow-remote needs token-file"])
        with tempfile.TemporaryDirectory() as tmp:
            token = "another-token-of-the-test-0123456789"
            token_file = write_token_file(tmp, token)
            check_contradiction(["--open-loopback", "--token-file", token_file], ["contradict"])
            d = h.Daemon("--allow-remote", "--token-file", token_file)
            d.address = f"0.0.0.0:{d.port}"
            with d:
                local = f"http://127.0.0.1:{d.port}"
                h.check_equal(h.get(f"{local}/healthz")[0], 200, "/healthz on 0.0.0.0")
                h.check_equal(h.get(f"{local}/debug/pprof/")[0], 401, "the index without the token")
                r = h.request_with_headers(f"{local}/debug/pprof/",
                                           {"Authorization": f"Bearer {token}"})
                h.check_equal(r.status, 200, "the index with the token on 0.0.0.0")

    def test_unix_socket_callers_profile_only_their_own_processes(self):
        with tempfile.TemporaryDirectory() as tmp:
            os.chmod(tmp, 0o755)
            sock = os.path.join(tmp, "heapprofd.sock")
            with h.Daemon("--sample-interval", "1", "--unix", sock) as d, \
                    h.Workload("exact") as roots, UserWorkload(PLAIN) as theirs:
                via = ["--unix-socket", sock]
                url = "http://heapprofd/debug/pprof/heap?pid="
                status, body = curl_as(PLAIN, url + str(theirs.pid), via)
                h.check_equal(status, 200, "a user profiling its own process (attach)")
                theirs.run()
                status, body = curl_as(PLAIN, url + str(theirs.pid), via)
                h.check_equal(status, 200, "a user profiling its own process")
                leaves = h.totals_by_leaf(h.decode(body).samples)
                h.check("alloc_small" in leaves, f"its own profile has its functions: {leaves}")
                status, body = curl_as(PLAIN, url + str(roots.pid), via)
                h.check_equal(status, 403, "a user profiling root's process")
                h.check_one_line_reason(body, "403 body")
                h.check(b"not its own" in body, f"403 reason: {body!r}")
                h.check_equal(curl_as(PLAIN, "http://heapprofd/debug/pprof/", via)[0], 200,
                              "the index for a user")
                for pid in (theirs.pid, roots.pid):
                    h.check_equal(curl_as(None, url + str(pid), via)[0], 200,
                                  f"root profiling pid {pid}")
                lines = audit_lines(d, theirs.pid)
                h.check(len(lines) == 1 and f"via=unix listener=\"{sock}\"" in lines[0],
                        f"audit lines: {lines}")
                d.check_alive()

    def test_a_user_s_own_process_that_is_not_dumpable_is_refused(self):
        """ptrace refuses a process that is not dumpable to a user of the same
        uid (PR_SET_DUMPABLE 0; set-id and capability-gaining execs); the
        in-process sampler writes into its target, so heapprofd refuses too."""
        with h.Daemon("--sample-interval", "1") as d, user_python(PLAIN, False) as locked, \
                user_python(PLAIN, True) as twin:
            with open(f"/proc/{locked.pid}/status") as f:
                uid_line = next(line for line in f if line.startswith("Uid:"))
            h.check_equal(uid_line.split()[1:], [str(user(PLAIN).pw_uid)] * 4,
                          f"pid {locked.pid}: the user's own ids (real, effective, saved, fs)")
            status, body = curl_as(PLAIN, d.url(f"/debug/pprof/heap?pid={locked.pid}"))
            h.check_equal(status, 403, f"{PLAIN} profiling its own process that is not dumpable "
                                       f"({body!r})")
            h.check_one_line_reason(body, "403 body")
            h.check(f"may not profile process {locked.pid}, which is not dumpable".encode() in body,
                    f"403 reason: {body!r}")
            status, body = curl_as(PLAIN, d.url(f"/debug/pprof/heap?pid={twin.pid}"))
            h.check_equal(status, 200, f"{PLAIN} profiling its dumpable twin ({body[:200]!r})")
            h.check_equal(curl_as(None, d.url(f"/debug/pprof/heap?pid={locked.pid}"))[0], 200,
                          "root profiling the process that is not dumpable")
            # Both attached now: the user's index shows only the one it may profile.
            index = curl_as(PLAIN, d.url("/debug/pprof/"))[1].decode()
            shown = [int(p) for p in re.findall(r"<tr><td>(\d+)</td>", index)]
            h.check_equal(shown, [twin.pid], f"pids in the index for {PLAIN}")
            d.check_alive()


if __name__ == "__main__":
    h.main()
