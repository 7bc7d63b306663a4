"""Measures heapprofd's memory under a service-like load, for the memory
request and limit of deploy/kubernetes/heapprofd.yaml.

    python3 tests/bench/daemon_memory.py build/heapprofd [--seconds 120]

The daemon runs at the default sample interval in a memory cgroup of its
own, as in a container, so what it is charged for is what a pod's limit
counts: its RSS, and the kernel memory of the BPF maps it creates
(charged to the creator's cgroup since Linux 5.11), plus page cache of the
files it reads (reclaimable). The load, for --seconds:
  - 8 python3 processes, each looping over json, sqlite3, decimal, ElementTree
    and hashlib work that keeps a bounded working set (allocations and
    frees, a dozen shared libraries: unwind tables and symbols per file);
  - 4 redis-server processes (jemalloc) driven by redis-benchmark with
    SET/GET/LPUSH/HSET of 64..4096-byte values, when redis is installed;
  - a scraper that every second gets the all-process heap profile,
    /metrics and each process's own profile (15-60 s apart in production:
    this is 15-60 times a normal scrape load), and every 10 s a 5-second
    delta profile.
Every 0.5 s it reads the daemon's VmRSS and the cgroup's usage; it prints
the peaks (VmHWM; the cgroup's max usage, its kernel part, and its rss and
cache at the end), the BPF maps' charged memory (memlock in fdinfo) and
the daemon's mean CPU use.

Needs root, cgroup v1 or v2 with the memory controller; redis
(redis-server, redis-tools) is optional. Only loopback traffic. Python's
standard library only.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import heapprof_harness as h  # noqa: E402

# A long-running python service: a bounded working set that churns.
PYTHON_SERVICE = r"""
import json, sqlite3, decimal, hashlib, random, xml.etree.ElementTree as ET, sys, time
print("ready", __import__("os").getpid(), flush=True)
keep, r = [], 0
while True:
    r += 1
    doc = json.dumps({str(i): [i] * random.randint(1, 40) for i in range(500)})
    db = sqlite3.connect(":memory:"); db.execute("create table t(x)")
    db.executemany("insert into t values (?)", [(doc[i:i + 50],) for i in range(0, 5000, 50)])
    keep.append(db.execute("select group_concat(x) from t").fetchone()[0]); db.close()
    keep.append(decimal.Decimal(r) ** random.randint(10, 200))
    keep.append(ET.fromstring("<a>" + "<b>%d</b>" % r * random.randint(1, 50) + "</a>"))
    keep.append(hashlib.sha256(doc.encode()).hexdigest() * random.randint(1, 100))
    if len(keep) > 4000:
        del keep[:random.randint(100, 2000)]
    time.sleep(0.002)
"""

N_PYTHON = 8
N_REDIS = 4
SAMPLE_EVERY_S = 0.5
SCRAPE_EVERY_S = 1.0
DELTA_EVERY_S = 10.0


class Cgroup:
    """A memory cgroup of our own, v2 if the memory controller is there, else v1."""

    def __init__(self, name):
        v2 = "/sys/fs/cgroup"
        if os.path.exists(f"{v2}/cgroup.controllers") and \
                "memory" in open(f"{v2}/cgroup.controllers").read().split():
            self.path, self.v2 = f"{v2}/{name}", True
        else:
            self.path, self.v2 = f"/sys/fs/cgroup/memory/{name}", False
        h.check(os.path.isdir(os.path.dirname(self.path)), "no memory cgroup hierarchy")
        os.mkdir(self.path)

    def read(self, name):
        with open(f"{self.path}/{name}") as f:
            return f.read()

    def usage(self):
        """Bytes charged now."""
        return int(self.read("memory.current" if self.v2 else "memory.usage_in_bytes"))

    def peak(self):
        """(max bytes charged, max kernel bytes charged or None)."""
        if self.v2:
            return int(self.read("memory.peak")), None
        return (int(self.read("memory.max_usage_in_bytes")),
                int(self.read("memory.kmem.max_usage_in_bytes")))

    def stat(self):
        """memory.stat as a dict."""
        return {k: int(v) for k, v in (line.split() for line in self.read("memory.stat").splitlines())}

    def remove(self):
        """Removes the cgroup (its processes have exited)."""
        for _ in range(50):
            try:
                os.rmdir(self.path)
                return
            except OSError:
                time.sleep(0.1)


def status_kib(pid, field):
    """A field of /proc/PID/status in KiB."""
    with open(f"/proc/{pid}/status") as f:
        return int(next(line.split()[1] for line in f if line.startswith(field + ":")))


def cpu_seconds(pid):
    """User plus system CPU time of process `pid`, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_redis(n):
    """n redis-servers on free ports and a redis-benchmark loop on each."""
    procs = []
    for _ in range(n):
        port = h.free_port()
        server = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                                   "--save", "", "--appendonly", "no", "--maxmemory", "256mb",
                                   "--maxmemory-policy", "allkeys-random"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while subprocess.run(["redis-cli", "-p", str(port), "ping"], capture_output=True,
                             text=True).stdout.strip() != "PONG":
            h.check(time.monotonic() < deadline, f"redis-server on port {port} did not start")
            time.sleep(0.1)
        bench = subprocess.Popen(
            ["sh", "-c", f"while :; do for d in 64 512 4096; do redis-benchmark -q -p {port} "
                         f"-r 200000 -n 50000 -d $d -t set,get,lpush,hset; done; done"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs += [server, bench]
    return procs, [p.pid for p in procs[0::2]]


def start_python(n):
    """n python3 services; returns (processes, pids)."""
    procs, pids = [], []
    for _ in range(n):
        p = subprocess.Popen([sys.executable, "-c", PYTHON_SERVICE], stdout=subprocess.PIPE,
                             text=True)
        pids.append(int(p.stdout.readline().split()[1]))
        procs.append(p)
    return procs, pids


def scrape(d, pids, stop, counts):
    """The scraper's loop (see the module's doc)."""
    last_delta = 0.0
    while not stop.is_set():
        t0 = time.monotonic()
        paths = ["/debug/pprof/heap", "/metrics"] + [f"/debug/pprof/heap?pid={p}" for p in pids]
        if t0 - last_delta > DELTA_EVERY_S:
            last_delta = t0
            threading.Thread(target=d.get, args=("/debug/pprof/heap?seconds=5",),
                             daemon=True).start()
        for path in paths:
            status, _ = d.get(path)
            counts[status] = counts.get(status, 0) + 1
        stop.wait(max(0.0, SCRAPE_EVERY_S - (time.monotonic() - t0)))


def bpf_map_memlock(pid):
    """Bytes of BPF map memory the kernel reports for the maps process `pid`
    holds (the memlock: lines of /proc/PID/fdinfo, each map once)."""
    maps = {}
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                info = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        if "map_id" in info and "memlock" in info:
            maps[int(info["map_id"])] = int(info["memlock"])
    return sum(maps.values()), len(maps)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("heapprofd")
    ap.add_argument("--seconds", type=float, default=120.0)
    args = ap.parse_args()
    h.HEAPPROFD = os.path.abspath(args.heapprofd)
    h.WORKLOADS = os.path.dirname(h.HEAPPROFD)  # only checked to be a directory
    cg = Cgroup(f"heapprofd-memory-bench-{os.getpid()}")
    # The daemon starts in the cgroup (so its maps are charged there): this
    # process joins it for the fork, then goes back.
    own = open("/proc/self/cgroup").read()
    procs = []
    try:
        with open(f"{cg.path}/cgroup.procs", "w") as f:
            f.write(str(os.getpid()))
        d = h.Daemon()
        d.__enter__()
        # Our own cgroup: the 0:: line (v2), or the memory controller's (v1).
        ours = [line.split(":", 2) for line in own.splitlines()]
        back = next(path for _, ctrl, path in ours
                    if (ctrl == "" if cg.v2 else "memory" in ctrl.split(",")))
        root = "/sys/fs/cgroup" if cg.v2 else "/sys/fs/cgroup/memory"
        with open(f"{root}{back}/cgroup.procs", "w") as f:
            f.write(str(os.getpid()))
        try:
            py, pids = start_python(N_PYTHON)
            procs += py
            redis = shutil.which("redis-server") and shutil.which("redis-benchmark")
            if redis:
                rp, rpids = start_redis(N_REDIS)
                procs += rp
                pids += rpids
            for pid in pids:
                d.profile(f"/debug/pprof/heap?pid={pid}")
            stop, counts = threading.Event(), {}
            scraper = threading.Thread(target=scrape, args=(d, pids, stop, counts), daemon=True)
            scraper.start()
            rss_peak = usage_peak = 0
            cpu0, t0 = cpu_seconds(d.proc.pid), time.monotonic()
            end = t0 + args.seconds
            while time.monotonic() < end:
                d.check_alive()
                rss_peak = max(rss_peak, status_kib(d.proc.pid, "VmRSS"))
                usage_peak = max(usage_peak, cg.usage())
                time.sleep(SAMPLE_EVERY_S)
            cpu = (cpu_seconds(d.proc.pid) - cpu0) / (time.monotonic() - t0)
            stop.set()
            scraper.join(30)
            hwm = status_kib(d.proc.pid, "VmHWM")
            anon, rfile = status_kib(d.proc.pid, "RssAnon"), status_kib(d.proc.pid, "RssFile")
            maps, nmaps = bpf_map_memlock(d.proc.pid)
            peak, kpeak = cg.peak()
            stat = cg.stat()
            _, metrics = d.get("/metrics")
        finally:
            for p in procs:
                p.kill()
            for p in procs:
                p.wait()
            d.__exit__(None, None, None)
    finally:
        cg.remove()
    mib = 1 << 20
    print(f"load: {N_PYTHON} python3 services"
          f"{f', {N_REDIS} redis-servers under redis-benchmark' if redis else ' (no redis here)'}"
          f", {len(pids)} processes profiled, {args.seconds:.0f} s; requests by status: {counts}")
    print(f"daemon RSS: peak {rss_peak // 1024} MiB sampled, VmHWM {hwm // 1024} MiB; "
          f"at the end RssAnon {anon // 1024} MiB, RssFile {rfile // 1024} MiB")
    print(f"daemon CPU: {cpu * 1000:.0f} millicores on average")
    print(f"BPF maps: {nmaps} maps, {maps / mib:.0f} MiB (memlock in /proc/PID/fdinfo)")
    kernel = f", of it kernel {kpeak / mib:.0f} MiB" if kpeak is not None else ""
    print(f"cgroup: peak {max(peak, usage_peak) / mib:.0f} MiB{kernel}; at the end "
          f"rss {stat.get('total_rss', stat.get('anon', 0)) / mib:.0f} MiB, "
          f"cache {stat.get('total_cache', stat.get('file', 0)) / mib:.0f} MiB")
    samples = [line for line in metrics.decode().splitlines()
               if line.startswith(("heapprofd_samples_total", "heapprofd_map_entries"))]
    print("metrics at the end: " + "; ".join(samples))


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    main()
