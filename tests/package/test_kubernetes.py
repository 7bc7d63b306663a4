"""The ctest package.kubernetes: deploy/kubernetes/heapprofd.yaml and its
Dockerfile, checked without a cluster or a container engine. The image
is built and run with podman by tests/integration/test_container.py.

  - The manifest parses (PyYAML), and every field of every object is one
    the Kubernetes API has, with the right type, and the required ones are
    there: the schema is the one of Debian's python3-kubernetes (the client
    library's models, API 1.22), which we did not write.
  - The DaemonSet does what README.md says: hostPID, not privileged, the
    capabilities of the systemd unit and no others, the bpffs and BTF host
    mounts, a token from a Secret, the scrape annotations on the port it
    listens on, resources set, the image of this package version.
  - The real daemon takes the DaemonSet's arguments and the ConfigMap's
    config, with the token and config files laid out as the kubelet lays
    out Secret and ConfigMap volumes (..data symlinks, mode 0400), and
    serves what the probes and annotations ask for (on loopback, without
    pinning: the listen address and pin directory are the two arguments
    replaced).
  - The Dockerfile starts from Debian 12, installs the .deb this tree
    builds, and runs the binary and config the package ships.

Run with Debian's /usr/bin/python3 (python3-yaml, python3-kubernetes).
Environment (tests/package/CMakeLists.txt): HEAPPROFD, HEAPPROF_DEB,
HEAPPROF_DEB_VERSION, HEAPPROF_SOURCE_DIR, WORKLOADS. Needs root (the
daemon loads BPF).
"""

import os
import re
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
import heapprof_harness as h  # noqa: E402

try:
    import kubernetes.client as k8s
    import yaml
except ImportError as e:
    sys.exit(f"FAIL: {e}: run with Debian's /usr/bin/python3, with python3-yaml and "
             "python3-kubernetes installed (scripts/install-deps.sh)")

SOURCE_DIR = os.environ.get("HEAPPROF_SOURCE_DIR", "")
DEB = os.environ.get("HEAPPROF_DEB", "")
DEB_VERSION = os.environ.get("HEAPPROF_DEB_VERSION", "")
DEPLOY = os.path.join(SOURCE_DIR, "deploy", "kubernetes")
MANIFEST = os.path.join(DEPLOY, "heapprofd.yaml")
DOCKERFILE = os.path.join(DEPLOY, "Dockerfile")
UNIT = os.path.join(SOURCE_DIR, "systemd", "heapprofd.service")

# The kinds the manifest may hold, by (apiVersion, kind): their model.
MODELS = {("v1", "Namespace"): "V1Namespace", ("v1", "ServiceAccount"): "V1ServiceAccount",
          ("v1", "ConfigMap"): "V1ConfigMap", ("apps/v1", "DaemonSet"): "V1DaemonSet"}
# The client's names of JSON types.
PRIMITIVES = {"str": str, "int": int, "bool": bool, "float": (int, float), "object": object,
              "datetime": str, "date": str}
# A Kubernetes quantity such as 50m, 1, 128Mi.
QUANTITY = re.compile(r"^([0-9.]+)(m|Ki|Mi|Gi|k|M|G)?$")
QUANTITY_UNITS = {None: 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "Ki": 1024,
                  "Mi": 1024 ** 2, "Gi": 1024 ** 3}


def objects():
    """The manifest's objects, by kind."""
    with open(MANIFEST) as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    by_kind = {}
    for d in docs:
        h.check(isinstance(d, dict) and "kind" in d, f"a document without kind: {d!r}")
        h.check(d["kind"] not in by_kind, f"two {d['kind']} objects")
        by_kind[d["kind"]] = d
    return by_kind


def schema_errors(value, type_name, where):
    """Where `value` is not of the API type `type_name`: unknown fields and
    wrong JSON types, as a list of messages."""
    if type_name.startswith("list["):
        if not isinstance(value, list):
            return [f"{where}: wants a list, not {value!r}"]
        return [e for i, v in enumerate(value) for e in schema_errors(v, type_name[5:-1],
                                                                      f"{where}[{i}]")]
    if type_name.startswith("dict("):
        if not isinstance(value, dict):
            return [f"{where}: wants a map, not {value!r}"]
        inner = type_name[type_name.index(",") + 1:-1].strip()
        return [e for k, v in value.items() for e in schema_errors(v, inner, f"{where}.{k}")]
    if type_name in PRIMITIVES:
        bad = not isinstance(value, PRIMITIVES[type_name]) or \
            (type_name == "int" and isinstance(value, bool))
        return [f"{where}: wants {type_name}, not {value!r}"] if bad else []
    model = getattr(k8s, type_name)
    if not isinstance(value, dict):
        return [f"{where}: wants an object ({type_name}), not {value!r}"]
    fields = {json_name: attr for attr, json_name in model.attribute_map.items()}
    errors = []
    for key, v in value.items():
        if key not in fields:
            errors.append(f"{where}.{key}: {type_name} has no field {key!r}")
        else:
            errors += schema_errors(v, model.openapi_types[fields[key]], f"{where}.{key}")
    return errors


def quantity(text):
    """A quantity string as a number (cores or bytes)."""
    m = QUANTITY.match(str(text))
    h.check(m, f"{text!r} is not a Kubernetes quantity")
    return float(m.group(1)) * QUANTITY_UNITS[m.group(2)]


def container():
    """The DaemonSet's one container."""
    spec = objects()["DaemonSet"]["spec"]["template"]["spec"]
    h.check_equal(len(spec["containers"]), 1, "containers in the DaemonSet")
    return spec["containers"][0]


def arg_values():
    """The container's args as {flag: value or True}."""
    args, values = container()["args"], {}
    i = 0
    while i < len(args):
        h.check(args[i].startswith("--"), f"argument {args[i]!r} is not a flag")
        if i + 1 < len(args) and not args[i + 1].startswith("--"):
            values[args[i]] = args[i + 1]
            i += 2
        else:
            values[args[i]] = True
            i += 1
    return values


def mounts():
    """{volume name: (mountPath, volume)} of the container."""
    volumes = {v["name"]: v for v in objects()["DaemonSet"]["spec"]["template"]["spec"]["volumes"]}
    out = {}
    for m in container()["volumeMounts"]:
        h.check(m["name"] in volumes, f"volumeMount {m['name']} has no volume")
        out[m["name"]] = (m["mountPath"], volumes[m["name"]], m.get("readOnly", False))
    return out


def unit_capabilities():
    """The systemd unit's CapabilityBoundingSet, without the CAP_ prefixes."""
    with open(UNIT) as f:
        caps = [c for line in f if line.startswith("CapabilityBoundingSet=")
                for c in line.split("=", 1)[1].split()]
    h.check(caps, f"no CapabilityBoundingSet= in {UNIT}")
    return sorted(c[len("CAP_"):] for c in caps)


class ManifestTest(unittest.TestCase):
    def test_every_object_matches_the_kubernetes_api_schema(self):
        by_kind = objects()
        h.check_equal(sorted(by_kind), sorted(k for _, k in MODELS), "kinds in the manifest")
        client = k8s.ApiClient()
        for kind, obj in by_kind.items():
            model = MODELS.get((obj.get("apiVersion"), kind))
            h.check(model, f"{kind} with apiVersion {obj.get('apiVersion')!r}")
            errors = schema_errors(obj, model, kind)
            h.check(not errors, "fields the API does not have, or of the wrong type:\n" +
                    "\n".join(errors))
            # The client's constructors check the required fields.
            try:
                client._ApiClient__deserialize(obj, model)
            except (ValueError, TypeError) as e:
                raise h.Failure(f"{kind}: {e}") from None
            if kind != "Namespace":
                h.check_equal(obj["metadata"].get("namespace"), by_kind["Namespace"]["metadata"]["name"],
                              f"namespace of {kind}")

    def test_the_daemonset_runs_with_the_units_capabilities_and_not_privileged(self):
        ds = objects()["DaemonSet"]
        template = ds["spec"]["template"]
        for key, value in ds["spec"]["selector"]["matchLabels"].items():
            h.check_equal(template["metadata"]["labels"].get(key), value, f"template label {key}")
        spec, c = template["spec"], container()
        h.check_equal(spec.get("hostPID"), True, "hostPID")
        h.check(not spec.get("hostNetwork"), "hostNetwork: it listens on the pod network")
        h.check_equal(spec.get("automountServiceAccountToken"), False, "automountServiceAccountToken")
        sc = c["securityContext"]
        h.check_equal(sc.get("privileged"), False, "privileged")
        h.check_equal(sc.get("allowPrivilegeEscalation"), False, "allowPrivilegeEscalation")
        h.check_equal(sc["capabilities"].get("drop"), ["ALL"], "capabilities dropped")
        h.check_equal(sorted(sc["capabilities"]["add"]), unit_capabilities(),
                      "capabilities added, against the systemd unit's CapabilityBoundingSet")
        h.check_equal(sc.get("seccompProfile", {}).get("type"), "RuntimeDefault", "seccompProfile")
        m = mounts()
        for path, read_only in (("/sys/fs/bpf", False), ("/sys/kernel/btf", True)):
            found = [(name, ro) for name, (mp, vol, ro) in m.items()
                     if mp == path and vol.get("hostPath", {}).get("path") == path]
            h.check(found, f"no hostPath volume mounted at {path}")
            h.check_equal(found[0][1], read_only, f"readOnly of the {path} mount")

    def test_it_listens_on_the_pod_network_with_a_token_from_a_secret(self):
        args, c, m = arg_values(), container(), mounts()
        h.check_equal(args.get("--allow-remote"), True, "--allow-remote")
        host, _, port = args["--listen"].rpartition(":")
        h.check_equal(host, "0.0.0.0", "--listen address (the pod's interfaces)")
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        h.check_equal(ports.get("http"), int(port), "containerPort http against --listen")
        token_dir, token_vol, _ = m["token"]
        h.check_equal(args["--token-file"], f"{token_dir}/token", "--token-file in the Secret mount")
        h.check_equal(token_vol["secret"].get("defaultMode"), 0o400, "the Secret's defaultMode")
        h.check(args["--pin-dir"].startswith(m["bpffs"][0] + "/"), "--pin-dir on the bpffs mount")
        config_dir, config_vol, _ = m["config"]
        h.check_equal(os.path.dirname(args["--config"]), config_dir, "--config in the ConfigMap mount")
        h.check(os.path.basename(args["--config"]) in objects()["ConfigMap"]["data"],
                "the ConfigMap has the file --config names")
        h.check_equal(config_vol["configMap"]["name"], objects()["ConfigMap"]["metadata"]["name"],
                      "the config volume's ConfigMap")
        notes = objects()["DaemonSet"]["spec"]["template"]["metadata"]["annotations"]
        h.check_equal((notes.get("prometheus.io/scrape"), notes.get("prometheus.io/port"),
                       notes.get("prometheus.io/path")), ("true", port, "/metrics"),
                      "Prometheus annotations")
        h.check_equal((notes.get("profiles.grafana.com/memory.scrape"),
                       notes.get("profiles.grafana.com/memory.port")), ("true", port),
                      "Pyroscope annotations")
        for probe in ("livenessProbe", "readinessProbe"):
            get = c[probe]["httpGet"]
            h.check_equal((get["path"], get["port"]), ("/healthz", "http"), probe)

    def test_resources_are_set_and_the_image_is_this_version(self):
        c = container()
        requests, limits = c["resources"]["requests"], c["resources"]["limits"]
        for what in ("cpu", "memory"):
            h.check(what in requests and what in limits, f"no {what} request and limit")
            h.check(quantity(requests[what]) <= quantity(limits[what]),
                    f"{what} request {requests[what]} above its limit {limits[what]}")
        h.check_equal(c["image"], f"heapprofd:{DEB_VERSION}", "the DaemonSet's image")


def kubelet_volume(root, files):
    """A directory laid out as the kubelet writes Secret and ConfigMap
    volumes: the files in a timestamped directory, ..data a link to it, and
    each name a link through ..data. `files` is {name: (text, mode)}."""
    stamp = os.path.join(root, "..2026_01_01_00_00_00.000000001")
    os.makedirs(stamp)
    for name, (text, mode) in files.items():
        path = os.path.join(stamp, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, mode)
        os.symlink(os.path.join("..data", name), os.path.join(root, name))
    os.symlink(os.path.basename(stamp), os.path.join(root, "..data"))


class DaemonTest(unittest.TestCase):
    def test_the_daemon_serves_with_the_daemonsets_arguments(self):
        args, m = arg_values(), mounts()
        with tempfile.TemporaryDirectory(prefix="heapprofd-k8s.") as tmp:
            token = "k8s-test-token-0123456789abcdef"
            secret_dir, config_dir = os.path.join(tmp, "secret"), os.path.join(tmp, "config")
            # The mode the Secret volume gives the file (the kubelet's default
            # 0644 if none): the daemon itself judges it.
            mode = m["token"][1]["secret"].get("defaultMode", 0o644)
            kubelet_volume(secret_dir, {"token": (token + "\n", mode)})
            conf_name = os.path.basename(args["--config"])
            kubelet_volume(config_dir, {conf_name: (objects()["ConfigMap"]["data"][conf_name], 0o644)})
            # The arguments, with the pod's paths moved here; the harness adds a
            # loopback --listen and --pin-dir none in place of the pod's.
            run_args = []
            for flag, value in args.items():
                if flag in ("--listen", "--pin-dir"):
                    continue
                if flag == "--token-file":
                    value = os.path.join(secret_dir, os.path.relpath(value, m["token"][0]))
                if flag == "--config":
                    value = os.path.join(config_dir, conf_name)
                run_args += [flag] if value is True else [flag, value]
            auth = {"Authorization": f"Bearer {token}"}
            notes = objects()["DaemonSet"]["spec"]["template"]["metadata"]["annotations"]
            with h.Daemon(*run_args) as d:
                h.check_equal(d.request("/healthz").status, 200, "/healthz without a token")
                h.check_equal(d.request("/metrics").status, 401, "/metrics without the token")
                for path in (notes["prometheus.io/path"], notes["profiles.grafana.com/memory.path"]):
                    r = h.request_with_headers(d.url(path), auth)
                    h.check_equal(r.status, 200, f"{path} with the token")
                body = h.request_with_headers(d.url(notes["profiles.grafana.com/memory.path"]),
                                              auth).body
                h.check(body[:2] == b"\x1f\x8b", "the annotated profile path serves a gzip profile")


def dockerfile_instructions():
    """The Dockerfile's instructions: [(INSTRUCTION, arguments)], continued
    lines joined, comments dropped."""
    with open(DOCKERFILE) as f:
        text = re.sub(r"\\\n", " ", "".join(line for line in f if not line.lstrip().startswith("#")))
    out = []
    for line in text.splitlines():
        if line.strip():
            word, _, rest = line.strip().partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


class DockerfileTest(unittest.TestCase):
    def test_the_dockerfile_installs_this_package_on_debian_12(self):
        steps = dockerfile_instructions()
        h.check(steps and steps[0][0] == "FROM", f"{DOCKERFILE} does not start with FROM")
        h.check(re.fullmatch(r"debian:(12|bookworm)(-slim)?", steps[0][1]),
                f"base image {steps[0][1]!r} is not Debian 12")
        arg = dict(s[1].split("=", 1) for s in steps if s[0] == "ARG")
        h.check_equal(arg.get("DEB"), os.path.basename(DEB), "ARG DEB (the file the build makes)")
        copies = [s[1] for s in steps if s[0] == "COPY"]
        h.check_equal(copies, ["${DEB} /tmp/heapprofd.deb"], "COPY")
        run = " ".join(s[1] for s in steps if s[0] == "RUN")
        h.check("apt-get install -y --no-install-recommends /tmp/heapprofd.deb" in run,
                f"RUN does not install the package with apt-get: {run}")
        h.check("rm -rf /var/lib/apt/lists/*" in run, "RUN leaves apt's lists in the image")
        h.check(not any(s[0] == "USER" for s in steps), "a USER: heapprofd runs as root")
        listing = subprocess.run(["dpkg-deb", "-c", DEB], capture_output=True, text=True,
                                 check=True).stdout
        entry = [s[1] for s in steps if s[0] == "ENTRYPOINT"]
        h.check_equal(entry, ['["/usr/sbin/heapprofd"]'], "ENTRYPOINT (exec form)")
        h.check(" ./usr/sbin/heapprofd\n" in listing, "the package has no /usr/sbin/heapprofd")
        cmd = [s[1] for s in steps if s[0] == "CMD"]
        h.check_equal(cmd, ['["--config", "/etc/heapprofd/heapprofd.conf"]'], "CMD")
        h.check(" ./etc/heapprofd/heapprofd.conf\n" in listing, "the package has no config")
        expose = [s[1] for s in steps if s[0] == "EXPOSE"]
        h.check_equal(expose, [str(container()["ports"][0]["containerPort"])], "EXPOSE")


if __name__ == "__main__":
    for var, value in (("HEAPPROF_DEB", DEB), ("HEAPPROF_SOURCE_DIR", SOURCE_DIR)):
        if not value or not os.path.exists(value):
            sys.exit(f"FAIL: {var}={value!r} does not exist (run through ctest)")
    h.main()
