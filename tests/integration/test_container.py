"""integration.container: deploy/kubernetes/ built and run under podman.

No image registry is reachable from these machines, so the Dockerfile's
base (debian:12-slim) is made here: debootstrap --variant=minbase bookworm
from the mirror apt uses, slimmed as debian:12-slim is, imported into podman
under the FROM's name (container_podman.py; cached for later runs). On it,
`podman build` builds deploy/kubernetes/Dockerfile with the .deb this tree
makes (package.build), as an operator does.

The image then runs with the DaemonSet's pod and container settings,
translated flag by flag (container_podman.run_flags): its capabilities and
no others, not privileged, host pids, read-only root, no privilege
escalation, the manifest's mounts (the bpffs one on a bpffs of the test's
own, so that pins stay apart from other tests), the ConfigMap and the
Secret laid out as the kubelet lays them out, its memory and CPU limits.
One setting cannot be taken as written: seccomp RuntimeDefault is the
runtime's profile, and podman 4.3's refuses bpf() without CAP_SYS_ADMIN.
The test runs containerd's and Docker's meaning of it (container_podman.
seccomp_runtime_default), and checks that podman's own refuses, as
deploy/kubernetes/README.md says.

From inside, the daemon profiles with names and exact totals (the exact
workload, --sample-interval 1 in the ConfigMap):
  - a process on the host;
  - a process in another container, with its own mount namespace and the
    base image's libc (not the host's file): without a seccomp filter it
    gets the in-process sampler, injected across the namespaces; under
    podman's default filter, uprobes (the daemon injects into no process
    under seccomp).
and the container's memory cgroup is read against the manifest's request
and limit.

`podman kube play` of the manifest: podman 4.3 takes no DaemonSet,
Namespace or ServiceAccount, nor a ConfigMap beside them; the test plays
the DaemonSet's pod template as a Pod (README.md says what else 4.3 lacks).

Skipped (exit 77) only where podman cannot run, with the reason; under
CI=true that is a failure instead, since CI machines run
scripts/install-deps.sh, which installs podman, runc and debootstrap.
Cost, measured here (2 cores): 76-97 s cold (a machine without the cached
base: debootstrap 58-74 s, image build 6-7 s), 15-30 s warm (the image is
rebuilt, 7-14 s, whenever package.build made a new .deb). It mostly waits
on the network and podman, so it runs beside the other tests.

Environment (tests/integration/CMakeLists.txt): WORKLOADS,
HEAPPROF_DEB, HEAPPROF_DEB_VERSION, HEAPPROF_SOURCE_DIR. Run with Debian's
/usr/bin/python3 (python3-yaml). Needs root.
"""

import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import queue
import unittest

import yaml

import container_podman as cp
import heapprof_harness as h

DEB = os.environ.get("HEAPPROF_DEB", "")
DEB_VERSION = os.environ.get("HEAPPROF_DEB_VERSION", "")
TOKEN = "container-test-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
MIB = 1024 * 1024
# A name of this run's own, for containers and pods: other trees may run
# this test at the same time on the machine.
RUN = f"heapprofd-test-{os.getpid()}"


# The capability numbers of linux/capability.h the manifest names.
CAPABILITY_BITS = {"DAC_READ_SEARCH": 2, "SYS_PTRACE": 19, "PERFMON": 38, "BPF": 39,
                   "CHECKPOINT_RESTORE": 40}


def manifest():
    """The manifest's objects by kind."""
    with open(cp.MANIFEST) as f:
        return {d["kind"]: d for d in yaml.safe_load_all(f) if d}


def pod_spec():
    """The DaemonSet's pod spec (with the template's annotations under
    "annotations") and its one container."""
    template = manifest()["DaemonSet"]["spec"]["template"]
    pod = dict(template["spec"], annotations=template["metadata"].get("annotations", {}))
    return pod, pod["containers"][0]


def config_text(interval):
    """The ConfigMap's heapprofd.conf with another sample interval (the
    operator's part of the deployment)."""
    data = manifest()["ConfigMap"]["data"]
    name = os.path.basename(pod_spec()[1]["args"][pod_spec()[1]["args"].index("--config") + 1])
    text = data[name]
    h.check("sample-interval = " in text, f"no sample-interval in the ConfigMap's {name}")
    return name, "\n".join(f"sample-interval = {interval}" if line.startswith("sample-interval")
                           else line for line in text.splitlines()) + "\n"


class Bpffs:
    """A bpffs of the test's own, mounted on a temporary directory: the
    node's /sys/fs/bpf as the pod sees it (this machine mounts none there)."""

    def __enter__(self):
        self.path = tempfile.mkdtemp(prefix="heapprofd-bpffs.")
        subprocess.run(["mount", "-t", "bpf", "bpf", self.path], check=True)
        return self

    def __exit__(self, *exc):
        subprocess.run(["umount", self.path], check=False)
        os.rmdir(self.path)
        return False


class Node:
    """The host side of one pod: a bpffs, the ConfigMap and Secret volumes,
    the seccomp profile, and a loopback port for the container's."""

    def __init__(self, tmp, bpffs, interval):
        pod, c = pod_spec()
        self.pod, self.container = pod, c
        volumes = {v["name"]: v for v in pod["volumes"]}
        self.volume_dirs = {}
        for m in c["volumeMounts"]:
            v, d = volumes[m["name"]], os.path.join(tmp, m["name"])
            if "configMap" in v:
                name, text = config_text(interval)
                cp.kubelet_volume(d, {name: text}, v["configMap"].get("defaultMode", 0o644))
            elif "secret" in v:
                key = os.path.basename(c["args"][c["args"].index("--token-file") + 1])
                cp.kubelet_volume(d, {key: TOKEN + "\n"}, v["secret"].get("defaultMode", 0o644))
            else:
                continue
            self.volume_dirs[m["name"]] = d
        self.host_paths = {"/sys/fs/bpf": bpffs}
        self.seccomp = os.path.join(tmp, "seccomp-runtime-default.json")
        cp.seccomp_runtime_default(self.seccomp)
        self.port = h.free_port()

    def run_flags(self, seccomp=None):
        """The `podman run` flags of the DaemonSet's container."""
        return cp.run_flags(self.pod, self.container, self.host_paths, self.volume_dirs,
                            seccomp or self.seccomp, self.port)

    def url(self, path):
        """A URL of the container's published port."""
        return f"http://127.0.0.1:{self.port}{path}"


def setUpModule():
    """Builds the image once for the file's tests."""
    global IMAGE, BASE
    t0 = time.monotonic()
    BASE, how = cp.base_image()
    t1 = time.monotonic()
    IMAGE = cp.build_image(DEB, f"heapprofd:{DEB_VERSION}")
    t2 = time.monotonic()
    print(f"base {BASE}: {how} in {t1 - t0:.1f} s; image {IMAGE[:12]} built in "
          f"{t2 - t1:.1f} s, {cp.image_size(IMAGE) / 1e6:.1f} MB (base "
          f"{cp.image_size(BASE) / 1e6:.1f} MB)", flush=True)


def check_exact(profile, what):
    """Fails unless every function of exact.c has its exact totals."""
    totals = h.totals_by_leaf(profile.samples)
    wrong = [f"  {fn}: expected {want}, got {totals.get(fn)}"
             for fn, want in h.EXACT_EXPECTED.items() if totals.get(fn) != want]
    h.check(not wrong, f"{what}: totals per leaf differ:\n" + "\n".join(wrong) +
            "\nsamples:\n" + h.describe(profile.samples))


class ContainerWorkload(h.Workload):
    """The exact workload in a container of its own (the base image: its
    own mount namespace and libc), speaking the handshake through podman's
    stdio. pid is its host pid."""

    def __init__(self, name, *flags):
        self.name = name
        exact = os.path.join(h.WORKLOADS, "exact")
        self.proc = subprocess.Popen(
            ["podman", "run", "-i", "--rm", "--name", name, "--network", "none", *flags,
             "-v", f"{exact}:/usr/local/bin/exact:ro", BASE, "/usr/local/bin/exact"],
            env=cp.podman_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self._lines = queue.Queue()
        threading.Thread(target=self._read_stdout, daemon=True).start()
        line = self._expect_line(cp.PODMAN_TIMEOUT_S, "ready")
        h.check(line.startswith("ready "), f"container workload: expected ready, got {line!r}")
        self.pid = cp.container_pid(name)
        h.WORKLOAD_PIDS.add(self.pid)

    def kill(self):
        cp.podman("rm", "-f", self.name, check=False)
        super().kill()


def profile_exact(node, workload, sampler="inprocess", reason=""):
    """Attaches the containerized daemon to `workload`, runs it, returns its
    decoded heap profile. Fails unless the daemon chose `sampler`, for a
    reason that contains `reason`."""
    url = node.url(f"/debug/pprof/heap?pid={workload.pid}")
    r = h.request_with_headers(url, AUTH)  # attaches; may be empty
    h.check_equal(r.status, 200, f"attach through the container: {r.text()[:300]}")
    workload.run()
    r = h.request_with_headers(url, AUTH)
    h.check_equal(r.status, 200, f"profile through the container: {r.text()[:300]}")
    metrics = h.request_with_headers(node.url("/metrics"), AUTH).text()
    line = re.search(rf"^heapprofd_target_sampler{{pid=\"{workload.pid}\".*$", metrics, re.M)
    h.check(line and f'sampler="{sampler}"' in line.group(0) and reason in line.group(0),
            f"the sampler of pid {workload.pid}, expected {sampler} ({reason}): "
            f"{line and line.group(0)}")
    workload.finish()
    return h.decode(r.body)


class DaemonInContainerTest(unittest.TestCase):
    """The image run with the DaemonSet's settings."""

    @classmethod
    def setUpClass(cls):
        tmp = cls.enterClassContext(tempfile.TemporaryDirectory(prefix="heapprofd-node."))
        bpffs = cls.enterClassContext(Bpffs())
        cls.node = Node(tmp, bpffs.path, 1)
        cls.name = f"{RUN}-daemon"
        cp.podman("run", "-d", "--name", cls.name, *cls.node.run_flags(), IMAGE,
                  *cls.node.container["args"])
        cls.addClassCleanup(cp.podman, "rm", "-f", "-t", "5", cls.name, check=False)
        r = cp.wait_serving(cls.node.url("/metrics"), AUTH)
        logs = cp.podman("logs", cls.name).stderr
        h.check("heapprofd_bpf_up 1" in r.text(), f"BPF is not up in the container:\n{logs}")
        cls.pid = cp.container_pid(cls.name)

    def test_the_daemon_runs_with_the_manifests_capabilities_only(self):
        # What the kernel says of the daemon's process, so that a flag the
        # translation got wrong shows here: the five capabilities (all sets
        # but the ambient one), no_new_privs, a seccomp filter.
        with open(f"/proc/{self.pid}/status") as f:
            status = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
        want = sum(1 << CAPABILITY_BITS[c]
                   for c in self.node.container["securityContext"]["capabilities"]["add"])
        for field in ("CapEff", "CapPrm", "CapBnd"):
            h.check_equal(int(status[field], 16), want, f"{field} of the daemon in the container")
        h.check_equal(status["NoNewPrivs"].strip(), "1", "NoNewPrivs (allowPrivilegeEscalation)")
        h.check_equal(status["Seccomp"].strip(), "2", "Seccomp (a filter: RuntimeDefault)")

    def test_a_host_process_is_profiled_with_names(self):
        with h.Workload("exact") as w:
            check_exact(profile_exact(self.node, w), "a host process, from the container")

    def check_other_container(self, what, flags, sampler, reason=""):
        """Profiles exact in a container of the base image run with `flags`."""
        with ContainerWorkload(f"{RUN}-workload", *flags) as w:
            ns = os.readlink(f"/proc/{w.pid}/ns/mnt")
            h.check(ns not in (os.readlink("/proc/self/ns/mnt"),
                               os.readlink(f"/proc/{self.pid}/ns/mnt")),
                    f"the workload container shares a mount namespace ({ns})")
            libc = [line.split()[-1] for line in w.maps().splitlines() if "/libc.so" in line][0]
            theirs, ours = os.stat(f"/proc/{w.pid}/root{libc}"), os.stat(libc)
            h.check((theirs.st_dev, theirs.st_ino) != (ours.st_dev, ours.st_ino),
                    f"the workload container's {libc} is the host's file")
            check_exact(profile_exact(self.node, w, sampler, reason), what)

    def test_a_process_in_another_container_is_profiled_with_names(self):
        # Without a seccomp filter, as Kubernetes runs a pod that names no
        # seccompProfile (unless the kubelet's SeccompDefault is on): the
        # in-process sampler is injected across the mount namespace.
        self.check_other_container("a process in another container (no seccomp)",
                                   ["--security-opt", "seccomp=unconfined"], "inprocess")

    def test_a_process_under_a_seccomp_filter_in_another_container_gets_uprobes(self):
        # Under the runtime's default filter, as every podman and Docker
        # container and every RuntimeDefault pod: the daemon does not inject
        # into a process under seccomp (design.md), and uprobes serve it.
        self.check_other_container("a process in another container (podman's seccomp)", [],
                                   "uprobe", "runs under seccomp")

    def test_the_memory_charged_stays_under_the_manifests_limit(self):
        # Last of the class (the harness runs tests in file order): the
        # peak includes both targets' attach and profiles.
        res = self.node.container["resources"]
        limit = cp.quantity(res["limits"]["memory"])
        request = cp.quantity(res["requests"]["memory"])
        m = cp.memory_figures(self.pid)
        print(f"container memory: cgroup peak {m['peak'] / MIB:.0f} MiB (kernel "
              f"{m['kernel'] / MIB:.0f} MiB now), now {m['now'] / MIB:.0f} MiB, daemon VmHWM "
              f"{m['hwm'] / MIB:.0f} MiB; "
              f"manifest request {request / MIB:.0f} MiB, limit {limit / MIB:.0f} MiB", flush=True)
        h.check_equal(m["limit"], limit, "the container's memory cgroup limit (the manifest's)")
        # The limit is what the kernel enforces; the request is the peak
        # measured under 12 busy targets (README.md), above what two idle
        # ones need, so a charge over it would mean a regression too.
        h.check(m["peak"] <= request, f"peak charge {m['peak'] / MIB:.0f} MiB over the request")


class SeccompTest(unittest.TestCase):
    def test_podmans_own_runtime_default_refuses_bpf(self):
        # What README.md says of CRI-O and podman nodes: their RuntimeDefault
        # (containers-common's profile) refuses bpf() without CAP_SYS_ADMIN.
        with tempfile.TemporaryDirectory(prefix="heapprofd-node.") as tmp, Bpffs() as bpffs:
            node = Node(tmp, bpffs.path, 524288)
            name = f"{RUN}-seccomp"
            flags = node.run_flags(seccomp="/usr/share/containers/seccomp.json")
            try:
                cp.podman("run", "-d", "--name", name, *flags, IMAGE, *node.container["args"])
                cp.wait_serving(node.url("/healthz"), {})
                logs = cp.podman("logs", name).stderr
            finally:
                cp.podman("rm", "-f", "-t", "5", name, check=False)
        h.check("BPF unavailable" in logs and "Operation not permitted" in logs,
                f"podman's default seccomp profile let BPF load; update README.md:\n{logs}")


class KubePlayTest(unittest.TestCase):
    def test_podman_kube_play_takes_no_daemonset(self):
        # The manifest as it is, then without the ConfigMap (given apart, as
        # 4.3 wants it): what is left is the Namespace, the ServiceAccount
        # and the DaemonSet.
        with tempfile.TemporaryDirectory(prefix="heapprofd-kube.") as tmp:
            cm, rest = os.path.join(tmp, "cm.yaml"), os.path.join(tmp, "rest.yaml")
            with open(cm, "w") as f:
                yaml.safe_dump(manifest()["ConfigMap"], f)
            with open(rest, "w") as f:
                yaml.safe_dump_all([d for k, d in manifest().items() if k != "ConfigMap"], f)
            for args in ([cp.MANIFEST], ["--configmap", cm, rest]):
                r = cp.podman("kube", "play", "--start=false", *args, check=False)
                print(f"podman kube play {' '.join(os.path.basename(a) for a in args)}: exit "
                      f"{r.returncode}: {r.stderr.strip()}", flush=True)
                if r.returncode == 0:
                    cp.podman("kube", "down", args[-1], check=False)
                h.check(r.returncode != 0, "podman kube play took the manifest; update README.md")

    def test_the_daemonsets_pod_plays_and_serves(self):
        with tempfile.TemporaryDirectory(prefix="heapprofd-node.") as tmp, Bpffs() as bpffs:
            node = Node(tmp, bpffs.path, 524288)
            pod_yaml, cm_yaml = os.path.join(tmp, "pod.yaml"), os.path.join(tmp, "cm.yaml")
            with open(pod_yaml, "w") as f:
                yaml.safe_dump(played_pod(node, bpffs.path), f)
            with open(cm_yaml, "w") as f:
                yaml.safe_dump(manifest()["ConfigMap"], f)
            try:
                cp.podman("kube", "play", "--configmap", cm_yaml, "--seccomp-profile-root",
                          tmp, pod_yaml)
                r = cp.wait_serving(node.url("/metrics"), AUTH)
                ctr = f"{RUN}-pod-{node.container['name']}"
                pid = cp.container_pid(ctr)
                host_pids = os.readlink(f"/proc/{pid}/ns/pid") == os.readlink("/proc/self/ns/pid")
                print(f"kube play of the pod: serves, BPF up: {'heapprofd_bpf_up 1' in r.text()}, "
                      f"host pid namespace: {host_pids}", flush=True)
                h.check("heapprofd_bpf_up 1" in r.text(),
                        "BPF is not up in the played pod:\n" + cp.podman("logs", ctr).stderr)
            finally:
                cp.podman("pod", "rm", "-f", f"{RUN}-pod", check=False)


def played_pod(node, bpffs):
    """The DaemonSet's pod template as a Pod podman 4.3 plays: the Secret as
    a hostPath (4.3's secret volumes need podman secrets and panic without
    `optional`), the seccomp profile by the annotation 4.3 reads, the port
    on loopback, the bpffs of the test."""
    template = manifest()["DaemonSet"]["spec"]["template"]
    spec = template["spec"]
    c = spec["containers"][0]
    for v in spec["volumes"]:
        if "secret" in v:
            v.pop("secret")
            v["hostPath"] = {"path": node.volume_dirs[v["name"]], "type": "Directory"}
        elif v.get("hostPath", {}).get("path") == "/sys/fs/bpf":
            v["hostPath"]["path"] = bpffs
    for p in c["ports"]:
        p.update(hostPort=node.port, hostIP="127.0.0.1")
    notes = dict(template["metadata"].get("annotations", {}))
    notes[f"container.seccomp.security.alpha.kubernetes.io/{c['name']}"] = \
        f"localhost/{os.path.basename(node.seccomp)}"
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{RUN}-pod", "labels": template["metadata"]["labels"],
                         "annotations": notes},
            "spec": spec}


if __name__ == "__main__":
    for var, value in (("HEAPPROF_DEB", DEB), ("HEAPPROF_SOURCE_DIR", cp.SOURCE_DIR)):
        if not value or not os.path.exists(value):
            sys.exit(f"FAIL: {var}={value!r} does not exist (run through ctest)")
    reason = cp.why_podman_cannot_run()
    if reason:
        if h.IN_CI:
            sys.exit(f"FAIL: podman cannot run here, and CI installs it: {reason}")
        print(f"SKIP: podman cannot run here: {reason}", flush=True)
        sys.exit(77)
    h.main()
