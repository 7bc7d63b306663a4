"""/metrics read by the real Prometheus tools (Debian's prometheus package):
`promtool check metrics` finds nothing wrong with it, and a Prometheus
server, started with the scrape config of docs/integrations.md (its two
jobs pointed at this test's daemons, the second one's with a token file, its
interval shortened), which `promtool check config` accepts, scrapes both
daemons: its HTTP API answers `up` = 1 for each job and the workload's
in-use bytes, equal to what the profile says (exact.c at --sample-interval
1)."""

import json
import os
import re
import subprocess
import tempfile
import unittest
import urllib.parse

import heapprof_harness as h

DOCS = os.environ.get("HEAPPROF_DOCS", "")
PROMETHEUS = "/usr/bin/prometheus"
PROMTOOL = "/usr/bin/promtool"
# How long Prometheus may take to start and scrape twice at a 1 s interval.
SCRAPE_TIMEOUT_S = 60


# Where the documented config's jobs point, and its token file.
DOCS_LOCAL = "127.0.0.1:6060"
DOCS_REMOTE = "db1.example.com:6060"
DOCS_TOKEN_FILE = "/etc/prometheus/heapprofd.token"
# The token of the second daemon (any string will do: the daemon reads it from a file).
TOKEN = "heapprofd-prometheus-test-token-0123456789"


def _docs_config(address, remote, token_file):
    """The first yaml block under '## Prometheus' in docs/integrations.md,
    its local job aimed at `address`, its remote one at `remote` with the
    token in `token_file`."""
    h.check(DOCS, "HEAPPROF_DOCS is not set (run through ctest)")
    with open(os.path.join(DOCS, "integrations.md")) as f:
        text = f.read()
    section = text.split("\n## Prometheus\n", 1)
    h.check(len(section) == 2, "docs/integrations.md has no '## Prometheus' section")
    m = re.search(r"```yaml\n(.*?)```", section[1], re.S)
    h.check(m is not None, "no yaml block in the Prometheus section of docs/integrations.md")
    config = m.group(1)
    h.check(all(x in config for x in (DOCS_LOCAL, DOCS_REMOTE, DOCS_TOKEN_FILE,
                                      "scrape_interval: 15s")),
            f"the documented config changed shape; update this test:\n{config}")
    return (config.replace(DOCS_LOCAL, address).replace(DOCS_REMOTE, remote)
            .replace(DOCS_TOKEN_FILE, token_file)
            .replace("scrape_interval: 15s", "scrape_interval: 1s"))


def _token_file_path(tmp):
    """Where _token_file() puts the token."""
    return os.path.join(tmp, "heapprofd.token")


def _token_file(tmp):
    """TOKEN in a file of mode 0600 in tmp (heapprofd refuses one others may read)."""
    path = _token_file_path(tmp)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, (TOKEN + "\n").encode())
    os.close(fd)
    return path


def _query(port, promql):
    """The result vector of an instant query to Prometheus's HTTP API."""
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    status, body = h.get(url, timeout=10)
    h.check_equal(status, 200, f"GET {url}: {body[:300]!r}")
    answer = json.loads(body)
    h.check_equal(answer.get("status"), "success", f"query {promql}: {answer}")
    return answer["data"]["result"]


def _wait_for(port, promql, want, prom):
    """Polls `promql` until its one value equals `want`; fails with what it saw."""
    last = [None]

    def reached():
        h.check(prom.poll() is None, f"prometheus exited with {prom.returncode}")
        try:
            last[0] = _query(port, promql)
        except (OSError, h.Failure) as e:  # not listening yet
            last[0] = str(e)
            return False
        return len(last[0]) == 1 and float(last[0][0]["value"][1]) == want

    h.wait_until(reached, SCRAPE_TIMEOUT_S, lambda: f"{promql} did not become {want}; "
                                                    f"last: {last[0]}", poll=0.2)


class PrometheusTest(unittest.TestCase):
    def test_promtool_finds_nothing_wrong_with_the_metrics(self):
        h.check(os.access(PROMTOOL, os.X_OK), f"{PROMTOOL} is missing (Debian: prometheus)")
        with h.Daemon("--sample-interval", "1") as d, h.Workload("exact") as w:
            d.profile(f"/debug/pprof/heap?pid={w.pid}")  # per-target metrics too
            w.run()
            body = d.profile("/metrics")
        r = subprocess.run([PROMTOOL, "check", "metrics"], input=body, capture_output=True,
                           timeout=30)
        h.check(r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(),
                f"promtool check metrics: status {r.returncode}:\n{r.stdout.decode()}"
                f"{r.stderr.decode()}")

    def test_prometheus_scrapes_the_daemon_with_the_documented_config(self):
        h.check(os.access(PROMETHEUS, os.X_OK), f"{PROMETHEUS} is missing (Debian: prometheus)")
        h.check(os.access(PROMTOOL, os.X_OK), f"{PROMTOOL} is missing (Debian: prometheus)")
        with tempfile.TemporaryDirectory(prefix="heapprof-prometheus-") as tmp, \
                h.Daemon("--sample-interval", "1") as d, h.Workload("exact") as w, \
                h.Daemon("--token-file", _token_file(tmp)) as remote:
            d.profile(f"/debug/pprof/heap?pid={w.pid}")
            w.run()
            h.check_equal(remote.get("/metrics")[0], 401, "the token daemon's /metrics without it")
            config = os.path.join(tmp, "prometheus.yml")
            with open(config, "w") as f:
                f.write(_docs_config(d.address, remote.address, _token_file_path(tmp)))
            r = subprocess.run([PROMTOOL, "check", "config", config], capture_output=True,
                               text=True, timeout=30)
            h.check(r.returncode == 0, f"promtool check config: {r.stdout}{r.stderr}")
            port = h.free_port()
            log = open(os.path.join(tmp, "prometheus.log"), "wb")
            prom = subprocess.Popen([PROMETHEUS, f"--config.file={config}",
                                     f"--storage.tsdb.path={tmp}/data",
                                     f"--web.listen-address=127.0.0.1:{port}"],
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=log)
            try:
                _wait_for(port, 'up{job="heapprofd"}', 1, prom)
                inuse = sum(v[3] for v in h.EXACT_EXPECTED.values())
                _wait_for(port, f'heapprofd_target_inuse_bytes{{pid="{w.pid}",comm="exact"}}',
                          inuse, prom)
                _wait_for(port, 'heapprofd_bpf_up{job="heapprofd"}', 1, prom)
                _wait_for(port, 'up{job="heapprofd-remote"}', 1, prom)
                _wait_for(port, 'heapprofd_bpf_up{job="heapprofd-remote"}', 1, prom)
            except h.Failure as e:
                log.flush()
                with open(os.path.join(tmp, "prometheus.log")) as f:
                    raise h.Failure(f"{e}\nprometheus log (end):\n{f.read()[-3000:]}") from None
            finally:
                prom.terminate()
                try:
                    prom.wait(10)
                except subprocess.TimeoutExpired:
                    prom.kill()
                    prom.wait()
                log.close()


if __name__ == "__main__":
    h.main()
