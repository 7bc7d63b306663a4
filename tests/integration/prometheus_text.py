"""The Prometheus text exposition format, read strictly: /metrics must be
valid for Prometheus to scrape it, so the parser that gives the tests the
values checks the format too."""

import re

from harness_checks import Failure, check

_METRIC_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
_METRIC_SAMPLE_RE = re.compile(rf"^({_METRIC_NAME})(?:\{{(.*)\}})? (\S+)(?: (-?\d+))?$")
_METRIC_LABEL_RE = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"\s*(?:,|$)')
_METRIC_TYPES = ("counter", "gauge", "histogram", "summary", "untyped")
_METRIC_SUFFIXES = {"histogram": ("_bucket", "_sum", "_count"), "summary": ("", "_sum", "_count")}


class Metrics(dict):
    """One /metrics answer: {name: value} for the samples without labels;
    `labelled` holds every sample as {(name, ((label, value), ...)): value}."""

    def __init__(self, samples):
        super().__init__({name: v for (name, labels), v in samples.items() if not labels})
        self.labelled = samples


def _parse_metric_labels(text, line):
    """The inside of {...} as a tuple of (name, value); fails if malformed."""
    labels, pos = [], 0
    while pos < len(text):
        m = _METRIC_LABEL_RE.match(text, pos)
        check(m is not None and m.end() > pos, f"/metrics: malformed labels in {line!r}")
        labels.append((m.group(1), m.group(2)))
        pos = m.end()
    names = [n for n, _ in labels]
    check(len(names) == len(set(names)), f"/metrics: a label repeats in {line!r}")
    return tuple(labels)


class _MetricFamilies:
    """The HELP and TYPE lines seen so far, and which family's block is open."""

    def __init__(self):
        self.types, self.helps = {}, set()
        self.finished = set()   # families whose block is over
        self.current = None     # the family of the last line

    def comment(self, line):
        """A '#' line: HELP and TYPE open their family's block, once each."""
        parts = line.split(None, 3)
        if len(parts) < 3 or parts[1] not in ("HELP", "TYPE"):
            return
        name = parts[2]
        check(re.fullmatch(_METRIC_NAME, name), f"/metrics: bad metric name in {line!r}")
        check(name not in self.finished, f"/metrics: family {name} is split: {line!r}")
        if self.current is not None and self.current != name:
            self.finished.add(self.current)
        self.current = name
        if parts[1] == "HELP":
            check(name not in self.helps, f"/metrics: second HELP for {name}")
            self.helps.add(name)
        else:
            check(len(parts) == 4 and parts[3] in _METRIC_TYPES,
                  f"/metrics: bad TYPE line {line!r}")
            check(name not in self.types, f"/metrics: second TYPE for {name}")
            self.types[name] = parts[3]

    def check_sample(self, name):
        """A sample belongs to the open block of a family with a TYPE."""
        family = None
        for fam, typ in self.types.items():
            if name == fam or name in (fam + s for s in _METRIC_SUFFIXES.get(typ, ())):
                family = fam if family is None or len(fam) > len(family) else family
        check(family is not None, f"/metrics: sample {name} has no TYPE line before it")
        check(family == self.current, f"/metrics: sample {name} outside its family's block "
                                      f"(the last family was {self.current})")


def parse_metrics(text):
    """Checks that text is valid Prometheus text exposition (every line a
    `# HELP`, `# TYPE`, other comment or sample; a TYPE for every family
    before its samples, at most one HELP and TYPE each; the samples of a
    family contiguous; no sample twice; values numbers; counters not
    negative) and returns it as Metrics."""
    check(text.endswith("\n"), "/metrics: does not end with a newline")
    samples, families = {}, _MetricFamilies()
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("#"):
            families.comment(line)
            continue
        m = _METRIC_SAMPLE_RE.match(line)
        check(m is not None, f"/metrics: not a sample line: {line!r}")
        name, label_text, value = m.group(1), m.group(2) or "", m.group(3)
        families.check_sample(name)
        try:
            number = float(value)
        except ValueError:
            raise Failure(f"/metrics: value {value!r} is not a number: {line!r}") from None
        key = (name, _parse_metric_labels(label_text, line))
        check(key not in samples, f"/metrics: sample {key} appears twice")
        samples[key] = number
    check(samples, "/metrics: no samples")
    for (name, _), value in samples.items():
        if families.types.get(name) == "counter":
            check(value >= 0, f"/metrics: counter {name} is negative: {value}")
    return Metrics(samples)
