"""podman for test_container.py: the Debian 12 base image made with
debootstrap (no registry is reachable from these machines), the image of
deploy/kubernetes/Dockerfile built on it, and the DaemonSet's container
translated into `podman run` flags, field by field.

Why these podman settings (containers.conf, passed as CONTAINERS_CONF so
that podman run, build and kube play all get them):
  - runtime runc, not crun: crun 1.8 (Debian 12) refuses a hybrid cgroup
    hierarchy whose cgroup2 mount has controllers ("cgroups in hybrid mode
    not supported"), which these VMs have; runc runs there.
  - default_ulimits: podman asks the runtime for nofile and nproc limits
    above ours, which needs CAP_SYS_RESOURCE; where the test runs without
    it (these sessions), runc fails with EPERM. The container gets our own
    open-file limit, as a kubelet's containers get their runtime's. root is
    exempt from RLIMIT_NPROC, so that value only has to be one runc may set.

The base image is cached (the tarball under CACHE_DIR, the image in podman's
storage), so only the first run on a machine pays for debootstrap.
"""

import fcntl
import glob
import json
import os
import re
import resource
import shutil
import subprocess
import tempfile
import time

import heapprof_harness as h

SOURCE_DIR = os.environ.get("HEAPPROF_SOURCE_DIR", "")
DEPLOY = os.path.join(SOURCE_DIR, "deploy", "kubernetes")
DOCKERFILE = os.path.join(DEPLOY, "Dockerfile")
MANIFEST = os.path.join(DEPLOY, "heapprofd.yaml")

# Where the debootstrapped base is kept between runs (CI starts without it).
CACHE_DIR = "/var/cache/heapprofd-test"
BASE_TARBALL = os.path.join(CACHE_DIR, "debian-12-minbase.tar")
# debootstrap's suite and variant: minbase is what debian:12-slim holds
# (dpkg, apt and Essential: yes packages).
SUITE = "bookworm"
# What debian:12-slim leaves out, as its dpkg.cfg.d excludes say (docs but
# copyrights, man pages, translations): also set in the base, so that the
# packages the Dockerfile installs leave them out too and the image's size
# is close to the one an operator builds.
SLIM_DPKG_EXCLUDES = """\
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
"""
# What debian:12-slim's apt.conf.d/docker-clean says: no package caches
# (/var/cache/apt/*.bin, 40 MB) left in the image by apt-get.
SLIM_APT_CLEAN = """\
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
"""
# How long podman commands may take: the base's debootstrap downloads and
# unpacks about 30 MB (about a minute here), the image build runs apt-get
# update and install from the mirror.
DEBOOTSTRAP_TIMEOUT_S = 600
BUILD_TIMEOUT_S = 600
PODMAN_TIMEOUT_S = 120


def why_podman_cannot_run():
    """None if podman runs containers here, else the reason."""
    for tool in ("podman", "runc", "debootstrap"):
        if not shutil.which(tool):
            return f"{tool} is not installed (scripts/install-deps.sh installs it)"
    r = subprocess.run(["podman", "info", "--format", "{{.Host.OCIRuntime.Name}}"],
                       env=podman_env(), capture_output=True, text=True, timeout=PODMAN_TIMEOUT_S)
    if r.returncode != 0:
        return f"podman info failed: {r.stderr.strip()[-500:]}"
    return None


_CONF = []


def podman_env():
    """The environment podman runs with: our containers.conf (see the top)."""
    if not _CONF:
        # Removed when the interpreter exits (the object's finalizer).
        tmp = tempfile.TemporaryDirectory(prefix="heapprofd-podman.")
        nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        with open(os.path.join(tmp.name, "containers.conf"), "w") as f:
            f.write(f'[containers]\ndefault_ulimits = ["nofile={nofile}:{nofile}", '
                    f'"nproc=4096:4096"]\n[engine]\nruntime = "runc"\n')
        _CONF.append(tmp)
    env = dict(os.environ)
    env["CONTAINERS_CONF"] = os.path.join(_CONF[0].name, "containers.conf")
    return env


def podman(*args, timeout=PODMAN_TIMEOUT_S, check=True, **kwargs):
    """Runs podman with args; returns the CompletedProcess (text). Fails with
    its stderr if it exits non-zero and `check`."""
    r = subprocess.run(["podman", *args], env=podman_env(), capture_output=True, text=True,
                       timeout=timeout, **kwargs)
    if check and r.returncode != 0:
        raise h.Failure(f"podman {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()[-2000:]}")
    return r


def apt_mirror():
    """The Debian mirror apt uses on this machine (its sources), or Debian's CDN."""
    for path in ["/etc/apt/sources.list"] + sorted(glob.glob("/etc/apt/sources.list.d/*")):
        try:
            text = open(path).read()
        except OSError:
            continue
        for m in re.finditer(r"^(?:deb\s+(?:\[[^]]*\]\s+)?|URIs:\s*)(\S+)", text, re.M):
            uri = m.group(1).rstrip("/")
            if re.search(r"/debian$", uri):
                return uri
    return "http://deb.debian.org/debian"


def dockerfile_base():
    """The Dockerfile's FROM, and the name a registry client resolves it to
    (docker.io/library/NAME for an unqualified one)."""
    with open(DOCKERFILE) as f:
        name = next(line.split()[1] for line in f if line.upper().startswith("FROM "))
    return name, (name if "/" in name else f"docker.io/library/{name}")


def _debootstrap_tarball():
    """Makes BASE_TARBALL with debootstrap, slimmed as debian:12-slim is."""
    with tempfile.TemporaryDirectory(prefix="heapprofd-base.", dir=CACHE_DIR) as tmp:
        root = os.path.join(tmp, "root")
        r = subprocess.run(["debootstrap", "--variant=minbase", SUITE, root, apt_mirror()],
                           capture_output=True, text=True, timeout=DEBOOTSTRAP_TIMEOUT_S)
        h.check(r.returncode == 0, f"debootstrap {SUITE} from {apt_mirror()}: exit "
                f"{r.returncode}: {(r.stdout + r.stderr)[-2000:]}")
        subprocess.run(["sh", "-c", "rm -rf var/cache/apt/archives/*.deb var/lib/apt/lists/* "
                        "usr/share/man/* usr/share/info/* && find usr/share/doc -type f "
                        "! -name copyright -delete && find usr/share/locale -mindepth 1 "
                        "-maxdepth 1 ! -name locale.alias -exec rm -rf {} +"],
                       cwd=root, check=True)
        with open(os.path.join(root, "etc/dpkg/dpkg.cfg.d/slim"), "w") as f:
            f.write(SLIM_DPKG_EXCLUDES)
        with open(os.path.join(root, "etc/apt/apt.conf.d/docker-clean"), "w") as f:
            f.write(SLIM_APT_CLEAN)
        subprocess.run(["tar", "--numeric-owner", "--xattrs", "-C", root, "-cf",
                        BASE_TARBALL + ".new", "."], check=True)
        os.rename(BASE_TARBALL + ".new", BASE_TARBALL)


def base_image():
    """The Dockerfile's base in podman's storage, made here if missing:
    debootstrap into a tarball (cached), imported under the FROM's name.
    Returns (name, what was done: "cached", "imported" or "debootstrapped")."""
    _, full = dockerfile_base()
    os.makedirs(CACHE_DIR, exist_ok=True)
    # Test runs of several trees on one machine share the cache: one makes it.
    with open(os.path.join(CACHE_DIR, "lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if podman("image", "exists", full, check=False).returncode == 0:
            return full, "cached"
        done = "imported"
        if not os.path.exists(BASE_TARBALL):
            _debootstrap_tarball()
            done = "debootstrapped"
        podman("import", "--change", "CMD [\"bash\"]", BASE_TARBALL, full, timeout=BUILD_TIMEOUT_S)
        return full, done


def build_image(deb, tag):
    """Builds deploy/kubernetes/Dockerfile with `deb` in the context, as its
    header says (`podman build -f ... -t TAG DIR`); returns the image id.
    --pull=never: the base must be the local one. --network=host: apt-get
    reaches the mirror without the bridge network (no iptables needed).
    --layers=false: no cache of intermediate images, which would only ever
    hit for a .deb made byte for byte again (cpack's are not) and would
    pile up in podman's storage run after run; for the same reason the
    image the tag named before is removed (unless a container uses it)."""
    old = podman("image", "inspect", "--format", "{{.Id}}", tag, check=False).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="heapprofd-context.") as ctx:
        shutil.copy(deb, ctx)
        iid = os.path.join(ctx, "iid")
        podman("build", "--pull=never", "--network=host", "--layers=false", "-f", DOCKERFILE,
               "-t", tag, "--iidfile", iid, "--build-arg", f"DEB={os.path.basename(deb)}", ctx,
               timeout=BUILD_TIMEOUT_S)
        with open(iid) as f:
            new = f.read().strip()
    if old and old not in new:
        podman("rmi", old, check=False)
    return new


def image_size(image):
    """The image's size in bytes (all layers, uncompressed)."""
    return int(podman("image", "inspect", "--format", "{{.Size}}", image).stdout.strip())


def kubelet_volume(root, files, mode):
    """`root` laid out as the kubelet writes Secret and ConfigMap volumes:
    the files in a timestamped directory, ..data a link to it, each name a
    link through ..data. `files` is {name: text}; each gets `mode`."""
    stamp = os.path.join(root, "..2026_01_01_00_00_00.000000001")
    os.makedirs(stamp)
    for name, text in files.items():
        with open(os.path.join(stamp, name), "w") as f:
            f.write(text)
        os.chmod(os.path.join(stamp, name), mode)
        os.symlink(os.path.join("..data", name), os.path.join(root, name))
    os.symlink(os.path.basename(stamp), os.path.join(root, "..data"))


def seccomp_runtime_default(path):
    """Writes to `path` the seccomp profile RuntimeDefault means on containerd
    and Docker nodes, made from podman's own default: theirs allow bpf() to
    a container with CAP_BPF and perf_event_open() with CAP_PERFMON, while
    podman 4.3's (containers-common 0.50, also CRI-O's) allows both only
    with CAP_SYS_ADMIN. The rest of podman's profile is kept."""
    with open("/usr/share/containers/seccomp.json") as f:
        profile = json.load(f)
    grants = {"bpf": "CAP_BPF", "perf_event_open": "CAP_PERFMON"}
    rules = []
    for rule in profile["syscalls"]:
        names = [n for n in rule["names"] if n not in grants or rule["action"] == "SCMP_ACT_ALLOW"]
        if names:
            rules.append(dict(rule, names=names))
    for name, cap in grants.items():
        rules.append({"names": [name], "action": "SCMP_ACT_ALLOW", "includes": {"caps": [cap]}})
        rules.append({"names": [name], "action": "SCMP_ACT_ERRNO", "errnoRet": 1,
                      "excludes": {"caps": ["CAP_SYS_ADMIN", cap]}})
    profile["syscalls"] = rules
    with open(path, "w") as f:
        json.dump(profile, f)


# Fields of the container's securityContext this translation knows.
KNOWN_SECURITY = {"privileged", "allowPrivilegeEscalation", "readOnlyRootFilesystem",
                  "runAsUser", "capabilities", "seccompProfile", "seLinuxOptions"}


def run_flags(pod, container, host_paths, volume_dirs, seccomp_profile, host_port):
    """`podman run` flags for `container` of pod spec `pod` (and its
    template's annotations in pod["annotations"]), field by field: a field
    of the security context not known here is a failure, so that the
    manifest cannot gain a setting the test leaves out. `host_paths` maps a
    hostPath to the host directory to mount instead; `volume_dirs` maps a
    ConfigMap or Secret volume's name to a directory laid out as the
    kubelet does. The container port is published on 127.0.0.1:host_port."""
    sc = container["securityContext"]
    unknown = set(sc) - KNOWN_SECURITY
    h.check(not unknown, f"securityContext fields test_container.py does not translate: {unknown}")
    h.check(sc.get("privileged") is False, "the container must not be privileged")
    flags = ["--cap-drop", ",".join(sc["capabilities"]["drop"]),
             "--cap-add", ",".join(sc["capabilities"]["add"]),
             "--user", str(sc["runAsUser"])]
    if pod.get("hostPID"):
        flags += ["--pid", "host"]
    h.check(not pod.get("hostNetwork"), "hostNetwork (the translation gives the pod its own)")
    if sc.get("allowPrivilegeEscalation") is False:
        flags += ["--security-opt", "no-new-privileges"]
    if sc.get("readOnlyRootFilesystem"):
        # A kubelet mounts no tmpfs on /tmp, /run and /var/tmp; podman would.
        flags += ["--read-only", "--read-only-tmpfs=false"]
    apparmor = pod["annotations"].get(
        f"container.apparmor.security.beta.kubernetes.io/{container['name']}")
    if apparmor:
        flags += ["--security-opt", f"apparmor={apparmor}"]
    if "seLinuxOptions" in sc:
        flags += ["--security-opt", f"label=type:{sc['seLinuxOptions']['type']}"]
    h.check_equal(sc["seccompProfile"]["type"], "RuntimeDefault", "seccompProfile")
    flags += ["--security-opt", f"seccomp={seccomp_profile}"]
    limits, requests = container["resources"]["limits"], container["resources"]["requests"]
    # As the kubelet sets them: the memory limit, a CFS quota of the CPU
    # limit, CPU shares of the request (1024 a core), the memory request
    # as a soft limit (what cgroup v1 has for it).
    flags += ["--memory", str(quantity(limits["memory"])), "--cpus", str(quantity(limits["cpu"])),
              "--cpu-shares", str(max(2, int(quantity(requests["cpu"]) * 1024))),
              "--memory-reservation", str(quantity(requests["memory"]))]
    volumes = {v["name"]: v for v in pod["volumes"]}
    for m in container["volumeMounts"]:
        vol = volumes[m["name"]]
        if "hostPath" in vol:
            src = host_paths.get(vol["hostPath"]["path"], vol["hostPath"]["path"])
        else:
            src = volume_dirs[m["name"]]
        flags += ["-v", f"{src}:{m['mountPath']}" + (":ro" if m.get("readOnly") else "")]
    for p in container["ports"]:
        flags += ["-p", f"127.0.0.1:{host_port}:{p['containerPort']}"]
    return flags


def quantity(text):
    """A Kubernetes quantity (50m, 1, 128Mi) as a number."""
    m = re.fullmatch(r"([0-9.]+)(m|Ki|Mi|Gi)?", str(text))
    h.check(m, f"{text!r} is not a quantity this test reads")
    scale = {None: 1, "m": 1e-3, "Ki": 1024, "Mi": 1024 ** 2, "Gi": 1024 ** 3}[m.group(2)]
    value = float(m.group(1)) * scale
    return int(value) if value == int(value) and m.group(2) != "m" else value


def container_pid(name):
    """The host pid of a running container's first process."""
    return int(podman("inspect", "--format", "{{.State.Pid}}", name).stdout.strip())


def memory_cgroup(pid):
    """The memory cgroup directory of `pid` and whether it is cgroup v2."""
    with open(f"/proc/{pid}/cgroup") as f:
        lines = [line.rstrip("\n").split(":", 2) for line in f]
    for _, controllers, path in lines:
        if "memory" in controllers.split(","):
            return f"/sys/fs/cgroup/memory{path}", False
    path = next(p for _, c, p in lines if c == "")
    return f"/sys/fs/cgroup{path}", True


def memory_figures(pid):
    """What the container's memory cgroup and the daemon say, in bytes:
    {peak, now, kernel (BPF maps and other kernel memory), limit, hwm}."""
    cg, v2 = memory_cgroup(pid)

    def read(name):
        with open(os.path.join(cg, name)) as f:
            return f.read().strip()
    if v2:
        stat = dict(line.split() for line in read("memory.stat").splitlines())
        now = int(read("memory.current"))
        out = {"now": now, "kernel": int(stat.get("kernel", 0)), "limit": int(read("memory.max")),
               "peak": int(read("memory.peak")) if os.path.exists(f"{cg}/memory.peak") else now}
    else:
        out = {"now": int(read("memory.usage_in_bytes")),
               "peak": int(read("memory.max_usage_in_bytes")),
               "kernel": int(read("memory.kmem.usage_in_bytes")),
               "limit": int(read("memory.limit_in_bytes"))}
    with open(f"/proc/{pid}/status") as f:
        out["hwm"] = int(re.search(r"VmHWM:\s+(\d+) kB", f.read()).group(1)) * 1024
    return out


def wait_serving(url, headers, timeout=h.LISTEN_TIMEOUT_S):
    """Waits until `url` answers 200; returns the answer."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = h.request_with_headers(url, headers, timeout=5)
            if last.status == 200:
                return last
        except OSError as e:
            last = e
        time.sleep(h.POLL_S)
    raise h.Failure(f"{url} did not answer 200 within {timeout:.0f} s: {last}")
