"""The ctest package.scripts: what the maintainer scripts (packaging/deb/)
do under systemd, which this machine does not run as PID 1.

test_install.py runs the scripts for real through dpkg, where they take
their no-systemd branch. Here each script runs as dpkg would call it, in a
private mount namespace (unshare --mount) that has its own /run (with or
without /run/systemd/system, which is how the scripts tell that systemd
runs) and its own /sys/fs/bpf (a tmpfs), with stand-ins for systemctl,
deb-systemd-invoke and deb-systemd-helper that record their arguments.
flock and rm are the real ones. Nothing outside the namespace changes.

Checked: install enables and never starts; an upgrade restarts only a
running daemon (try-restart) and keeps the admin's disable; a failed
restart does not fail the upgrade but says so; remove stops the unit,
upgrade does not; purge forgets the enable links and removes the pin
directory unless a daemon holds its lock.

Environment (tests/package/CMakeLists.txt): HEAPPROF_SOURCE_DIR. Needs
root (mount namespaces) and util-linux's unshare and flock. Python's
standard library only.
"""

import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
import heapprof_harness as h  # noqa: E402

SOURCE_DIR = os.environ.get("HEAPPROF_SOURCE_DIR", "")
SCRIPTS = os.path.join(SOURCE_DIR, "packaging", "deb")
UNIT = "heapprofd.service"
PIN_DIR = "/sys/fs/bpf/heapprofd"

# A stand-in: appends its name and arguments to $STUB_LOG; exits with
# $STUB_FAIL_<action> if set for its first non-option argument, else 0
# (deb-systemd-helper's was-enabled: $STUB_WAS_ENABLED, default 0 = yes).
STUB = """#!/bin/sh
echo "$(basename "$0") $*" >>"$STUB_LOG"
for arg in "$@"; do
    case $arg in -*) ;; *) action=$arg; break ;; esac
done
if [ "$(basename "$0")" = deb-systemd-helper ] && [ "$action" = was-enabled ]; then
    exit "${STUB_WAS_ENABLED:-0}"
fi
eval "status=\\${STUB_FAIL_$(echo "$action" | tr - _):-0}"
exit "$status"
"""


class Run:
    """One maintainer script run: its exit status, stderr, the stand-ins'
    calls, and whether the pin directory was there after it."""

    def __init__(self, status, stderr, calls, pin_dir_after):
        self.status = status
        self.stderr = stderr
        self.calls = calls
        self.pin_dir_after = pin_dir_after

    def __repr__(self):
        return (f"Run(status={self.status}, calls={self.calls}, stderr={self.stderr!r}, "
                f"pin_dir_after={self.pin_dir_after})")


def run_script(script, *args, systemd=True, pin_dir=False, pin_locked=False, env=None):
    """Runs packaging/deb/SCRIPT ARGS in a private mount namespace; returns a Run."""
    with tempfile.TemporaryDirectory(prefix="heapprofd-maint.") as tmp:
        stubs = os.path.join(tmp, "bin")
        os.mkdir(stubs)
        for name in ("systemctl", "deb-systemd-invoke", "deb-systemd-helper"):
            path = os.path.join(stubs, name)
            with open(path, "w") as f:
                f.write(STUB)
            os.chmod(path, 0o755)
        log = os.path.join(tmp, "calls.log")
        open(log, "w").close()
        result = os.path.join(tmp, "pin_dir_after")
        setup = ["mount -t tmpfs heapprofd-test /run", "mount -t tmpfs heapprofd-test /sys/fs/bpf"]
        if systemd:
            setup.append("mkdir -p /run/systemd/system")
        if pin_dir:
            setup += [f"mkdir -m 0700 {PIN_DIR}", f": >{PIN_DIR}/counts"]
        if pin_locked:
            # Held on fd 9 of this shell, as a daemon holds it while it runs.
            setup += [f"exec 9<{PIN_DIR}", "flock 9"]
        quoted = " ".join(f"'{a}'" for a in args)
        body = "; ".join(setup) + (f"; status=0; sh {SCRIPTS}/{script} {quoted} || status=$?; "
                                   f"if [ -e {PIN_DIR} ]; then echo yes >{result}; fi; "
                                   "exit $status")
        full_env = dict(os.environ, STUB_LOG=log, PATH=f"{stubs}:{os.environ['PATH']}")
        full_env.update(env or {})
        r = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-ec", body],
                           env=full_env, capture_output=True, text=True, timeout=60)
        with open(log) as f:
            calls = [line.strip() for line in f if line.strip()]
        return Run(r.returncode, r.stderr, calls, os.path.exists(result))


def invoked(run):
    """The deb-systemd-invoke and systemctl calls of a run, other than daemon-reload."""
    return [c for c in run.calls if c.startswith(("deb-systemd-invoke", "systemctl"))
            and "daemon-reload" not in c]


class MaintainerScriptsTest(unittest.TestCase):
    def test_install_enables_the_unit_and_starts_nothing(self):
        run = run_script("postinst", "configure", "")
        h.check_equal(run.status, 0, f"postinst configure: {run}")
        h.check(f"deb-systemd-helper enable {UNIT}" in run.calls, f"not enabled: {run}")
        h.check("systemctl --system daemon-reload" in run.calls, f"no daemon-reload: {run}")
        h.check_equal(invoked(run), [], "start, restart or stop calls on install")

    def test_upgrade_restarts_only_a_running_daemon(self):
        run = run_script("postinst", "configure", "0.0.9-1")
        h.check_equal(run.status, 0, f"postinst configure (upgrade): {run}")
        h.check_equal(invoked(run), [f"deb-systemd-invoke try-restart {UNIT}"],
                      "service calls on upgrade")

    def test_upgrade_keeps_a_disabled_unit_disabled(self):
        run = run_script("postinst", "configure", "0.0.9-1", env={"STUB_WAS_ENABLED": "1"})
        h.check_equal(run.status, 0, f"postinst configure (upgrade, disabled): {run}")
        h.check(f"deb-systemd-helper enable {UNIT}" not in run.calls, f"enabled again: {run}")
        h.check(f"deb-systemd-helper update-state {UNIT}" in run.calls, f"no update-state: {run}")

    def test_a_failed_restart_does_not_fail_the_upgrade_but_says_so(self):
        run = run_script("postinst", "configure", "0.0.9-1", env={"STUB_FAIL_try_restart": "1"})
        h.check_equal(run.status, 0, f"postinst configure with a failing restart: {run}")
        h.check("journalctl -u heapprofd" in run.stderr, f"no hint on stderr: {run}")

    def test_without_systemd_nothing_is_started_or_stopped(self):
        for script, args in (("postinst", ("configure", "")), ("postinst", ("configure", "0.0.9-1")),
                             ("prerm", ("remove",)), ("postrm", ("remove",))):
            run = run_script(script, *args, systemd=False)
            h.check_equal(run.status, 0, f"{script} {args} without systemd: {run}")
            h.check_equal([c for c in run.calls if not c.startswith("deb-systemd-helper")], [],
                          f"{script} {args} without systemd: systemctl calls")

    def test_remove_stops_the_unit_and_upgrade_does_not(self):
        run = run_script("prerm", "remove")
        h.check_equal((run.status, invoked(run)), (0, [f"deb-systemd-invoke stop {UNIT}"]),
                      f"prerm remove: {run}")
        run = run_script("prerm", "upgrade", "0.2.0-1")
        h.check_equal((run.status, run.calls), (0, []), f"prerm upgrade: {run}")

    def test_purge_forgets_the_links_and_removes_the_pin_directory(self):
        run = run_script("postrm", "purge", pin_dir=True)
        h.check_equal(run.status, 0, f"postrm purge: {run}")
        h.check(f"deb-systemd-helper purge {UNIT}" in run.calls, f"links not purged: {run}")
        h.check(not run.pin_dir_after, f"{PIN_DIR} is still there after purge: {run}")
        run = run_script("postrm", "purge")
        h.check_equal(run.status, 0, f"postrm purge without a pin directory: {run}")
        run = run_script("postrm", "remove", pin_dir=True)
        h.check(run.pin_dir_after, f"postrm remove removed {PIN_DIR}: {run}")

    def test_purge_leaves_a_pin_directory_a_daemon_holds(self):
        run = run_script("postrm", "purge", pin_dir=True, pin_locked=True)
        h.check_equal(run.status, 0, f"postrm purge with {PIN_DIR} locked: {run}")
        h.check(run.pin_dir_after, f"{PIN_DIR} removed while locked: {run}")
        h.check("in use by a running heapprofd" in run.stderr, f"no message: {run}")


if __name__ == "__main__":
    if os.geteuid() != 0:
        sys.exit(f"FAIL: mount namespaces need root; euid is {os.geteuid()}")
    h.main()
