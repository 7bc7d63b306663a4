"""Times a cold and a warm scrape of a python3 process: the first profile
reads the DWARF and symbol tables of every file on the stacks, later ones are
served from the symbol cache (daemon/symbols/symbol_cache.h).

    python3 tests/bench/scrape_bench.py build/heapprofd [--scrapes N]

The target imports a dozen extension modules, allocates for a while and then
holds still, so every scrape names the same addresses. Prints the cold time,
the median of the warm ones, the number of locations and the daemon's RSS.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import heapprof_harness as h  # noqa: E402

# Allocates through json, sqlite3, decimal and ElementTree between "go" and "done".
TARGET = r"""
import json, sqlite3, decimal, hashlib, xml.etree.ElementTree as ET, sys, time
print("ready", __import__("os").getpid(), flush=True)
sys.stdin.readline()
keep = []
for r in range(200):
    keep.append(json.dumps({str(i): [i] * 10 for i in range(2000)})[:100])
    s = sqlite3.connect(":memory:"); s.execute("create table t(x)")
    s.executemany("insert into t values (?)", [(i,) for i in range(500)]); s.close()
    keep.append(decimal.Decimal(r) ** 50); keep.append(ET.fromstring("<a>%d</a>" % r))
    keep.append(hashlib.sha256(b"x" * r).hexdigest())
print("done", flush=True)
sys.stdin.readline()
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("heapprofd")
    ap.add_argument("--scrapes", type=int, default=20, help="warm scrapes (default 20)")
    args = ap.parse_args()
    h.HEAPPROFD = os.path.abspath(args.heapprofd)
    h.WORKLOADS = os.path.dirname(h.HEAPPROFD)  # only checked to be a directory
    with h.Daemon() as d:
        target = subprocess.Popen([sys.executable, "-c", TARGET], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        try:
            pid = int(target.stdout.readline().split()[1])
            d.profile(f"/debug/pprof/heap?pid={pid}")  # attaches
            target.stdin.write("go\n")
            target.stdin.flush()
            h.check_equal(target.stdout.readline().strip(), "done", "target")
            times = []
            for _ in range(1 + args.scrapes):
                t0 = time.monotonic()
                body = d.profile(f"/debug/pprof/heap?pid={pid}")
                times.append(time.monotonic() - t0)
            locations = len(h.decode(body).locations)
            with open(f"/proc/{d.proc.pid}/status") as f:
                rss = next(ln.split()[1] for ln in f if ln.startswith("VmRSS"))
        finally:
            target.kill()
            target.wait()
    print(f"cold scrape {times[0] * 1000:.1f} ms, warm scrape (median of {args.scrapes}) "
          f"{statistics.median(times[1:]) * 1000:.1f} ms, "
          f"{locations} locations, "
          f"daemon RSS {int(rss) // 1024} MiB")


if __name__ == "__main__":
    main()
