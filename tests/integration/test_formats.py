"""The profile formats for people and for other tools, checked against
readers we did not write: format=text (the top table) line for line against
`go tool pprof -top`, format=folded against the stacks `go tool pprof -raw`
decodes, for every sample type; every profile decoded a second time by the
npm package pprof-format under node, its totals equal to pprof's; the JSON
index against the profile; bad format and sample_index values refused.
exact.c at --sample-interval 1, so every figure is exact."""

import json
import os
import subprocess
import tempfile
import unittest

import heapprof_harness as h

TYPES = [t for t, _ in h.SAMPLE_TYPES]
# The node_modules with pprof-format (npm ci --prefix web; scripts/install-deps.sh).
NODE_MODULES = os.environ.get("WEB_NODE_MODULES", "")
DECODER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "web", "decode.cjs")


class Shared:
    """The daemon and exact.c (attached, run once) that the tests share (setUpModule)."""

    d = None
    w = None

    def __enter__(self):
        Shared.d = h.Daemon("--sample-interval", "1").__enter__()
        Shared.w = h.Workload("exact")
        Shared.d.profile(f"/debug/pprof/heap?pid={Shared.w.pid}")
        Shared.w.run()
        return self

    def __exit__(self, *exc):
        if Shared.w is not None:
            Shared.w.kill()
        return Shared.d.__exit__(*exc) if Shared.d is not None else False


def FIXTURE():
    """The shared daemon and workload."""
    return Shared.d, Shared.w


def _top_rows(text):
    """The lines of a -top table from its 'Showing nodes' line on."""
    lines = text.splitlines()
    starts = [i for i, l in enumerate(lines) if l.startswith("Showing nodes accounting for")]
    h.check(starts, f"no 'Showing nodes' line in:\n{text}")
    return lines[starts[0]:]


def _folded_from_pprof(proto, type_index):
    """{stack: value} from `go tool pprof -raw`: root first, zero values left out."""
    want = {}
    for s in h.decode(proto).samples:
        if s.values[type_index] and s.frames:
            key = ";".join(reversed(s.frames))
            want[key] = want.get(key, 0) + s.values[type_index]
    return want


def _parse_folded(text):
    """{stack: value} of folded text; fails on a malformed or repeated line."""
    got = {}
    for line in text.splitlines():
        stack, _, value = line.rpartition(" ")
        h.check(stack and value.lstrip("-").isdigit(), f"malformed folded line {line!r}")
        h.check(stack not in got, f"stack printed twice: {stack!r}")
        got[stack] = int(value)
    return got


def _node_decode(proto):
    """pprof-format's reading of a gzipped profile (tests/web/decode.cjs)."""
    h.check(NODE_MODULES and os.path.isdir(os.path.join(NODE_MODULES, "pprof-format")),
            f"pprof-format is not installed in WEB_NODE_MODULES={NODE_MODULES!r}: run "
            "npm ci --prefix web (scripts/install-deps.sh does); this test never skips")
    with tempfile.NamedTemporaryFile(suffix=".pb.gz") as f:
        f.write(proto)
        f.flush()
        try:
            r = subprocess.run(["node", DECODER, f.name], capture_output=True, timeout=60,
                               env=dict(os.environ, NODE_PATH=NODE_MODULES))
        except FileNotFoundError:
            raise h.Failure("node is not installed (Debian: nodejs)") from None
    h.check(r.returncode == 0, f"decode.cjs failed ({r.returncode}): {r.stderr.decode()}")
    return json.loads(r.stdout)


def setUpModule():
    unittest.enterModuleContext(Shared())



class FormatsTest(unittest.TestCase):
    def test_text_is_go_tool_pprof_top_for_every_sample_type(self):
        d, w = FIXTURE()
        proto = d.profile(f"/debug/pprof/heap?pid={w.pid}")
        for i, t in enumerate(TYPES):
            ours = d.profile(f"/debug/pprof/heap?pid={w.pid}&format=text&sample_index={t}").decode()
            h.check(ours.startswith(f"Type: {t}\n"), f"format=text for {t} starts {ours[:40]!r}")
            theirs = h.pprof(proto, "-top", "-nodefraction=0", "-edgefraction=0", "-nodecount=100000",
                             f"-sample_index={t}")
            h.check_equal(_top_rows(ours), _top_rows(theirs), f"top table of {t} (ours, pprof's)")
            by_index = d.profile(f"/debug/pprof/heap?pid={w.pid}&format=text&sample_index={i}").decode()
            h.check_equal(by_index, ours, f"sample_index={i} and sample_index={t}")
        rows = _top_rows(d.profile(f"/debug/pprof/heap?pid={w.pid}&format=text").decode())
        h.check(any(r.endswith("  alloc_big") and "976.56kB" in r for r in rows),
                "alloc_big's 1,000,000 bytes in use should lead the default (inuse_space) table:\n"
                + "\n".join(rows))
        h.check(d.profile(f"/debug/pprof/allocs?pid={w.pid}&format=text").startswith(
            b"Type: alloc_space\n"), "allocs' table defaults to alloc_space")

    def test_folded_stacks_are_pprofs_stacks_root_first_for_every_sample_type(self):
        d, w = FIXTURE()
        proto = d.profile(f"/debug/pprof/heap?pid={w.pid}")
        for i, t in enumerate(TYPES):
            text = d.profile(f"/debug/pprof/heap?pid={w.pid}&format=folded&sample_index={t}").decode()
            h.check_equal(_parse_folded(text), _folded_from_pprof(proto, i), f"folded stacks of {t}")
        inuse = _parse_folded(d.profile(f"/debug/pprof/heap?pid={w.pid}&format=folded").decode())
        leaves = {k.rsplit(";", 1)[-1]: v for k, v in inuse.items()}
        h.check_equal(leaves.get("alloc_big"), h.EXACT_EXPECTED["alloc_big"][3],
                      "alloc_big's in-use bytes in the folded stacks")
        h.check("alloc_freed" not in leaves, "alloc_freed's blocks were all freed, yet it is folded")
        h.check(all(k.startswith("_start;") or ";main;" in k for k in inuse),
                f"stacks should start at the root: {list(inuse)[:3]}")

    def test_all_process_folded_stacks_start_with_the_process(self):
        d, w = FIXTURE()
        text = d.profile("/debug/pprof/heap?format=folded").decode()
        mine = [l for l in text.splitlines() if l.startswith(f"pid={w.pid} comm=exact;")]
        h.check(mine and any(";alloc_small " in l for l in mine),
                f"no stack under 'pid={w.pid} comm=exact' in:\n{text[:1500]}")

    def test_pprof_format_under_node_reads_what_go_tool_pprof_reads(self):
        d, w = FIXTURE()
        for path, default in ((f"/debug/pprof/heap?pid={w.pid}", "inuse_space"),
                              (f"/debug/pprof/allocs?pid={w.pid}", "alloc_space"),
                              ("/debug/pprof/heap", "inuse_space")):
            proto = d.profile(path)
            theirs = _node_decode(proto)
            go = h.decode(proto)
            h.check_equal([tuple(t) for t in theirs["sample_types"]], go.sample_types,
                          f"{path}: sample types (pprof-format, pprof)")
            h.check_equal(theirs["default_sample_type"], default, f"{path}: default sample type")
            h.check_equal((tuple(theirs["period_type"]), int(theirs["period"])),
                          (go.period_type, go.period), f"{path}: period type and period")
            go_totals = [sum(s.values[i] for s in go.samples) for i in range(4)]
            h.check_equal([int(v) for v in theirs["totals"]], go_totals,
                          f"{path}: totals of every sample type (pprof-format, pprof)")
            go_leaves = h.totals_by_leaf(go.samples)
            node_leaves = {k: [int(v) for v in vs] for k, vs in theirs["by_leaf"].items()}
            if "pid=" not in path:
                h.check_equal(node_leaves, go_leaves, f"{path}: totals by leaf function")
                for fn, want in h.EXACT_EXPECTED.items():
                    h.check_equal(node_leaves.get(fn), want, f"{path}: {fn} as pprof-format reads it")

    def test_the_json_index_agrees_with_the_profile(self):
        d, w = FIXTURE()
        r = d.request("/debug/pprof/?format=json")
        h.check_equal(r.status, 200, "GET /debug/pprof/?format=json")
        h.check_equal(r.headers.get("content-type"), "application/json", "its content type")
        targets = {t["pid"]: t for t in json.loads(r.body)["targets"]}
        h.check(w.pid in targets, f"pid {w.pid} not in the JSON index: {targets}")
        t = targets[w.pid]
        h.check_equal(t["comm"], "exact", "comm")
        h.check(t["allocator"].endswith("libc.so.6"), f"allocator {t['allocator']!r}")
        totals = [sum(v[i] for v in h.EXACT_EXPECTED.values()) for i in range(4)]
        h.check_equal((t["allocated_bytes"], t["inuse_bytes"]), (totals[1], totals[3]),
                      "allocated and in-use bytes (index, exact.c's)")
        h.check(0 < t["profiled_seconds"] < 120, f"profiled_seconds {t['profiled_seconds']}")
        html = d.request("/debug/pprof/?format=html")
        h.check(html.status == 200 and b"<table>" in html.body, "format=html is the HTML index")

    def test_bad_formats_and_sample_types_are_refused_with_a_reason(self):
        d, w = FIXTURE()
        for query in ("format=xml", "format=", "format=text&sample_index=cpu",
                      "format=folded&sample_index=4", "sample_index=inuse_space",
                      "format=proto&sample_index=0", "format=text&debug=1"):
            status, body = d.get(f"/debug/pprof/heap?pid={w.pid}&{query}")
            h.check_equal(status, 400, f"GET heap?{query}")
            h.check_one_line_reason(body, f"GET heap?{query}")
        status, body = d.get("/debug/pprof/?format=xml")
        h.check_equal(status, 400, "index with format=xml")
        h.check_one_line_reason(body, "index with format=xml")

    def test_an_exited_process_keeps_its_text_and_folded_forms(self):
        d, w = FIXTURE()
        w.finish()
        # The reaper notices the exit at its next scan and keeps the last profile.
        d.wait_detached(w.pid, "the exited workload", timeout=10)
        status, body = d.get(f"/debug/pprof/heap?pid={w.pid}&format=text")
        h.check_equal(status, 200, f"the last profile of exited pid {w.pid}: {body[:200]!r}")
        h.check(b"  alloc_big\n" in body, f"alloc_big not in the exited process's table:\n{body.decode()}")
        folded = _parse_folded(d.profile(f"/debug/pprof/allocs?pid={w.pid}&format=folded").decode())
        h.check(any(k.endswith(";alloc_freed") for k in folded),
                f"alloc_freed missing from the exited process's alloc_space stacks: {folded}")


if __name__ == "__main__":
    h.main()
