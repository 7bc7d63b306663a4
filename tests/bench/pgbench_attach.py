#!/usr/bin/env python3
"""pgbench_attach.py - what heapprofd's attach accounting says under
PostgreSQL's pgbench (docs/operations.md, "Forks": the figures there).

Usage: pgbench_attach.py HEAPPROFD [--sampler inprocess|uprobe]
                         [--seconds 30] [--clients 8]

Makes a throw-away cluster (Debian's postgresql: initdb under the
postgres user, in a temporary directory, on a unix socket only), starts
heapprofd with `--comm postgres` (the postmaster and, as its forks, every
backend), then:

1. `pgbench -C -c CLIENTS -T SECONDS` (a new backend per transaction):
   prints attach_errors_total, attach_raced_total{reason},
   forks_attached_total against the fork events, and the fork-to-attached
   histogram (heapprofd_fork_attach_seconds).
2. `pgbench -c CLIENTS -T 5`: CLIENTS backends forked together at its
   start; prints the histogram's new entries and their mean (pids repeat
   after phase 1, so the index's per-process delays are not used).

Standard library only; run as root.
"""

import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

PGBIN = "/usr/lib/postgresql/15/bin"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url):
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read().decode()


def metrics(base):
    """{name or name{labels}: value} of /metrics."""
    out = {}
    for line in get(base + "/metrics").splitlines():
        if line and not line.startswith("#"):
            k, v = line.rsplit(" ", 1)
            out[k] = float(v)
    return out


def as_postgres(cmd, **kw):
    return subprocess.run(["runuser", "-u", "postgres", "--"] + cmd, check=True,
                          capture_output=True, text=True, **kw)


def histogram(m, before=None):
    """The fork-to-attached histogram as 'le: count' pairs (minus `before`)."""
    before = before or {}
    rows = []
    for k, v in m.items():
        g = re.fullmatch(r'heapprofd_fork_attach_seconds_bucket\{le="([^"]+)"\}', k)
        if g:
            rows.append(f"<={g.group(1)}s: {v - before.get(k, 0):g}")
    return ", ".join(rows)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("heapprofd")
    ap.add_argument("--sampler", default="inprocess")
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--clients", type=int, default=8)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="heapprofd-pg-")
    shutil.chown(tmp, "postgres", "postgres")
    data, sock = os.path.join(tmp, "data"), tmp
    d = None
    try:
        as_postgres([f"{PGBIN}/initdb", "-D", data, "-A", "trust"])
        as_postgres([f"{PGBIN}/pg_ctl", "-D", data, "-w", "-l", os.path.join(tmp, "log"),
                     "-o", f"-k {sock} -c listen_addresses='' -c max_connections=100",
                     "start"])
        as_postgres([f"{PGBIN}/pgbench", "-h", sock, "-i", "-q", "postgres"])
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        d = subprocess.Popen([a.heapprofd, "--listen", f"127.0.0.1:{port}", "--pin-dir", "none",
                              "--sampler", a.sampler, "--comm", "postgres"],
                             stderr=subprocess.PIPE, text=True)
        while "listening" not in d.stderr.readline():
            pass
        time.sleep(2)  # the rule's scan attaches the postmaster and its helpers
        m0 = metrics(base)
        as_postgres([f"{PGBIN}/pgbench", "-h", sock, "-C", "-c", str(a.clients), "-T",
                     str(a.seconds), "postgres"])
        time.sleep(2)
        m1 = metrics(base)
        forks = m1['heapprofd_process_events_total{event="fork"}'] - \
            m0['heapprofd_process_events_total{event="fork"}']
        print(f"sampler {a.sampler}, pgbench -C -c {a.clients} -T {a.seconds}:")
        raced = {r: m1['heapprofd_attach_raced_total{reason="%s"}' % r] for r in ("exited", "exec")}
        print(f"  attach_errors_total {m1['heapprofd_attach_errors_total']:g}, "
              f"attach_raced_total exited {raced['exited']:g} exec {raced['exec']:g}, "
              f"inprocess_fallbacks_total {m1['heapprofd_inprocess_fallbacks_total']:g}")
        attached = m1["heapprofd_forks_attached_total"] - m0["heapprofd_forks_attached_total"]
        print(f"  forks {forks:g}, attached {attached:g} ({attached / max(forks, 1):.0%})")
        n = m1["heapprofd_fork_attach_seconds_count"] - m0["heapprofd_fork_attach_seconds_count"]
        s = m1["heapprofd_fork_attach_seconds_sum"] - m0["heapprofd_fork_attach_seconds_sum"]
        print(f"  fork to attached: mean {s / max(n, 1) * 1e3:.0f} ms; {histogram(m1, m0)}")

        # 8 backends forked together, held for 5 s.
        bench = subprocess.Popen(["runuser", "-u", "postgres", "--", f"{PGBIN}/pgbench", "-h",
                                  sock, "-c", str(a.clients), "-T", "5", "postgres"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        _, bench_err = bench.communicate()
        if bench.returncode != 0:
            print(f"pgbench -c {a.clients} -T 5 failed ({bench.returncode}): {bench_err.strip()}")
        m2 = metrics(base)
        n = m2["heapprofd_fork_attach_seconds_count"] - m1["heapprofd_fork_attach_seconds_count"]
        s = m2["heapprofd_fork_attach_seconds_sum"] - m1["heapprofd_fork_attach_seconds_sum"]
        print(f"pgbench -c {a.clients} -T 5 (backends forked together): {n:g} attached, "
              f"mean {s / max(n, 1) * 1e3:.0f} ms from fork; {histogram(m2, m1)}")
        print(f"  attach_errors_total {m2['heapprofd_attach_errors_total']:g}")
        return 0
    finally:
        if d:
            d.terminate()
            d.wait()
            log = [l for l in d.stderr.read().splitlines() if "audit" not in l]
            print("  heapprofd log lines (audit left out): " + str(len(log)))
            for line in log[:10]:
                print("    " + line)
        subprocess.run(["runuser", "-u", "postgres", "--", f"{PGBIN}/pg_ctl", "-D", data,
                        "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
