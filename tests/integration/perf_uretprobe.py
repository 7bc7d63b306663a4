"""Return probes that another tool puts on a profiled process: perf uprobe
events opened with perf_event_open(2) (ctypes, no BPF), as `perf probe -x
BIN FUNC%return` or bpftrace's `uretprobe:` make them. While a function
with such a probe runs, its return address on the stack is the kernel's
uretprobe trampoline; the tests check that our stacks never show it."""

import contextlib
import ctypes
import os
import subprocess

from pprof_raw import check

SYS_PERF_EVENT_OPEN = 298  # x86-64
PERF_FLAG_FD_CLOEXEC = 8
UPROBE_PMU = "/sys/bus/event_source/devices/uprobe"


class PerfEventAttr(ctypes.Structure):
    """The start of struct perf_event_attr; the kernel takes a shorter one
    as long as `size` says how long it is (PERF_ATTR_SIZE_VER1, 72 bytes)."""
    _fields_ = [("type", ctypes.c_uint32), ("size", ctypes.c_uint32),
                ("config", ctypes.c_uint64), ("sample_period", ctypes.c_uint64),
                ("sample_type", ctypes.c_uint64), ("read_format", ctypes.c_uint64),
                ("flags", ctypes.c_uint64), ("wakeup_events", ctypes.c_uint32),
                ("bp_type", ctypes.c_uint32), ("config1", ctypes.c_uint64),
                ("config2", ctypes.c_uint64)]


def file_offset_of(path, symbol):
    """The file offset of `symbol` in the ELF file `path` (what a uprobe takes):
    its address from nm, through the PT_LOAD header that holds it."""
    nm = subprocess.run(["nm", "--defined-only", path], capture_output=True, text=True,
                        check=True).stdout
    addrs = [int(f[0], 16) for f in (line.split() for line in nm.splitlines())
             if len(f) == 3 and f[2] == symbol]
    check(len(addrs) == 1, f"{path}: expected one symbol {symbol}, nm shows {len(addrs)}")
    out = subprocess.run(["readelf", "-lW", path], capture_output=True, text=True,
                         check=True).stdout
    for line in out.splitlines():
        f = line.split()
        if f and f[0] == "LOAD":
            off, vaddr, filesz = int(f[1], 16), int(f[2], 16), int(f[4], 16)
            if vaddr <= addrs[0] < vaddr + filesz:
                return addrs[0] - vaddr + off
    check(False, f"{path}: {symbol} at {addrs[0]:#x} is in no PT_LOAD")


def _uprobe_pmu():
    """(the uprobe PMU's type, the config bit that asks for a return probe)."""
    with open(f"{UPROBE_PMU}/type") as f:
        pmu = int(f.read())
    with open(f"{UPROBE_PMU}/format/retprobe") as f:
        fmt = f.read().strip()  # "config:0"
    check(fmt.startswith("config:"), f"{UPROBE_PMU}/format/retprobe: unexpected {fmt!r}")
    return pmu, 1 << int(fmt.split(":")[1])


@contextlib.contextmanager
def uretprobes(pid, path, symbols):
    """Return probes on `symbols` of `path` in every thread of `pid`, for
    the duration of the block."""
    pmu, retprobe = _uprobe_pmu()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    path_buf = ctypes.create_string_buffer(os.fsencode(path))
    fds = []
    try:
        for tid in sorted(int(t) for t in os.listdir(f"/proc/{pid}/task")):
            for symbol in symbols:
                attr = PerfEventAttr(type=pmu, size=ctypes.sizeof(PerfEventAttr),
                                     config=retprobe, config1=ctypes.addressof(path_buf),
                                     config2=file_offset_of(path, symbol))
                fd = libc.syscall(SYS_PERF_EVENT_OPEN, ctypes.byref(attr), tid, -1, -1,
                                  PERF_FLAG_FD_CLOEXEC)
                check(fd >= 0, f"perf_event_open: a return probe on {path}:{symbol} "
                      f"for thread {tid}: {os.strerror(ctypes.get_errno())}")
                fds.append(fd)
        yield
    finally:
        for fd in fds:
            os.close(fd)
