"""A kernel without a field that hidden_returns.bpf.h reads
(task->utask->return_instances, kernel internals whose layout changed in
6.12-6.14) costs only that feature: heapprofd's BPF object, relocated by
CO-RE against a copy of this kernel's BTF in which the field has another
name (btf_without_field, passed with the HEAPPROFD_TEST_BTF test hook),
still loads, the exact workload's totals are still exact, /metrics says
the feature is missing, and every sampled call that could not look is
counted. Before the guard, the load failed and every request answered 503.
About 10 s."""

import os
import re
import subprocess
import tempfile
import unittest

import heapprof_harness as h
import test_exact


def btf_without(struct, member, out):
    """Writes into `out` this kernel's BTF with struct.member renamed."""
    r = subprocess.run([os.environ["BTF_WITHOUT_FIELD"], "/sys/kernel/btf/vmlinux", out,
                        struct, member], capture_output=True, text=True)
    h.check(r.returncode == 0, f"btf_without_field {struct} {member}: {r.stderr}")


def metric_value(text, pattern):
    """The value of the one metric line of /metrics matching `pattern`."""
    m = re.search(r"^" + pattern + r" (\S+)$", text, re.M)
    h.check(m is not None, f"/metrics has no line matching {pattern!r}")
    return float(m.group(1))


class KernelWithoutReturnInstances(unittest.TestCase):
    def test_a_missing_field_costs_only_its_feature_and_is_counted(self):
        h.check(os.environ.get("HEAPPROF_TEST_HOOKS") == "1",
                "HEAPPROFD_TEST_BTF is a test hook: configure with -DHEAPPROF_TEST_HOOKS=ON "
                "(scripts/test.sh does)")
        with tempfile.TemporaryDirectory() as tmp:
            btf = os.path.join(tmp, "vmlinux-without-return_instances")
            btf_without("uprobe_task", "return_instances", btf)
            os.environ["HEAPPROFD_TEST_BTF"] = btf
            try:
                with h.Daemon("--sample-interval", "1", "--sampler", "uprobe") as d, \
                        h.Workload("exact") as w:
                    d.profile(f"/debug/pprof/heap?pid={w.pid}")  # attaches
                    w.run()
                    heap = d.profile(f"/debug/pprof/heap?pid={w.pid}")
                    status, body = d.get("/metrics")
                    w.finish()
                    log = d.stderr()
            finally:
                del os.environ["HEAPPROFD_TEST_BTF"]
        test_exact.check_exact_totals(h.decode(heap), "exact without return_instances")
        text = body.decode()
        h.check_equal(status, 200, "GET /metrics")
        h.check_equal(metric_value(text, r'heapprofd_kernel_feature\{feature="return_instances"'
                                         r',since="CO-RE"\}'), 0.0,
                      "the return_instances feature in /metrics")
        unchecked = metric_value(text, r"heapprofd_return_addresses_unchecked_total")
        # 2,000 calls of exact.c are sampled at interval 1 (EXACT_EXPECTED's
        # alloc_objects), each counted once where it could not look.
        h.check(unchecked >= 2000, f"sampled calls counted as unchecked: {unchecked}, "
                                   f"expected at least 2000")
        h.check("return_instances (CO-RE)" in log,
                f"the start line does not name the missing field; stderr:\n{log}")


if __name__ == "__main__":
    h.main()
