"""Unprivileged users made for test_hostile.py, and the ways to act as one.

The accounts are named hphst<pid of this run><letter>, a prefix of their own
so that test_access.py, which removes its own stale accounts by name, never
removes ours; the accounts of an earlier run that crashed (its pid gone) are
removed first.
"""

import os
import pwd
import re
import subprocess

import heapprof_harness as h

PREFIX = "hphst"
TAG = f"{PREFIX}{os.getpid()}"
ATTACKER = f"{TAG}a"
OUR_NAME = re.compile(rf"^{PREFIX}(\d+)[a-z]$")


def _stale(name):
    """Whether `name` is one of ours from a run that is over."""
    return h.stale_account(name, OUR_NAME, "test_hostile.py")


class Accounts:
    """ATTACKER, an ordinary user with a home directory of its own (where
    it keeps its programs and files), removed on the way out."""

    def __enter__(self):
        for u in pwd.getpwall():
            if _stale(u.pw_name):
                subprocess.run(["userdel", "-rf", u.pw_name], capture_output=True, timeout=60)
        r = subprocess.run(["useradd", "-r", "-m", "-U", "-s", "/usr/sbin/nologin", ATTACKER],
                           capture_output=True, timeout=60)
        h.check(r.returncode == 0, f"useradd {ATTACKER}: {r.stderr!r}")
        return self

    def __exit__(self, exc_type, exc, tb):
        subprocess.run(["userdel", "-rf", ATTACKER], capture_output=True, timeout=60)
        subprocess.run(["groupdel", ATTACKER], capture_output=True, timeout=60)
        return False


def uid(name=ATTACKER):
    return pwd.getpwnam(name).pw_uid


def home(name=ATTACKER):
    return pwd.getpwnam(name).pw_dir


def as_user(argv, name=ATTACKER):
    """argv run as user `name`, with its groups."""
    u = pwd.getpwnam(name)
    return ["setpriv", f"--reuid={u.pw_uid}", f"--regid={u.pw_gid}", "--init-groups"] + argv


def curl_argv(url, name=ATTACKER, max_time=None):
    """The curl command that GETs url as `name` (root if None), printing the
    body, then a line with the status."""
    argv = ["curl", "-s", "-g", "--noproxy", "*", "-o", "-", "-w", "\n%{http_code}"]
    if max_time is not None:
        argv += ["--max-time", str(max_time)]
    argv.append(url)
    return argv if name is None else as_user(argv, name)


def parse_curl(stdout):
    """(status, body) from what curl_argv printed; status 0: no answer."""
    body, _, code = stdout.rpartition(b"\n")
    return (int(code) if code.isdigit() else 0), body


def curl(url, name=ATTACKER, max_time=None):
    """GETs url as `name`; returns (status, body)."""
    r = subprocess.run(curl_argv(url, name, max_time), capture_output=True, timeout=120)
    return parse_curl(r.stdout)


class UserWorkload(h.Workload):
    """Workload `name` (tests/workloads) run as user `user`: setpriv execs it
    in place, so the pid it prints is the one started."""

    def __init__(self, name, *args, user=ATTACKER, path=None):
        path = path or os.path.join(h.WORKLOADS, name)
        super().__init__(name, command=as_user([path] + [str(a) for a in args], user))
