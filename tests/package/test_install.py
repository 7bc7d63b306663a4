"""The ctest package.install: the .deb installed on this machine, run, removed
and purged, leaving nothing behind.

Steps: `dpkg -i`; the files where Debian wants them, the conffile, Depends
equal to the packages of the libraries the binary links, `heapprofd --help`
from /usr/sbin, the unit enabled and not started, `systemd-analyze verify`
on the installed unit; a foreground run of the installed binary (its
installed config, a free port, --pin-dir none) that serves exact profiles
of a real workload; `dpkg -r` (conffile and enable link stay, Debian's
convention) and `dpkg -P` (nothing stays), with before/after listings of
/etc, /usr, /var/lib, /run and /sys/fs/bpf that say what is left. The purge
runs twice: once while the pin directory /sys/fs/bpf/heapprofd is locked,
as a running daemon locks it (the postrm must leave it), once unlocked (the
postrm removes it).

This machine is shared, so the test:
  - holds a machine-wide lock (system_state.MachineLock): runs from other
    trees and checkouts wait for each other;
  - refuses to start, touching nothing, if a heapprofd package, its config,
    unit or enable link, or the pin directory is already there (another
    install would be replaced or purged);
  - never starts the unit: the only daemon it runs is the installed binary,
    in the foreground, on a free port, without pinning;
  - purges the package at the end whatever happened, and a run killed
    half-way is purged by the next run (system_state.MARK_PATH).
systemd is not PID 1 here, so the unit cannot be started or stopped by
the maintainer scripts on this machine; test_maintainer_scripts.py runs
their systemd branches in a mount namespace with stand-ins.

Environment (tests/package/CMakeLists.txt): HEAPPROF_DEB, WORKLOADS,
HEAPPROF_SOURCE_DIR. Needs root, dpkg, go (go tool pprof), systemd-analyze
and bpftool. Python's standard library only.
"""

import contextlib
import fcntl
import os
import re
import signal
import stat
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
import heapprof_harness as h  # noqa: E402
import system_state as s  # noqa: E402

DEB = os.environ.get("HEAPPROF_DEB", "")
SOURCE_DIR = os.environ.get("HEAPPROF_SOURCE_DIR", "")

PACKAGE = "heapprofd"
BINARY = "/usr/sbin/heapprofd"
UNIT = "/lib/systemd/system/heapprofd.service"
CONFFILE = "/etc/heapprofd/heapprofd.conf"
ENABLE_LINK = "/etc/systemd/system/multi-user.target.wants/heapprofd.service"
PIN_DIR = "/sys/fs/bpf/heapprofd"
DSH_RECORD = "/var/lib/systemd/deb-systemd-helper-enabled/heapprofd.service.dsh-also"
INSTALLED_FILES = (BINARY, UNIT, CONFFILE, "/usr/share/man/man8/heapprofd.8.gz",
                   "/usr/share/doc/heapprofd/copyright",
                   "/usr/share/doc/heapprofd/changelog.Debian.gz",
                   "/usr/share/doc/heapprofd/README.md.gz",
                   "/usr/share/doc/heapprofd/operations.md.gz")
# What the postrm says when it leaves a locked pin directory.
PIN_DIR_KEPT = f"{PIN_DIR} is in use by a running heapprofd; left in place"


class State:
    """What the run has done to the machine, for the tests and the cleanup."""
    before = None          # the listing before anything was installed
    mounted_bpffs = False  # True if this run mounted bpffs on /sys/fs/bpf
    made_pin_dir = False   # True once this run made /sys/fs/bpf/heapprofd


def installed():
    """True if dpkg has the package in any state but not-installed."""
    status = s.package_status(PACKAGE)
    return status != "" and not status.endswith(" not-installed")


def install():
    """dpkg -i the package (marking the machine first, see MARK_PATH)."""
    with open(s.MARK_PATH, "w") as f:
        f.write(f"{DEB}\n")
    out = s.dpkg_ok("-i", DEB)
    print(f"dpkg -i: {out.strip()}", flush=True)
    h.check_equal(s.package_status(PACKAGE), "install ok installed", "status after dpkg -i")


def purge(expect_in_output=None):
    """dpkg -P the package; returns its output."""
    out = s.dpkg_ok("-P", PACKAGE)
    print(f"dpkg -P: {out.strip()}", flush=True)
    h.check(not installed(), f"{PACKAGE} still known to dpkg after -P: "
                             f"{s.package_status(PACKAGE)!r}")
    if expect_in_output:
        h.check(expect_in_output in out, f"dpkg -P did not say {expect_in_output!r}: {out}")
    os.unlink(s.MARK_PATH)
    return out


def linked_packages(binary):
    """The packages of the libraries `binary` links directly (ELF NEEDED)."""
    dynamic = subprocess.run(["readelf", "-d", binary], capture_output=True, text=True,
                             check=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+)\]", dynamic)
    h.check(needed, f"no NEEDED libraries in {binary}")
    resolved = dict(re.findall(r"^\s*(\S+) => (/\S+)", subprocess.run(
        ["ldd", binary], capture_output=True, text=True, check=True).stdout, re.M))
    packages = set()
    for lib in needed:
        h.check(lib in resolved, f"ldd does not resolve {lib} of {binary}")
        path = resolved[lib]
        # dpkg knows a file by the path its package ships, /lib or /usr/lib.
        candidates = [path, os.path.realpath(path)]
        candidates += [p[4:] if p.startswith("/usr/") else "/usr" + p for p in list(candidates)]
        for candidate in candidates:
            r = subprocess.run(["dpkg-query", "-S", candidate], capture_output=True, text=True)
            if r.returncode == 0:
                packages.add(r.stdout.split(":")[0].strip())
                break
        else:
            raise h.Failure(f"no package owns {path} ({lib})")
    return packages


def check_installed_files():
    """The files, the conffile, the unit and the config as built."""
    for path in INSTALLED_FILES:
        h.check(os.path.isfile(path), f"{path} is not installed")
    h.check(os.stat(BINARY).st_mode & stat.S_IXUSR, f"{BINARY} is not executable")
    conffiles = subprocess.run(["dpkg-query", "-W", "-f=${Conffiles}", PACKAGE],
                               capture_output=True, text=True).stdout
    h.check(CONFFILE in conffiles, f"{CONFFILE} is not a conffile: {conffiles!r}")
    with open(CONFFILE) as a, open(os.path.join(SOURCE_DIR, "systemd",
                                                "heapprofd.conf.example")) as b:
        h.check(a.read() == b.read(), f"{CONFFILE} is not systemd/heapprofd.conf.example")
    with open(UNIT) as a, open(os.path.join(SOURCE_DIR, "systemd", "heapprofd.service")) as b:
        unit, source = a.read(), b.read()
    want = source.replace("ExecStart=/usr/local/sbin/heapprofd ", f"ExecStart={BINARY} ")
    h.check(unit == want, f"{UNIT} is not systemd/heapprofd.service with ExecStart={BINARY}")
    r = subprocess.run(["man", "-w", "heapprofd"], capture_output=True, text=True)
    h.check_equal(r.stdout.strip(), "/usr/share/man/man8/heapprofd.8.gz", "man -w heapprofd")


def check_depends():
    """Depends names exactly the packages of the libraries the binary links."""
    depends = subprocess.run(["dpkg-query", "-W", "-f=${Depends}", PACKAGE],
                             capture_output=True, text=True).stdout
    named = {d.strip().split()[0] for d in depends.split(",") if d.strip()}
    linked = linked_packages(BINARY)
    h.check_equal(sorted(named), sorted(linked),
                  f"Depends ({depends}) against the packages of the linked libraries")
    print(f"Depends: {depends}", flush=True)


def check_help_and_unit():
    """--help from /usr/sbin; the unit enabled, not started, verified."""
    r = subprocess.run([BINARY, "--help"], capture_output=True, text=True, timeout=30)
    h.check_equal(r.returncode, 0, f"{BINARY} --help exit status ({r.stderr})")
    h.check(r.stdout.startswith("usage: heapprofd"), f"{BINARY} --help printed {r.stdout[:200]!r}")
    h.check(os.path.islink(ENABLE_LINK), f"the unit is not enabled: no {ENABLE_LINK}")
    h.check_equal(os.readlink(ENABLE_LINK), UNIT, f"target of {ENABLE_LINK}")
    # deb-systemd-helper's record of the links it made, which purge removes.
    with open(DSH_RECORD) as f:
        h.check(ENABLE_LINK in f.read(), f"{DSH_RECORD} does not record {ENABLE_LINK}")
    h.check_equal(s.exe_runs(BINARY), [], f"processes running {BINARY} after install")
    if os.path.isdir("/run/systemd/system"):
        r = subprocess.run(["systemctl", "is-active", "heapprofd.service"],
                           capture_output=True, text=True)
        h.check_equal(r.stdout.strip(), "inactive", "systemctl is-active heapprofd after install")
    else:
        print("systemd is not PID 1 here: enabled checked by its link, not started by "
              "the absence of any process running /usr/sbin/heapprofd", flush=True)
    r = subprocess.run(["systemd-analyze", "verify", UNIT], capture_output=True, text=True,
                       timeout=60)
    h.check(r.returncode == 0 and "heapprofd" not in r.stdout + r.stderr,
            f"systemd-analyze verify {UNIT}: status {r.returncode}: {r.stdout}{r.stderr}")


def check_serves_a_workload():
    """The installed binary, with the installed config, serves exact profiles."""
    h.HEAPPROFD = BINARY  # the harness runs this binary
    with h.Daemon("--config", CONFFILE, "--sample-interval", "1") as d, \
            h.Workload("exact") as w:
        d.profile(f"/debug/pprof/heap?pid={w.pid}")
        w.run()
        totals = h.totals_by_leaf(h.decode(d.profile(f"/debug/pprof/heap?pid={w.pid}")).samples)
        for leaf, want in h.EXACT_EXPECTED.items():
            h.check_equal(totals.get(leaf), want, f"{leaf} served by {BINARY}")
        status, body = d.get("/healthz")
        h.check_equal((status, body.strip()), (200, b"ok"), "/healthz")
        w.finish()
    print(f"{BINARY} served the exact profile of workload exact (pid {w.pid}): "
          f"{len(h.EXACT_EXPECTED)} functions' totals as expected", flush=True)


def check_remove_keeps_only_config():
    """dpkg -r: the program goes, the conffile and the enable link stay."""
    out = s.dpkg_ok("-r", PACKAGE)
    print(f"dpkg -r: {out.strip()}", flush=True)
    h.check_equal(s.package_status(PACKAGE), "deinstall ok config-files", "status after dpkg -r")
    for path in INSTALLED_FILES:
        if path != CONFFILE:
            h.check(not os.path.exists(path), f"{path} is still there after dpkg -r")
    h.check(os.path.isfile(CONFFILE), f"{CONFFILE} is gone after dpkg -r (kept until purge)")
    ours, _ = s.difference(State.before, s.listing())
    s.report("left after dpkg -r (until purge)", ours)


def make_pin_dir():
    """/sys/fs/bpf/heapprofd with a pinned map in it, as a daemon leaves it."""
    os.mkdir(PIN_DIR, 0o700)
    State.made_pin_dir = True
    r = subprocess.run(["bpftool", "map", "create", f"{PIN_DIR}/counts", "type", "array",
                        "key", "4", "value", "4", "entries", "1", "name", "hp_pkg_test"],
                       capture_output=True, text=True)
    h.check_equal(r.returncode, 0, f"bpftool map create in {PIN_DIR} ({r.stderr})")


def check_left_behind(what, allow=()):
    """Fails if the package left anything but `allow` (path prefixes) since
    the first listing; prints the machine's other changes."""
    ours, others = s.difference(State.before, s.listing())
    left = [line for line in ours if not line.split()[1].startswith(allow)]
    s.report(f"left behind after {what}", left)
    s.report("other changes on this machine meanwhile (not the package's)", others, limit=10)
    h.check(not left, f"{what} left these behind:\n" + "\n".join(left))


class InstallTest(unittest.TestCase):
    def test_install_run_remove_and_purge_leave_nothing_behind(self):
        install()
        check_installed_files()
        check_depends()
        check_help_and_unit()
        ours, _ = s.difference(State.before, s.listing())
        s.report("installed", ours, limit=60)
        check_serves_a_workload()
        check_remove_keeps_only_config()
        # A daemon holds a lock on its pin directory while it runs; the purge
        # must leave such a directory alone.
        make_pin_dir()
        fd = os.open(PIN_DIR, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            purge(expect_in_output=PIN_DIR_KEPT)
        finally:
            os.close(fd)
        h.check(os.path.isfile(f"{PIN_DIR}/counts"), f"the purge removed the locked {PIN_DIR}")
        check_left_behind("dpkg -P", allow=(PIN_DIR,))

    def test_purge_removes_the_pinned_maps(self):
        h.check(os.path.isdir(PIN_DIR), f"{PIN_DIR} should be there from the test before")
        install()
        purge()
        h.check(not os.path.exists(PIN_DIR), f"dpkg -P left the unlocked {PIN_DIR}")
        check_left_behind("install and dpkg -P")


def refuse_to_touch_another_install():
    """Fails, changing nothing, if anything of a heapprofd install is here."""
    if os.path.exists(s.MARK_PATH):
        # This test's own install from a run that was killed: purge it.
        print(f"{s.MARK_PATH} is there: purging the package a killed run left", flush=True)
        if installed():
            s.dpkg_ok("-P", PACKAGE)
        os.unlink(s.MARK_PATH)
    found = [f"package {PACKAGE} ({s.package_status(PACKAGE)})"] if installed() else []
    found += [p for p in (UNIT, "/etc/heapprofd", ENABLE_LINK, PIN_DIR) if os.path.lexists(p)]
    h.check(not found, "a heapprofd install is on this machine, which this test would "
                       f"replace or purge; it changed nothing. Found: {', '.join(found)}")


def ensure_bpffs():
    """bpffs on /sys/fs/bpf (systemd mounts it at boot; here maybe not)."""
    if subprocess.run(["stat", "-f", "-c", "%T", "/sys/fs/bpf"], capture_output=True,
                      text=True).stdout.strip() != "bpf_fs":
        subprocess.run(["mount", "-t", "bpf", "bpf", "/sys/fs/bpf"], check=True)
        State.mounted_bpffs = True


def clean_up():
    """Puts the machine back: purges the package, removes the pin directory
    this run made, unmounts the bpffs it mounted if nothing else is in it."""
    if installed():
        print(f"cleanup: dpkg -P {PACKAGE}", flush=True)
        r = s.dpkg("-P", PACKAGE)
        if r.returncode != 0:
            print(f"cleanup: dpkg -P failed: {r.stdout}{r.stderr}; forcing", flush=True)
            s.dpkg("--purge", "--force-remove-reinstreq", "--force-depends", PACKAGE)
    if os.path.exists(s.MARK_PATH) and not installed():
        os.unlink(s.MARK_PATH)
    if State.made_pin_dir and os.path.isdir(PIN_DIR):
        subprocess.run(["rm", "-rf", PIN_DIR])
    if State.mounted_bpffs and set(os.listdir("/sys/fs/bpf")) <= {"maps.debug", "progs.debug"}:
        subprocess.run(["umount", "/sys/fs/bpf"])


@contextlib.contextmanager
def the_machine():
    """The machine for the tests: the machine-wide lock, no other heapprofd
    install (a Failure, changing nothing, if there is one), bpffs mounted and
    the listing before; the cleanup at the end, whatever happened."""
    with s.MachineLock():
        try:
            refuse_to_touch_another_install()
        except h.Failure as e:
            raise h.Failure(f"before any change: {e}") from None
        try:
            ensure_bpffs()
            State.before = s.listing()
            yield
        finally:
            clean_up()


def setUpModule():
    unittest.enterModuleContext(the_machine())


class Terminated(KeyboardInterrupt):
    """A SIGTERM (ctest stopping the test). A KeyboardInterrupt, the one
    exception unittest does not record as a failure and go on from: the
    tests stop there, and the cleanup runs (see the end of this file)."""


def terminated(*_):
    raise Terminated()


if __name__ == "__main__":
    if not DEB or not os.path.isfile(DEB):
        sys.exit(f"FAIL: HEAPPROF_DEB={DEB!r} is not a file (the fixture package.build "
                 "makes it; run through ctest)")
    if os.geteuid() != 0:
        sys.exit(f"FAIL: installing a package needs root; euid is {os.geteuid()}")
    # A SIGTERM (ctest stopping the test) still runs the cleanup.
    signal.signal(signal.SIGTERM, terminated)
    try:
        h.main()
    except Terminated:
        sys.exit("FAIL: terminated")
    finally:
        # unittest leaves the module's contexts only when its tests end: after
        # a SIGTERM, leave the_machine() here (after main()'s exit, a no-op).
        unittest.doModuleCleanups()
