"""The snippets of docs/integrations.md, checked: the YAML ones parse
(python3-yaml) and keep to the keys Parca's pkg/config/config.go knows,
with its rules (a timeout longer than the interval; every profile Parca
enables by default turned off but memory; memory not a delta), their
relabel rules pass `promtool check config` and do what the page says;
the Alloy ones parse (alloy_syntax.py), use only the blocks and attributes
of the Alloy source the page cites, refer only to components they define,
keep `delta = false`, and their relabel rules, applied here as Alloy
applies them (anchored RE2 regexes, `$1`), turn real processes'
discovery labels (exe, /proc/PID/cgroup joined with `|`) into the unit,
service name and guarded URL the page says; and a real daemon serves every
URL the snippets make: 200 for selectors, 409 for a guard on a reused pid.
"""

import os
import re
import subprocess
import tempfile
import unittest
import urllib.parse

import yaml

import alloy_syntax
import heapprof_harness as h

DOCS = os.environ.get("HEAPPROF_DOCS", "")
PROMTOOL = "/usr/bin/promtool"

# Parca's configuration (pkg/config/config.go at 3b5647cd9e2a): the keys of a
# scrape config (its own, the service discovery ones used here, and the
# Prometheus HTTP client settings inlined), of profiling_config and of one
# profile; the profiles it enables unless told otherwise.
PARCA_JOB_KEYS = {"job_name", "params", "scrape_interval", "scrape_timeout", "scheme",
                  "normalized_addresses", "profiling_config", "relabel_configs",
                  "static_configs", "file_sd_configs", "authorization", "basic_auth", "oauth2",
                  "bearer_token", "bearer_token_file", "tls_config", "proxy_url",
                  "follow_redirects", "enable_http2"}
PARCA_PROFILING_KEYS = {"pprof_config", "path_prefix"}
PARCA_PROFILE_KEYS = {"enabled", "path", "delta", "keep_sample_type", "seconds"}
PARCA_DEFAULT_PROFILES = {"memory", "block", "goroutine", "mutex", "process_cpu"}
PARCA_DEFAULT_INTERVAL_S = 10

# Alloy's components as the page uses them (grafana/alloy at 66ebea856dff):
# attributes and blocks of each, from the `alloy:"..."` tags of
# discovery/process/args.go, discovery/relabel/relabel.go and
# common/relabel/relabel.go, pyroscope/scrape/scrape.go (with the HTTP
# client settings of common/config/types.go squashed in), pyroscope/write.
HTTP_CLIENT = {"bearer_token", "bearer_token_file", "follow_redirects", "enable_http2",
               "proxy_url", "no_proxy", "proxy_from_environment", "proxy_connect_header",
               "http_headers"}
PROFILES = {"profile.memory", "profile.block", "profile.goroutine", "profile.mutex",
            "profile.process_cpu", "profile.fgprof", "profile.godeltaprof_memory",
            "profile.godeltaprof_mutex", "profile.godeltaprof_block"}
ALLOY = {
    "discovery.process": ({"join", "refresh_interval"}, {"discover_config"}, "targets"),
    "discovery.relabel": ({"targets"}, {"rule"}, "output"),
    "pyroscope.scrape": ({"targets", "forward_to", "job_name", "params", "scrape_interval",
                          "scrape_timeout", "scheme", "delta_profiling_duration"} | HTTP_CLIENT,
                         {"profiling_config", "basic_auth", "authorization", "oauth2",
                          "tls_config", "clustering"}, None),
    "pyroscope.write": ({"external_labels"}, {"endpoint"}, "receiver"),
}
ALLOY_INNER = {
    "discover_config": {"cwd", "exe", "commandline", "username", "uid", "container_id",
                        "cgroup_path"},
    "rule": {"source_labels", "separator", "regex", "modulus", "target_label", "replacement",
             "action"},
    "profiling_config": {"path_prefix"},
    "endpoint": {"name", "url", "remote_timeout", "headers", "min_backoff_period",
                 "max_backoff_period", "max_backoff_retries", "retry_on_http_429"},
}
ALLOY_REQUIRED = {"discovery.relabel": {"targets"}, "pyroscope.scrape": {"targets", "forward_to"}}
PROFILE_ATTRS = {"enabled", "path", "delta"}


def section(name):
    """The text of section `## name` of docs/integrations.md."""
    h.check(DOCS, "HEAPPROF_DOCS is not set (run through ctest)")
    with open(os.path.join(DOCS, "integrations.md")) as f:
        text = f.read()
    parts = re.split(r"\n## ", text)
    found = [p for p in parts if p.startswith(name + "\n")]
    h.check(len(found) == 1, f"docs/integrations.md has no section '## {name}'")
    return found[0]


def blocks(text, lang):
    """The fenced blocks of language `lang` in text."""
    return re.findall(rf"```{lang}\n(.*?)```", text, re.S)


def seconds(duration):
    """A Prometheus duration ("60s", "2m") in seconds."""
    m = re.fullmatch(r"(\d+)(ms|s|m|h)", str(duration))
    h.check(m is not None, f"duration {duration!r}")
    return int(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def promtool_check(config, what):
    """Fails unless `promtool check config` accepts the YAML text `config`."""
    h.check(os.access(PROMTOOL, os.X_OK), f"{PROMTOOL} is missing (Debian: prometheus)")
    with tempfile.NamedTemporaryFile("w", suffix=".yml") as f:
        f.write(config)
        f.flush()
        r = subprocess.run([PROMTOOL, "check", "config", f.name], capture_output=True,
                           text=True, timeout=60)
    h.check(r.returncode == 0, f"promtool check config of {what}: {r.stdout}{r.stderr}\n{config}")


def relabel(labels, rules):
    """Applies relabel rules (dicts with Prometheus's/Alloy's keys) as both
    do: source labels joined by `;`, the regex anchored, `$1` expanded,
    replace and keep; returns the labels, or None if dropped."""
    labels = dict(labels)
    for rule in rules:
        value = rule.get("separator", ";").join(labels.get(s, "") for s in
                                                rule.get("source_labels", []))
        m = re.fullmatch(rule.get("regex", "(.*)"), value)
        action = rule.get("action", "replace")
        if action == "keep":
            if not m:
                return None
            continue
        h.check_equal(action, "replace", f"relabel action in {rule}")
        if m:
            repl = re.sub(r"\$\{?(\d+)\}?", lambda g: m.group(int(g.group(1))) or "",
                          rule.get("replacement", "$1"))
            labels[rule["target_label"]] = repl
    return labels


# A name of this run's own: the URLs of the snippets are asked for with it
# in place of the services they name, which may run on this machine and
# are none of the test's business to attach.
NOBODY = f"hpnone{os.getpid() % 100000}"


def url_of(labels, path, own_names=False):
    """The path and query a scraper makes of a target's `__param_*` labels
    (with `own_names`, the values of comm= and unit= replaced by NOBODY)."""
    params = {k[len("__param_"):]: v for k, v in labels.items() if k.startswith("__param_")}
    if own_names:
        params = {k: (NOBODY if k in ("comm", "unit") else v) for k, v in params.items()}
    return f"{path}?{urllib.parse.urlencode(params)}"


# --- Parca ----------------------------------------------------------------------

def parca_jobs():
    """The scrape jobs of the Parca section's first YAML block."""
    found = blocks(section("Parca"), "yaml")
    h.check(len(found) == 2, f"the Parca section has {len(found)} YAML blocks, not 2")
    config = yaml.safe_load(found[0])
    h.check(set(config) == {"scrape_configs"}, f"Parca config keys: {set(config)}")
    return config["scrape_configs"], found[1]


# --- Alloy ----------------------------------------------------------------------

def alloy_config():
    """Every Alloy block of the page, read as one configuration (their
    components have labels of their own; one pyroscope.write serves all)."""
    text = "\n".join(blocks(section("Grafana Alloy"), "alloy") +
                     blocks(section("Pyroscope: every process in one scrape"), "alloy"))
    h.check(text.count("pyroscope.scrape") == 3, "the page should have three scrape components")
    try:
        return alloy_syntax.parse(text)
    except alloy_syntax.SyntaxError_ as e:
        raise h.Failure(f"the Alloy snippets do not parse: {e}") from None


def check_alloy_block(b, allowed_attrs, what):
    """Fails on attributes of `b` outside `allowed_attrs`."""
    h.check(set(b.attrs) <= allowed_attrs,
            f"{what} (line {b.line}): attributes Alloy does not know: {set(b.attrs) - allowed_attrs}")


def relabel_rules():
    """The rule blocks of the page's discovery.relabel, as dicts."""
    top = alloy_config()
    rel = [c for c in top.blocks if c.name == "discovery.relabel"]
    h.check(len(rel) == 1, "one discovery.relabel on the page")
    return [b.attrs for b in rel[0].blocks]


def cgroup_label(pid):
    """__meta_process_cgroup_path as discovery.process makes it: the lines
    of /proc/PID/cgroup joined with `|`."""
    with open(f"/proc/{pid}/cgroup") as f:
        return "|".join(f.read().splitlines())


class IntegrationsTest(unittest.TestCase):
    def test_the_parca_snippets_keep_to_parca_s_config(self):
        jobs, fragment = parca_jobs()
        for job in jobs:
            what = f"Parca job {job.get('job_name')!r}"
            h.check(job.get("job_name"), f"{what}: job_name is empty (Parca refuses it)")
            h.check(set(job) <= PARCA_JOB_KEYS, f"{what}: keys Parca does not know: "
                                                f"{set(job) - PARCA_JOB_KEYS}")
            interval = seconds(job.get("scrape_interval", f"{PARCA_DEFAULT_INTERVAL_S}s"))
            timeout = seconds(job.get("scrape_timeout", f"{interval + 3}s"))
            h.check(timeout > interval, f"{what}: Parca refuses a timeout not over the interval")
            profiling = job["profiling_config"]
            h.check(set(profiling) <= PARCA_PROFILING_KEYS, f"{what}: {set(profiling)}")
            pprof = profiling["pprof_config"]
            h.check(PARCA_DEFAULT_PROFILES <= set(pprof),
                    f"{what}: Parca enables {PARCA_DEFAULT_PROFILES - set(pprof)} unless listed")
            for name, cfg in pprof.items():
                h.check(set(cfg) <= PARCA_PROFILE_KEYS, f"{what}: {name}: {set(cfg)}")
                h.check(cfg.get("enabled", True) == (name == "memory"),
                        f"{what}: only memory should be enabled, {name}: {cfg}")
            memory = pprof["memory"]
            h.check(memory.get("delta") is False and memory["path"] in
                    ("/debug/pprof/allocs", "/debug/pprof/heap"), f"{what}: memory {memory}")
            for group in job["static_configs"]:
                h.check(not any("/" in t for t in group["targets"]), f"{what}: a URL as a target")
        kept = yaml.safe_load(fragment)["memory"]
        h.check(set(kept) <= PARCA_PROFILE_KEYS and all(set(t) == {"type", "unit"} for t in
                                                          kept["keep_sample_type"]),
                f"the keep_sample_type fragment: {kept}")
        h.check(all((t["type"], t["unit"]) in h.SAMPLE_TYPES for t in kept["keep_sample_type"]),
                f"keep_sample_type names a sample type heapprofd does not serve: {kept}")

    def test_the_parca_relabel_rules_pass_promtool_and_name_the_service(self):
        jobs, _ = parca_jobs()
        for job in jobs:
            rules = job.get("relabel_configs", [])
            promtool_check(yaml.safe_dump({"scrape_configs": [{
                "job_name": "parca-relabel", "relabel_configs": rules,
                "static_configs": [{"targets": ["127.0.0.1:1"]}]}]}), "the Parca relabel rules")
            services = set()
            for group in job["static_configs"]:
                labels = relabel(group.get("labels", {}), rules)
                services.add(labels.get("service"))
            h.check_equal(services, {"redis-server", "postgresql"}, "the service label of each group")

    def test_a_daemon_serves_the_urls_of_the_parca_targets(self):
        jobs, _ = parca_jobs()
        with h.Daemon() as d:
            for job in jobs:
                path = job["profiling_config"]["pprof_config"]["memory"]["path"]
                for group in job["static_configs"]:
                    url = url_of(group.get("labels", {}), path, own_names=True)
                    p = h.decode(d.profile(url))  # nothing matches here: an empty profile
                    h.check(any("no process that this caller may profile matches" in c
                                for c in p.comments), f"{url}: {p.comments}")

    def test_the_alloy_snippets_parse_and_use_only_what_alloy_has(self):
        top = alloy_config()
        h.check(not top.attrs, f"top-level attributes: {top.attrs}")
        exports = {}
        for c in top.blocks:
            h.check(c.name in ALLOY and c.label, f"line {c.line}: {c.name} {c.label!r}: not a "
                                                 f"component the page should use, or no label")
            attrs, inner, export = ALLOY[c.name]
            check_alloy_block(c, attrs, c.name)
            h.check(ALLOY_REQUIRED.get(c.name, set()) <= set(c.attrs),
                    f"{c.name} {c.label}: lacks {ALLOY_REQUIRED.get(c.name, set()) - set(c.attrs)}")
            key = f"{c.name}.{c.label}"
            h.check(key not in exports, f"{key} defined twice")
            exports[key] = export
            for b in c.blocks:
                h.check(b.name in inner, f"{c.name}: block {b.name} unknown")
                check_alloy_block(b, ALLOY_INNER.get(b.name, set()), f"{c.name} {b.name}")
                for p in b.blocks:
                    h.check(b.name == "profiling_config" and p.name in PROFILES,
                            f"{b.name}: block {p.name} unknown")
                    check_alloy_block(p, PROFILE_ATTRS, p.name)
                    h.check(p.name != "profile.memory" or p.attrs.get("delta") is False,
                            f"{c.label}: profile.memory must keep delta = false: {p.attrs}")
                    h.check(p.name == "profile.memory" or p.attrs.get("enabled") is False,
                            f"{c.label}: {p.name} must be off (heapprofd serves no such profile)")
                if b.name == "endpoint":
                    h.check("url" in b.attrs, "endpoint without url")
        refs = []

        def collect(v):
            if isinstance(v, alloy_syntax.Ref):
                refs.append(v.name)
            elif isinstance(v, list):
                for x in v:
                    collect(x)
            elif isinstance(v, dict):
                for x in v.values():
                    collect(x)
        for c in top.blocks:
            for v in c.attrs.values():
                collect(v)
        for ref in refs:
            component, _, field = ref.rpartition(".")
            h.check(exports.get(component) == field, f"reference {ref}: no such export")

    def test_the_alloy_relabel_rules_name_the_unit_and_pass_promtool(self):
        rules = relabel_rules()
        promtool_check(yaml.safe_dump({"scrape_configs": [{
            "job_name": "alloy-relabel", "relabel_configs": rules,
            "static_configs": [{"targets": ["127.0.0.1:1"]}]}]}), "the Alloy relabel rules")
        exe = "/usr/bin/redis-server"
        cases = [
            ("0::/system.slice/redis-server.service", "redis-server"),
            ("12:pids:/system.slice/redis-server.service|1:name=systemd:/system.slice/"
             "redis-server.service|0::/system.slice/redis-server.service", "redis-server"),
            ("0::/system.slice/redis@6380.service/worker", "redis@6380"),
            ("0::/user.slice/user-1000.slice/user@1000.service/app.slice/cache.service", "cache"),
            ("0::/user.slice/user-1000.slice/session-4.scope", "redis-server"),  # no unit: the exe
            ("12:pids:/|1:name=systemd:/", "redis-server"),  # cgroup v1 only
        ]
        for cgroup, service in cases:
            out = relabel({"__process_pid__": "4321", "__meta_process_exe": exe,
                           "__meta_process_cgroup_path": cgroup}, rules)
            h.check(out is not None, f"{exe} dropped by the keep rule")
            h.check_equal(out.get("service_name"), service, f"service_name for {cgroup!r}")
            h.check_equal(url_of(out, "/debug/pprof/heap"),
                          "/debug/pprof/heap?pid=4321&exe=%2Fusr%2Fbin%2Fredis-server",
                          f"the URL for {cgroup!r}")
            h.check_equal(out.get("__address__"), "127.0.0.1:6060", "__address__")
        h.check(relabel({"__process_pid__": "1", "__meta_process_exe": "/usr/bin/python3"}, rules)
                is None, "the keep rule keeps only the programs named")

    def test_a_daemon_serves_the_alloy_targets_and_refuses_a_reused_pid(self):
        rules = [r for r in relabel_rules() if r.get("action") != "keep"]
        top = alloy_config()
        static = [c for c in top.blocks if c.name == "pyroscope.scrape" and c.label == "services"]
        h.check(len(static) == 1, "the static pyroscope.scrape \"services\"")
        with h.Daemon("--sample-interval", "1") as d:
            for target in static[0].attrs["targets"]:
                p = h.decode(d.profile(url_of(target, "/debug/pprof/heap", own_names=True)))
                h.check(not p.samples, f"{target}: nothing runs here that it names")
            with h.Workload("exact") as w:
                labels = relabel({"__process_pid__": str(w.pid),
                                  "__meta_process_exe": os.readlink(f"/proc/{w.pid}/exe"),
                                  "__meta_process_cgroup_path": cgroup_label(w.pid)}, rules)
                url = url_of(labels, "/debug/pprof/heap")
                d.profile(url)  # attaches
                w.run()
                got = h.totals_by_leaf(h.decode(d.profile(url)).samples)
                h.check_equal(got.get("alloc_small"), h.EXACT_EXPECTED["alloc_small"],
                              f"{url}: the workload's profile")
                pid = w.pid
                w.finish()
            with h.SpawnedWorkload(pid, "rounds"):
                r = d.request(url)
                h.check_equal(r.status, 409, f"{url} once pid {pid} runs another program: "
                                             f"{r.text()!r}")


if __name__ == "__main__":
    h.main()
