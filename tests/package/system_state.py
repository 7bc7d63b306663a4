"""Helpers for tests/package/test_install.py, which installs the .deb on this
(shared) machine: one lock so that runs never overlap, dpkg with a wait for
its lock, and before/after listings of the file system that say what an
install, a remove or a purge left behind.

Python's standard library only.
"""

import fcntl
import os
import re
import subprocess
import time

import heapprof_harness as h

# One install test at a time on this machine, whichever tree or checkout
# runs it: they install the same package name system-wide.
LOCK_PATH = "/run/lock/heapprofd-package-test.lock"
# Written while the package this test installed is on the machine, so that a
# run killed half-way (a ctest timeout) is recognised and purged by the next.
MARK_PATH = "/run/lock/heapprofd-package-test.installed"
# How long to wait for another run of this test, or for another dpkg or apt.
LOCK_WAIT_S = 900.0
DPKG_LOCK_WAIT_S = 300.0
# dpkg's messages when another dpkg or apt holds its locks.
DPKG_LOCKED = ("dpkg frontend lock", "dpkg status database is locked", "lock was locked by")

# The trees listed before and after: every place dpkg, the maintainer
# scripts or the unit could put something. /lib is /usr/lib on this
# merged-/usr system.
LISTED_ROOTS = ("/etc", "/usr", "/var/lib", "/run", "/sys/fs/bpf")
# Changes that are the package's: anything named heapprofd where packages
# put files, enable links and deb-systemd-helper's records whatever their
# name, and the unit's runtime and pin directories. (Other heapprofd paths
# in /run or /sys/fs/bpf are other tests' sockets and pin directories.)
OURS = re.compile(r"^(/(etc|usr|var/lib)/.*heapprofd|/etc/systemd/"
                  r"|/var/lib/systemd/deb-systemd-helper"
                  r"|/run/heapprofd(/|$)|/sys/fs/bpf/heapprofd(/|$))")


class MachineLock:
    """An exclusive flock on LOCK_PATH, waited for up to LOCK_WAIT_S."""

    def __enter__(self):
        self.fd = os.open(LOCK_PATH, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except BlockingIOError:
                if time.monotonic() > deadline:
                    os.close(self.fd)
                    raise h.Failure(f"another run of the package test held {LOCK_PATH} "
                                    f"for {LOCK_WAIT_S:.0f} s") from None
                time.sleep(1.0)

    def __exit__(self, *exc):
        os.close(self.fd)
        return False


def dpkg(*args):
    """Runs dpkg ARGS, waiting for the dpkg lock if another dpkg or apt has it;
    returns the CompletedProcess (text), whatever its status."""
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    deadline = time.monotonic() + DPKG_LOCK_WAIT_S
    while True:
        r = subprocess.run(["dpkg", *args], capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, env=env, timeout=300)
        if r.returncode == 0 or not any(m in r.stderr for m in DPKG_LOCKED):
            return r
        h.check(time.monotonic() < deadline,
                f"dpkg {' '.join(args)}: the dpkg lock stayed taken for "
                f"{DPKG_LOCK_WAIT_S:.0f} s: {r.stderr}")
        time.sleep(2.0)


def dpkg_ok(*args):
    """dpkg ARGS, which must succeed; returns its output."""
    r = dpkg(*args)
    h.check(r.returncode == 0, f"dpkg {' '.join(args)} exited with {r.returncode}:\n"
                               f"{r.stdout}{r.stderr}")
    return r.stdout + r.stderr


def package_status(name):
    """dpkg's status of package `name` ('install ok installed', ...), or '' if
    dpkg does not know it."""
    r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", name], capture_output=True,
                       text=True)
    return r.stdout.strip() if r.returncode == 0 else ""


def listing():
    """{path: what} for every path under LISTED_ROOTS: 'dir', 'file', or
    'link -> target'."""
    found = {}
    for root in LISTED_ROOTS:
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames + filenames:
                path = os.path.join(dirpath, name)
                if os.path.islink(path):
                    found[path] = "link -> " + os.readlink(path)
                else:
                    found[path] = "dir" if name in dirnames else "file"
    return found


def is_ours(path):
    """True if a change at `path` is the package's doing (or could be)."""
    return OURS.match(path) is not None


def difference(before, after):
    """The changes from one listing to another: (ours, others), each a sorted
    list of '+ path (what)', '- path' or '~ path (before => after)' lines.
    `others` are changes on this shared machine that are not the package's
    (another session's apt, a process's file in /run)."""
    ours, others = [], []
    for path in sorted(set(before) | set(after)):
        if path == LOCK_PATH or path == MARK_PATH:
            continue
        if path not in before:
            line = f"+ {path} ({after[path]})"
        elif path not in after:
            line = f"- {path}"
        elif before[path] != after[path]:
            line = f"~ {path} ({before[path]} => {after[path]})"
        else:
            continue
        (ours if is_ours(path) else others).append(line)
    return ours, others


def report(title, lines, limit=40):
    """Prints a titled list of changes (the first `limit` of them)."""
    print(f"{title}: {len(lines) or 'none'}", flush=True)
    for line in lines[:limit]:
        print(f"    {line}", flush=True)
    if len(lines) > limit:
        print(f"    ... and {len(lines) - limit} more", flush=True)


def exe_runs(path):
    """The pids of processes whose executable is `path`."""
    pids = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if os.readlink(f"/proc/{pid}/exe") == path:
                    pids.append(int(pid))
            except OSError:
                pass
    return pids
