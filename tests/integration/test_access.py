"""Who may profile what: the TCP listener binds loopback unless allowed,
asks for a bearer token when one is configured (401 without it, /healthz
exempt), refuses a token file others can read; the unix socket listener
lets root profile any process and another user (created for the test) only
its own, with 403 otherwise."""

import os
import pwd
import subprocess
import tempfile
import time

import heapprof_harness as h

TEST_USER = f"hptest{os.getpid() % 100000}"


def as_user(uid, gid, argv):
    """argv run as uid:gid with no supplementary groups."""
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups"] + argv


def curl_unix(sock, path, uid=None, gid=None):
    """GETs path over the unix socket, as uid:gid if given; returns (status, body)."""
    argv = ["curl", "-s", "-o", "-", "-w", "\n%{http_code}", "--unix-socket", sock,
            f"http://heapprofd{path}"]
    if uid is not None:
        argv = as_user(uid, gid, argv)
    out = subprocess.run(argv, capture_output=True, timeout=30).stdout
    body, _, code = out.rpartition(b"\n")
    return int(code or 0), body


class UserWorkload:
    """The exact workload run as another user (setpriv execs it in place)."""

    def __init__(self, uid, gid):
        path = os.path.join(h.WORKLOADS, "exact")
        self.proc = subprocess.Popen(as_user(uid, gid, [path]), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE)
        line = self.proc.stdout.readline().decode().strip()
        h.check(line.startswith("ready "), f"workload as uid {uid}: {line!r}")
        self.pid = int(line.split()[1])

    def run(self):
        self.proc.stdin.write(b"go\n")
        self.proc.stdin.flush()
        h.check_equal(self.proc.stdout.readline().decode().strip(), "done", "workload line")

    def close(self):
        self.proc.kill()
        self.proc.wait()


def test_a_token_is_required_on_tcp_when_configured():
    with tempfile.TemporaryDirectory() as tmp:
        token_file = os.path.join(tmp, "token")
        token = "s3cret-token-of-the-test-0123456789"
        fd = os.open(token_file, os.O_WRONLY | os.O_CREAT, 0o600)
        os.write(fd, (token + "\n").encode())
        os.close(fd)
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
        # A token others can read is refused at start.
        os.chmod(token_file, 0o644)
        proc = subprocess.run([h.HEAPPROFD, "--listen", f"127.0.0.1:{h.free_port()}",
                               "--pin-dir", "none", "--token-file", token_file],
                              capture_output=True, timeout=30)
        h.check(proc.returncode != 0 and b"readable by others" in proc.stderr,
                f"a world-readable token file: rc {proc.returncode}, {proc.stderr!r}")


def test_a_non_loopback_address_needs_allow_remote():
    proc = subprocess.run([h.HEAPPROFD, "--listen", f"0.0.0.0:{h.free_port()}",
                           "--pin-dir", "none"], capture_output=True, timeout=30)
    h.check(proc.returncode != 0 and b"not a loopback address" in proc.stderr,
            f"--listen 0.0.0.0: rc {proc.returncode}, {proc.stderr!r}")
    port = h.free_port()
    d = subprocess.Popen([h.HEAPPROFD, "--listen", f"0.0.0.0:{port}", "--pin-dir", "none",
                          "--allow-remote"], stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        status = 0
        while time.monotonic() < deadline and status != 200:
            time.sleep(0.2)
            try:
                status, _ = h.get(f"http://127.0.0.1:{port}/healthz")
            except Exception:
                status = 0
        h.check_equal(status, 200, "/healthz of a daemon allowed to listen on 0.0.0.0")
    finally:
        d.terminate()
        d.wait(timeout=10)


def test_unix_socket_callers_profile_only_their_own_processes():
    subprocess.run(["useradd", "-r", "-M", "-s", "/usr/sbin/nologin", TEST_USER], check=True)
    try:
        user = pwd.getpwnam(TEST_USER)
        with tempfile.TemporaryDirectory() as tmp:
            os.chmod(tmp, 0o755)
            sock = os.path.join(tmp, "heapprofd.sock")
            with h.Daemon("--sample-interval", "1", "--unix", sock) as d, \
                    h.Workload("exact") as roots:
                theirs = UserWorkload(user.pw_uid, user.pw_gid)
                try:
                    uid, gid = user.pw_uid, user.pw_gid
                    status, body = curl_unix(sock, f"/debug/pprof/heap?pid={theirs.pid}", uid, gid)
                    h.check_equal(status, 200, "a user profiling its own process (attach)")
                    theirs.run()
                    status, body = curl_unix(sock, f"/debug/pprof/heap?pid={theirs.pid}", uid, gid)
                    h.check_equal(status, 200, "a user profiling its own process")
                    leaves = h.totals_by_leaf(h.decode(body).samples)
                    h.check("alloc_small" in leaves, f"its own profile has its functions: {leaves}")
                    status, body = curl_unix(sock, f"/debug/pprof/heap?pid={roots.pid}", uid, gid)
                    h.check_equal(status, 403, "a user profiling root's process")
                    h.check_one_line_reason(body, "403 body")
                    h.check(b"not its own" in body, f"403 reason: {body!r}")
                    h.check_equal(curl_unix(sock, "/debug/pprof/", uid, gid)[0], 200,
                                  "the index for a user")
                    for pid in (theirs.pid, roots.pid):
                        h.check_equal(curl_unix(sock, f"/debug/pprof/heap?pid={pid}")[0], 200,
                                      f"root profiling pid {pid}")
                finally:
                    theirs.close()
                d.check_alive()
    finally:
        subprocess.run(["userdel", TEST_USER], check=False)


if __name__ == "__main__":
    h.run([
        test_a_token_is_required_on_tcp_when_configured,
        test_a_non_loopback_address_needs_allow_remote,
        test_unix_socket_callers_profile_only_their_own_processes,
    ])
