"""Memory over time and diffs against a base, over HTTP and in Chromium.

rounds.c, at --sample-interval 1 (every allocation recorded, so totals
are exact), keeps 300 x 1000 bytes in round 1; round 2 frees 100 of them
and keeps 40 x 5000 more: in use goes 300,000 -> 400,000 bytes and the
change from round 1 to round 2 is round1_alloc -100,000 and round2_alloc
+200,000, exactly. The daemon takes a history point every second
(--history-interval 1s) so that the test needs seconds, not minutes.

- The history JSON has those totals at points a period apart, outlives
  the process's detach and exit (as its kept profile does), and refuses
  bad input.
- A diff against a kept snapshot (base=ID) or an uploaded profile, read
  by `go tool pprof -top`, shows the change, and equals what `go tool
  pprof -diff_base` makes of the two plain profiles; bad bases get 4xx
  with a one-line reason.
- The page, in headless Chromium (tests/web/history.cjs): the index's
  sparkline, the chart with its axes titled with units, "Mark as base"
  and the diff's flame graph and table, growth red and shrinkage blue.
  Screenshots go to the build's artifacts/ (docs/ has copies).

Cost: about 25 s (four daemons, one Chromium).
"""

import gzip
import json
import os
import re
import subprocess
import tempfile
import time
import unittest
import urllib.error
import urllib.request

import heapprof_harness as h
import pprof_raw

NODE_MODULES = os.environ.get("WEB_NODE_MODULES", "")
ARTIFACTS = os.environ.get("HEAPPROF_ARTIFACTS", "")
BROWSER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "web", "history.cjs")
CHROMIUM = "/usr/bin/chromium"

ROUND1_INUSE, ROUND2_INUSE, ROUND2_ALLOCATED = 300_000, 400_000, 500_000
PERIOD = "1s"


def post(d, path, body=b""):
    """POSTs body to path; returns (status, body bytes)."""
    req = urllib.request.Request(d.url(path), data=body, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=h.REQUEST_TIMEOUT_S) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def history(d, pid):
    """The history JSON of pid (200 required)."""
    return json.loads(d.profile(f"/debug/pprof/history?pid={pid}"))


def wait_points(d, pid, inuse, n):
    """Waits until the history's last n points all have `inuse` bytes in use."""
    last = [None]

    def ok():
        last[0] = history(d, pid)["points"]
        return len(last[0]) >= n and all(p[1] == inuse for p in last[0][-n:])

    d.wait_until(ok, 15, lambda: f"history of {pid} never showed {n} points at {inuse} bytes: "
                                 f"{last[0]}")


def top_rows(text):
    """{function: flat bytes} of a `go tool pprof -top -unit=B` output."""
    rows = {}
    for line in text.splitlines():
        m = re.match(r"^\s*(-?\d+)B?\s+\S+%\s+\S+%\s+(-?\d+)B?\s+\S+%\s+(\S.*)$", line)
        if m:
            rows[m.group(3)] = int(m.group(1))
    return rows


def pprof_diff_base(base, current):
    """`go tool pprof -top -diff_base BASE CURRENT` in bytes, as top_rows."""
    with tempfile.TemporaryDirectory(prefix="heapprof-pprof-") as tmp:
        paths = []
        for name, body in (("base.pb.gz", base), ("cur.pb.gz", current)):
            paths.append(os.path.join(tmp, name))
            with open(paths[-1], "wb") as f:
                f.write(body)
        cmd = ["go", "tool", "pprof", "-symbolize=none", "-top", "-unit=B",
               "-diff_base", paths[0], paths[1]]
        r = subprocess.run(cmd, env=pprof_raw._go_env(tmp), capture_output=True, timeout=60)
        h.check(r.returncode == 0, f"{' '.join(cmd)}: {r.stderr.decode()}")
        return top_rows(r.stdout.decode())


class HistoryAndDiffOverHttp(unittest.TestCase):
    def test_history_and_diffs_have_the_exact_totals_and_pprof_reads_the_diff(self):
        with h.Daemon("--sample-interval", "1", "--history-interval", PERIOD) as d, \
                h.Workload("rounds") as w:
            d.profile(f"/debug/pprof/heap?pid={w.pid}")
            w.run()
            wait_points(d, w.pid, ROUND1_INUSE, 2)
            status, body = post(d, f"/debug/pprof/snapshot?pid={w.pid}")
            h.check_equal(status, 200, f"POST snapshot: {body!r}")
            snap = json.loads(body)
            h.check(re.fullmatch(r"[0-9a-f]{16}", snap["id"]) and snap["pid"] == w.pid,
                    f"snapshot answer: {snap}")
            plain_base = d.profile(f"/debug/pprof/heap?pid={w.pid}")
            w.run()
            wait_points(d, w.pid, ROUND2_INUSE, 2)

            hist = history(d, w.pid)
            h.check_equal((hist["pid"], hist["comm"], hist["live"], hist["period_seconds"]),
                          (w.pid, "rounds", True, 1), "history header")
            times = [p[0] for p in hist["points"]]
            gaps = [b - a for a, b in zip(times, times[1:])]
            # A point a period apart: the thread may wake late on a busy
            # machine (and then skips what it missed), never early.
            h.check(gaps and all(g > 0 for g in gaps) and
                    900 <= (times[-1] - times[0]) / len(gaps) <= 3000,
                    f"gaps between points (ms): {gaps}")
            h.check(abs(times[-1] / 1000 - time.time()) < 10, f"last point at {times[-1]} ms")
            h.check(any(p[1] == ROUND1_INUSE for p in hist["points"]), f"round 1: {hist}")
            h.check_equal(hist["points"][-1][1:], [ROUND2_INUSE, 240, ROUND2_ALLOCATED, 340],
                          "last point: inuse bytes, objects, allocated bytes, objects")
            entry = d.index_entry(w.pid)
            h.check_equal(entry["history_inuse_bytes"][-1], ROUND2_INUSE, "index sparkline")

            diff = d.profile(f"/debug/pprof/heap?pid={w.pid}&base={snap['id']}")
            want = {"round1_alloc": -100_000, "round2_alloc": 200_000}
            got = top_rows(pprof_raw.pprof(diff, "-top", "-unit=B"))
            h.check_equal({f: got.get(f) for f in want}, want, "go tool pprof -top of the diff")
            by_pprof = pprof_diff_base(plain_base, d.profile(f"/debug/pprof/heap?pid={w.pid}"))
            h.check_equal({f: by_pprof.get(f) for f in want}, want, "go tool pprof -diff_base")
            raw = pprof_raw.pprof(diff, "-raw")
            h.check("pprof::base:[true]" in raw, "the base's samples are labelled pprof::base")

            folded = d.profile(f"/debug/pprof/heap?pid={w.pid}&base={snap['id']}&format=folded")
            leaves = {l.rpartition(" ")[0].rsplit(";", 1)[-1]: int(l.rpartition(" ")[2])
                      for l in folded.decode().splitlines()}
            h.check_equal(leaves, want, "folded diff: one signed line per stack")
            status, body = post(d, f"/debug/pprof/heap?pid={w.pid}&format=folded", plain_base)
            h.check_equal((status, body), (200, folded), "diff against an uploaded base")

            self._bad_bases(d, w.pid, snap["id"])
            w.kill()
            d.wait_until(lambda: w.pid not in d.profiled_pids(), 10, "the killed workload goes")
            # "live" says whether it was a target at the last point: the next one.
            d.wait_until(lambda: not history(d, w.pid)["live"], 10,
                         lambda: f"the history after exit: {history(d, w.pid)}")
            kept = history(d, w.pid)
            h.check_equal(kept["points"][-1][1], ROUND2_INUSE, f"the history after exit: {kept}")
            after = d.profile(f"/debug/pprof/heap?pid={w.pid}&base={snap['id']}&format=folded")
            h.check_equal(after, folded, "a diff of the exited process's kept profile")
            d.check_alive()

    def _bad_bases(self, d, pid, snap_id):
        """Each bad base is refused with its status and a one-line reason."""
        other = os.getpid()
        cases = [
            ("GET", f"/debug/pprof/heap?pid={pid}&base=0123456789abcdef", b"", 404, "no snapshot"),
            ("GET", f"/debug/pprof/heap?pid={other}&base={snap_id}", b"", 409, f"of process {pid}"),
            ("GET", f"/debug/pprof/heap?pid={pid}&base=nothex", b"", 400, "bad base"),
            ("GET", f"/debug/pprof/heap?pid={pid}&base={snap_id}&seconds=1", b"", 400, "cumulative"),
            ("GET", f"/debug/pprof/heap?comm=rounds&base={snap_id}", b"", 400, "one process"),
            ("POST", f"/debug/pprof/heap?pid={pid}", b"\x1f\x8bnot gzip", 400, "not a profile"),
            ("POST", f"/debug/pprof/heap?pid={pid}", b"plain garbage \x00\x01\x02", 400,
             "not a profile"),
            ("POST", f"/debug/pprof/heap?pid={pid}&base={snap_id}", b"x", 400, "do not go together"),
            ("POST", f"/debug/pprof/heap?pid={pid}", b"\0" * (65 << 20), 413, "over 64 MiB"),
            ("POST", f"/debug/pprof/heap?pid={pid}", gzip.compress(b"\0" * (65 << 20)), 413,
             "over 64 MiB"),
            ("GET", f"/debug/pprof/snapshot?pid={pid}", b"", 405, "takes POST"),
            ("POST", "/metrics", b"", 405, "POST is for"),
            ("GET", "/debug/pprof/history?pid=abc", b"", 400, "bad or missing pid"),
            ("GET", f"/debug/pprof/history?pid={other}", b"", 404, "no history"),
        ]
        for method, path, body, status, reason in cases:
            got, text = post(d, path, body) if method == "POST" else d.get(path)
            h.check_equal(got, status, f"{method} {path}: {text!r}")
            h.check_one_line_reason(text, f"{method} {path}")
            h.check(reason in text.decode(), f"{method} {path}: {text!r} lacks {reason!r}")

    def test_the_history_outlives_a_detach_and_a_let_go_process_is_its_kept_profile(self):
        with h.Daemon("--sample-interval", "1", "--history-interval", PERIOD,
                      "--idle-detach", "3s") as d, h.Workload("rounds") as w:
            d.profile(f"/debug/pprof/heap?pid={w.pid}")
            w.run()
            # Held 3 s by the request: a point a second sees round 1 first.
            wait_points(d, w.pid, ROUND1_INUSE, 1)
            d.wait_detached(w.pid, "rounds, held by a request for 3 s")
            d.wait_until(lambda: not history(d, w.pid)["live"], 10, "history marked not live")
            kept = history(d, w.pid)
            h.check_equal(kept["points"][-1][1], ROUND1_INUSE, f"history after detach: {kept}")
            # The snapshot is the kept profile (the counts went with the
            # probes): against the empty profile of the process attached
            # again, all of round 1 is shrinkage.
            status, body = post(d, f"/debug/pprof/snapshot?pid={w.pid}")
            h.check_equal(status, 200, f"POST snapshot of a let-go process: {body!r}")
            folded = d.profile(f"/debug/pprof/heap?pid={w.pid}&base={json.loads(body)['id']}"
                               "&format=folded").decode()
            h.check(folded.strip().endswith(f"round1_alloc -{ROUND1_INUSE}"),
                    f"the diff against the kept profile: {folded!r}")
            d.check_alive()

    def test_snapshots_are_bounded_and_requests_may_race_on_them(self):
        with h.Daemon("--sample-interval", "1", "--history-interval", "0") as d, \
                h.Workload("rounds") as w:
            d.profile(f"/debug/pprof/heap?pid={w.pid}")
            w.run()
            ids = []
            # 40 snapshots from 8 threads at once: the store keeps the newest 32.
            import concurrent.futures
            with concurrent.futures.ThreadPoolExecutor(8) as pool:
                for status, body in pool.map(
                        lambda _: post(d, f"/debug/pprof/snapshot?pid={w.pid}"), range(40)):
                    h.check_equal(status, 200, f"POST snapshot: {body!r}")
                    ids.append(json.loads(body)["id"])
            h.check_equal(len(set(ids)), 40, "snapshot ids are distinct")
            kept = [i for i in ids if d.get(f"/debug/pprof/heap?pid={w.pid}&base={i}&format=text")[0] == 200]
            h.check_equal(len(kept), 32, "snapshots kept of 40 (SNAPSHOT_MAX)")
            status, body = d.get(f"/debug/pprof/history?pid={w.pid}")
            h.check_equal(status, 404, f"--history-interval 0 keeps no history: {body!r}")
            d.check_alive()


def _check_tools():
    """Fails with what to install if the browser or playwright-core is missing."""
    h.check(os.access(CHROMIUM, os.X_OK), f"{CHROMIUM} is missing (Debian: chromium)")
    h.check(NODE_MODULES and os.path.isdir(os.path.join(NODE_MODULES, "playwright-core")),
            f"playwright-core is not installed in WEB_NODE_MODULES={NODE_MODULES!r}: run "
            "npm ci --prefix web (scripts/install-deps.sh does)")
    h.check(ARTIFACTS, "HEAPPROF_ARTIFACTS is not set (run through ctest)")


def _is_red(fill):
    """Whether an rgb() colour is growth's: red over green and blue."""
    r, g, b = (int(x) for x in re.findall(r"\d+", fill)[:3])
    return r == 255 and g < 200 and b < 200


def _is_blue(fill):
    r, g, b = (int(x) for x in re.findall(r"\d+", fill)[:3])
    return b == 255 and r < 200 and g < 200


class HistoryAndDiffInChromium(unittest.TestCase):
    def test_the_page_charts_memory_and_marks_growth_and_shrinkage_apart(self):
        _check_tools()
        os.makedirs(ARTIFACTS, exist_ok=True)
        with h.Daemon("--sample-interval", "1", "--history-interval", PERIOD) as d, \
                h.Workload("rounds") as w, \
                tempfile.TemporaryDirectory(prefix="heapprof-web-") as home:
            d.profile(f"/debug/pprof/heap?pid={w.pid}")
            w.run()
            wait_points(d, w.pid, ROUND1_INUSE, 3)
            node = subprocess.Popen(["node", BROWSER, f"http://{d.address}", str(w.pid), ARTIFACTS],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE,
                                    env=dict(os.environ, NODE_PATH=NODE_MODULES, HOME=home))
            try:
                line = node.stdout.readline().decode().strip()
                h.check(line == "marked", f"history.cjs: expected 'marked', got {line!r}: "
                                          f"{node.stderr.read().decode() if not line else ''}")
                w.run()
                wait_points(d, w.pid, ROUND2_INUSE, 3)
                out, err = node.communicate(b"go\n", timeout=120)
            finally:
                if node.poll() is None:
                    node.kill()
            h.check(node.returncode == 0, f"history.cjs failed ({node.returncode}):\n{err.decode()}")
            seen = json.loads(out.decode().strip().splitlines()[-1])
            d.check_alive()

        h.check_equal(seen["console_errors"], [], "errors in the browser's console")
        h.check("in use over time" in seen["index_headers"], f"headers: {seen['index_headers']}")
        h.check(seen["spark_points"] >= 3, f"sparkline points: {seen}")
        c = seen["chart"]
        h.check_equal(c["state"], "ready", f"chart: {c}")
        for title in ("in use (bytes)", "allocated (bytes/s)", "time (local"):
            h.check(any(t.startswith(title) for t in c["titles"]), f"axis title {title!r}: {c}")
        h.check(c["y_ticks"] and all(re.fullmatch(r"\d+(\.\d+)? (B|KiB|MiB)", t) for t in c["y_ticks"]),
                f"in-use ticks are human-readable bytes: {c['y_ticks']}")
        h.check(all(t.endswith("/s") for t in c["rate_ticks"]), f"rate ticks: {c['rate_ticks']}")
        h.check(all(re.search(r"\d", t) for t in c["x_ticks"]) and c["x_ticks"],
                f"time ticks: {c['x_ticks']}")
        h.check("No change" in seen["just_marked"]["status"], f"just marked: {seen['just_marked']}")

        diff = seen["diff"]
        h.check(diff["legend_visible"] and "grew" in diff["legend"] and "shrank" in diff["legend"],
                f"legend: {diff}")
        frames = {f["title"].split(":")[0]: f for f in diff["frames"]}
        grew, shrank = frames.get("round2_alloc"), frames.get("round1_alloc")
        h.check(grew and "+195 KiB net" in grew["title"] and _is_red(grew["fill"]),
                f"round2_alloc grew 200,000 B, drawn red: {grew}")
        h.check(shrank and "−97.7 KiB net" in shrank["title"] and _is_blue(shrank["fill"]),
                f"round1_alloc shrank 100,000 B, drawn blue: {shrank}")
        rows = {r["name"]: r for r in diff["top"]}
        h.check(rows.get("round2_alloc", {}).get("cls") == "grow" and
                rows.get("round1_alloc", {}).get("cls") == "shrink",
                f"top table rows marked grow/shrink: {diff['top']}")
        h.check("+97.7 KiB net" in diff["status"], f"status line: {diff['status']}")
        h.check(not seen["after"]["legend_visible"] and
                any(f["title"].startswith("round2_alloc: 195 KiB") for f in seen["after"]["frames"]),
                f"back to the cumulative view: {seen['after']}")
        h.check("293 KiB → 391 KiB" in seen["after_chart"]["note"],
                f"the chart shows in use going from 300,000 to 400,000 B: {seen['after_chart']}")
        for name in ("web-history-index.png", "web-history.png", "web-diff.png"):
            path = os.path.join(ARTIFACTS, name)
            with open(path, "rb") as f:
                h.check(f.read(8) == b"\x89PNG\r\n\x1a\n" and os.path.getsize(path) > 10000,
                        f"{path} is not a screenshot")


if __name__ == "__main__":
    h.main()
