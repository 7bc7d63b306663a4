"""The index (JSON and HTML) and /metrics say, per process, which families
of allocator entry points its calls reach the sampler by (issue 34, part
4): with the in-process sampler, the families whose relocation slots the
installer took; with the uprobe sampler, those it probes. A C program on
glibc is interposed on by the C family, under both samplers. Fails on the
code before the change: the index had no "interposed" field, /metrics no
heapprofd_target_interposed. About 10 s.
"""

import re
import unittest

import heapprof_harness as h


def check_interposed(d, pid, sampler, families):
    entry = d.index_entry(pid)
    h.check(entry is not None, f"pid {pid} is not in the index")
    h.check_equal(entry["sampler"], sampler, "the sampler in the index")
    h.check_equal(entry.get("interposed"), families, "the index's interposed families")
    metrics = d.get("/metrics")[1].decode()
    found = re.findall(rf'^heapprofd_target_interposed{{pid="{pid}",comm="[^"]*",'
                       rf'family="([^"]+)"}} 1$', metrics, re.M)
    h.check_equal(found, families, "heapprofd_target_interposed's families")
    page = d.get("/debug/pprof/")[1].decode()
    h.check(f"{sampler}; interposed: {', '.join(families)}</td>" in page,
            f"the HTML index does not say what is interposed:\n{page}")


class InterposedTest(unittest.TestCase):
    def test_a_c_program_is_interposed_on_by_the_c_family_under_both_samplers(self):
        # One daemon: requests get the in-process sampler, and a rule gives
        # the uprobe sampler to the workload run under another name.
        probed = h.workload_alias("frames", "hp-interposed")
        with h.Daemon("--sampler", "inprocess", "--comm", "hp-interposed sampler=uprobe") as d, \
                h.Workload("frames") as inproc, \
                h.Workload("frames", command=[probed]) as uprobed:
            inproc.go()
            uprobed.go()
            d.profile(f"/debug/pprof/heap?pid={inproc.pid}")
            d.wait_until(lambda: d.index_entry(uprobed.pid) is not None, 30,
                         "the rule's process attached")
            check_interposed(d, inproc.pid, "inprocess", ["c"])
            check_interposed(d, uprobed.pid, "uprobe", ["c"])


if __name__ == "__main__":
    h.main()
