"""The web page in a real browser: Debian's headless Chromium, driven by
playwright-core (tests/web/browser.cjs), opens the index of a running
daemon, clicks through to exact.c's page and reads the flame graph's frames
from the DOM: the workload's function names must be there, in each view
(in-use bytes, allocated objects, the leak view, an empty delta, the
icicle). Screenshots of the index and the process page are saved in the
build folder's artifacts/. Also: the page's files are served from the
binary with a content security policy, and the same access rules as the
profiles (a bearer token guards them too)."""

import json
import os
import subprocess
import tempfile
import unittest

import heapprof_harness as h

NODE_MODULES = os.environ.get("WEB_NODE_MODULES", "")
ARTIFACTS = os.environ.get("HEAPPROF_ARTIFACTS", "")
BROWSER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "web", "browser.cjs")
CHROMIUM = "/usr/bin/chromium"

# exact.c's functions whose blocks stay allocated, and the one whose are all freed.
KEPT = [f for f, v in h.EXACT_EXPECTED.items() if v[3] > 0]
FREED = "alloc_freed"


def _check_tools():
    """Fails with what to install if the browser or playwright-core is missing."""
    h.check(os.access(CHROMIUM, os.X_OK),
            f"{CHROMIUM} is missing (Debian: chromium); this test never skips")
    h.check(NODE_MODULES and os.path.isdir(os.path.join(NODE_MODULES, "playwright-core")),
            f"playwright-core is not installed in WEB_NODE_MODULES={NODE_MODULES!r}: run "
            "npm ci --prefix web (scripts/install-deps.sh does)")
    h.check(ARTIFACTS, "HEAPPROF_ARTIFACTS is not set (run through ctest)")


def _wait_until_all_older_than(d, pid, seconds):
    """Polls the leak view until every kept block is at least `seconds` old."""
    want = sum(h.EXACT_EXPECTED[f][3] for f in KEPT)
    got = [0]

    def all_old():
        body = d.profile(f"/debug/pprof/heap?pid={pid}&min_age={seconds}s&format=folded")
        got[0] = sum(int(l.rpartition(" ")[2]) for l in body.decode().splitlines())
        return got[0] == want

    d.wait_until(all_old, 10 + seconds,
                 lambda: f"the leak view of min_age={seconds}s shows {got[0]} bytes, not {want}")


def _names(frames):
    """Function names from the frames' titles ("name: value (pct%)")."""
    return {t.rsplit(": ", 1)[0] for t in frames}


class WebTest(unittest.TestCase):
    def test_chromium_shows_the_workloads_functions_in_the_flame_graph(self):
        _check_tools()
        os.makedirs(ARTIFACTS, exist_ok=True)
        with h.Daemon("--sample-interval", "1") as d, h.Workload("exact") as w:
            d.profile(f"/debug/pprof/heap?pid={w.pid}")
            w.run()
            _wait_until_all_older_than(d, w.pid, 1)
            with tempfile.TemporaryDirectory(prefix="heapprof-web-") as home:
                try:
                    r = subprocess.run(
                        ["node", BROWSER, f"http://{d.address}", str(w.pid), ARTIFACTS] + KEPT,
                        capture_output=True, timeout=150,
                        env=dict(os.environ, NODE_PATH=NODE_MODULES, HOME=home))
                except FileNotFoundError:
                    raise h.Failure("node is not installed (Debian: nodejs)") from None
            h.check(r.returncode == 0, f"browser.cjs failed ({r.returncode}):\n{r.stderr.decode()}")
            seen = json.loads(r.stdout)
            d.check_alive()

        h.check_equal(seen["console_errors"], [], "errors in the browser's console")
        h.check_equal(seen["index_row"][:2], [str(w.pid), "exact"], "the index row (pid, command)")
        for column in ("in use", "allocation rate", "profiled for", "held by", "cost", "sampler"):
            h.check(column in seen["index_headers"], f"no '{column}' column: {seen['index_headers']}")
        sampler = seen["index_row"][seen["index_headers"].index("sampler")]
        h.check(sampler.endswith(": c"), f"the sampler column names no entry family: {sampler!r}")
        h.check_equal(seen["title"], f"exact (pid {w.pid})", "the process page's title")

        inuse = seen["inuse"]
        h.check_equal(inuse["state"], "ready", f"in-use view: {inuse['status']}")
        missing = set(KEPT) - _names(inuse["frames"])
        h.check(not missing, f"in-use flame graph lacks {sorted(missing)}; frames: {inuse['frames']}")
        h.check(FREED not in _names(inuse["frames"]), f"{FREED} has nothing in use, yet is drawn")
        h.check("alloc_big" in inuse["labels"], f"alloc_big (83% wide) not labelled: {inuse['labels']}")
        h.check(any(t.startswith("alloc_big: 977 KiB") for t in inuse["frames"]),
                f"alloc_big's frame should say 977 KiB: {inuse['frames']}")
        h.check(set(KEPT) <= set(inuse["top"]), f"top table: {inuse['top']}")

        alloc = seen["alloc_objects"]
        h.check(FREED in _names(alloc["frames"]) and "sample_index=alloc_objects" in alloc["url"],
                f"allocated objects view lacks {FREED}: {alloc['frames']}")
        h.check(f"{FREED}: 500 objects" in " ".join(alloc["frames"]),
                f"{FREED} made 500 objects: {alloc['frames']}")

        leak = seen["leak"]
        h.check(set(KEPT) <= _names(leak["frames"]) and FREED not in _names(leak["frames"]),
                f"leak view (min_age=1s): {leak['frames']}")
        delta = seen["delta"]
        h.check(delta["state"] == "ready" and not delta["frames"] and "No samples" in delta["status"],
                f"a 1 s delta of an idle process should be empty: {delta}")
        h.check(set(KEPT) <= _names(seen["icicle"]["frames"]), "icicle view")
        h.check_equal(seen["bad_pid"]["state"], "error", "the page of pid=abc")

        for name in ("web-index.png", "web-process.png"):
            path = os.path.join(ARTIFACTS, name)
            with open(path, "rb") as f:
                head = f.read(8)
            h.check(head == b"\x89PNG\r\n\x1a\n" and os.path.getsize(path) > 10000,
                    f"{path} is not a screenshot")

    def test_the_pages_files_come_from_the_binary_with_a_content_policy(self):
        with h.Daemon() as d:
            for path, kind in (("/", "text/html"), ("/process", "text/html"),
                               ("/static/d3.min.js", "text/javascript"),
                               ("/static/d3-flamegraph.min.js", "text/javascript"),
                               ("/static/process.js", "text/javascript"),
                               ("/static/heapprofd.css", "text/css")):
                r = d.request(path)
                h.check_equal(r.status, 200, f"GET {path}")
                h.check(r.headers.get("content-type", "").startswith(kind),
                        f"GET {path}: content type {r.headers.get('content-type')}")
                h.check("script-src" not in r.headers.get("content-security-policy", "x") and
                        "default-src 'self'" in r.headers.get("content-security-policy", ""),
                        f"GET {path}: scripts only from the daemon itself")
            js = d.request("/static/d3.min.js").body
            with open(os.path.join(os.path.dirname(BROWSER), "..", "..", "third_party", "d3",
                                   "d3.min.js"), "rb") as f:
                h.check(js == f.read(), "the served d3.min.js is not third_party/d3/d3.min.js")
            page = d.request("/process").body.decode()
            h.check("http://" not in page and "https://" not in page,
                    "the page refers to another host (no CDN at run time)")
            status, body = d.get("/static/nosuch.js")
            h.check_equal(status, 404, "GET /static/nosuch.js")

    def test_a_token_guards_the_page_as_it_guards_the_profiles(self):
        with tempfile.NamedTemporaryFile("w", suffix=".token") as f:
            f.write("s3cret-for-the-web-test\n")
            f.flush()
            with h.Daemon("--token-file", f.name) as d:
                for path in ("/", "/process?pid=1", "/static/d3.min.js", "/debug/pprof/?format=json"):
                    h.check_equal(d.get(path)[0], 401, f"GET {path} without the token")
                    r = h.request_with_headers(d.url(path),
                                               {"Authorization": "Bearer s3cret-for-the-web-test"})
                    h.check_equal(r.status, 200, f"GET {path} with the token")


if __name__ == "__main__":
    h.main()
