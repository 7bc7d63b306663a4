"""Profiles as `go tool pprof` reads them (an oracle we did not write): runs
it on a profile and parses its -raw output (the pprof package's
Profile.String()) into samples with their locations and labels, locations
with their lines, and mappings; plus the checks and sums the tests make on
them."""

import collections
import os
import re
import subprocess
import tempfile

from harness_checks import Failure, check, check_equal

# The sample types every profile carries, in this order (docs: HTTP API).
SAMPLE_TYPES = [
    ("alloc_objects", "count"),
    ("alloc_space", "bytes"),
    ("inuse_objects", "count"),
    ("inuse_space", "bytes"),
]


class Line:
    """One line of a location, as `pprof -raw` prints it ('name file:line s=N',
    '(system name)' after it when that differs, or '??' without a function)."""

    def __init__(self, name, file="", line=0, system_name=None):
        self.name = name
        self.file = file
        self.line = line
        self.system_name = system_name or name

    def __repr__(self):
        return f"{self.name} {self.file}:{self.line} ({self.system_name})"


class Location(collections.namedtuple("Location", "address mapping lines")):
    """One location: its address, its mapping's id (0: none) and its lines,
    innermost (inlined) first."""

    def names(self):
        """Its function names, innermost first; its address if it has none."""
        return [ln.name for ln in self.lines] or [f"{self.address:#x}"]


# One mapping: start, limit, file offset, file, build ID and pprof's
# [FN][FL][LN][IN] flags.
Mapping = collections.namedtuple("Mapping", "start limit offset file build_id flags")


class Sample:
    """One sample: its values (SAMPLE_TYPES order), its locations, leaf
    first, and its labels ({key: value text}, e.g. {'pid': '42'})."""

    def __init__(self, values, locations, labels=None):
        self.values = values
        self.locations = locations
        self.labels = labels or {}

    @property
    def frames(self):
        """Function names, leaf first, inlined calls as frames of their own."""
        return [name for loc in self.locations for name in loc.names()]

    def leaf(self):
        """The leaf function name, or '<empty stack>'."""
        return self.frames[0] if self.locations else "<empty stack>"

    def __repr__(self):
        return f"Sample({self.values}, {' <- '.join(self.frames)})"


class Profile:
    """A profile as `go tool pprof -raw` shows it."""

    def __init__(self, raw):
        self.raw = raw
        self.comments = []        # the Comment: lines
        self.period_type = None   # (type, unit)
        self.period = None
        self.sample_types = []    # [(type, unit)]
        self.default_type = None  # the type marked [dflt], if any
        self.duration = None      # the Duration: text, if any
        self.samples = []
        self.locations = {}       # id -> Location
        self.mappings = {}        # id -> Mapping

    def names(self):
        """Every function name of every location."""
        return {ln.name for loc in self.locations.values() for ln in loc.lines}

    def mapping_of(self, path):
        """(id, Mapping) of the mapping of file `path` that holds locations."""
        used = {loc.mapping for loc in self.locations.values()}
        for mid, m in self.mappings.items():
            if m.file == path and mid in used:
                return mid, m
        raise Failure(f"no mapping of {path} with locations in:\n{self.raw}")


def _go_env(tmp):
    """The environment for `go tool pprof`: HOME and temp directories in tmp."""
    env = dict(os.environ)
    env.update({"HOME": tmp, "PPROF_TMPDIR": tmp, "GOCACHE": os.path.join(tmp, "gocache"),
                "PPROF_BINARY_PATH": os.path.join(tmp, "no-binaries")})
    return env


def pprof(profile_bytes, *flags):
    """Runs `go tool pprof -symbolize=none FLAGS <profile>`; returns its stdout.

    -symbolize=none keeps pprof from symbolizing on its own, so the names
    checked are the ones heapprofd wrote. Fails with stderr if pprof fails.
    """
    check(profile_bytes[:2] == b"\x1f\x8b",
          f"profile is not gzip (first bytes {profile_bytes[:16]!r})")
    with tempfile.TemporaryDirectory(prefix="heapprof-pprof-") as tmp:
        path = os.path.join(tmp, "profile.pb.gz")
        with open(path, "wb") as f:
            f.write(profile_bytes)
        cmd = ["go", "tool", "pprof", "-symbolize=none"] + list(flags) + [path]
        try:
            r = subprocess.run(cmd, env=_go_env(tmp), capture_output=True, timeout=60)
        except FileNotFoundError:
            raise Failure("`go` is not installed (Debian: golang-go); "
                          "it is needed for `go tool pprof`") from None
        check(r.returncode == 0,
              f"{' '.join(cmd[:-1])} failed with status {r.returncode}: "
              f"{r.stderr.decode('utf-8', 'replace')}")
        return r.stdout.decode("utf-8", "replace")


# The lines of `go tool pprof -raw` output (Profile.String() of the pprof
# package): a sample's values and location ids, its labels ('key:[value]'
# after 16 spaces), a location ('id: 0xADDR M=id [F] ' and its first line),
# a further line of one (13 spaces: inlined), a line itself, and a mapping.
_SAMPLE_RE = re.compile(r"^\s*(-?\d+(?:\s+-?\d+)*):((?:\s+\d+)*)\s*$")
_LABEL_RE = re.compile(r"(\w+):\[([^\]]*)\]")
_LOCATION_RE = re.compile(r"^\s*(\d+): (0x[0-9a-fA-F]+) (?:M=(\d+) )?(?:\[F\] )?(.*)$")
_INLINED = " " * 13
_LINE_RE = re.compile(r"^(.*) (\S*):(-?\d+) s=-?\d+(?:\((.*)\))?$")
_MAPPING_RE = re.compile(r"^\s*(\d+): (0x[0-9a-f]+)/(0x[0-9a-f]+)/(0x[0-9a-f]+) (.*) ([0-9a-f]*) "
                         r"((?:\[\w\w\])*)$")


def _line(text):
    """A Line from its text; fails on text that is neither a line nor '??'."""
    if text == "??":
        return Line("??")
    m = _LINE_RE.match(text)
    check(m is not None, f"unparsed location line in pprof -raw output: {text!r}")
    return Line(m.group(1), m.group(2), int(m.group(3)), m.group(4))


def _parse_header(p, line):
    """One line before the sample types; True once they follow."""
    if line.startswith("Comment: "):
        p.comments.append(line[len("Comment: "):])
    elif line.startswith("PeriodType: "):
        p.period_type = tuple(line.split()[1:3])
    elif line.startswith("Period: "):
        p.period = int(line.split()[1])
    elif line.startswith("Duration: "):
        p.duration = line.split(" ", 1)[1]
    return line == "Samples:"


def _parse_sample_types(p, line):
    """The line of sample types, '[dflt]' after the default one."""
    for token in line.split():
        dflt = token.endswith("[dflt]")
        token = token[: -len("[dflt]")] if dflt else token
        typ, _, unit = token.partition("/")
        p.sample_types.append((typ, unit))
        if dflt:
            p.default_type = typ


def _parse_sample(refs, line):
    """A sample line (values: location ids) or the labels of the last one."""
    m = _SAMPLE_RE.match(line)
    if m:
        refs.append(([int(v) for v in m.group(1).split()],
                     [int(i) for i in m.group(2).split()], {}))
        return
    labels = dict(_LABEL_RE.findall(line))
    check(refs and labels and line.startswith(" " * 16),
          f"unparsed sample line in pprof -raw output: {line!r}")
    refs[-1][2].update(labels)


def _parse_location(p, line, last):
    """A location line, or a further (inlined) line of location `last`;
    returns the id of the location it belongs to. (A location line starts
    with its id in 6 columns, so never with 13 spaces.)"""
    if line.startswith(_INLINED):
        check(last is not None, f"an inlined line before any location: {line!r}")
        p.locations[last].lines.append(_line(line.strip()))
        return last
    m = _LOCATION_RE.match(line)
    check(m is not None, f"unparsed location in pprof -raw output: {line!r}")
    rest = m.group(4).strip()
    lid = int(m.group(1))
    p.locations[lid] = Location(int(m.group(2), 16), int(m.group(3) or 0),
                                [_line(rest)] if rest else [])
    return lid


def _parse_mapping(p, line):
    """A mapping line."""
    m = _MAPPING_RE.match(line)
    check(m is not None, f"unparsed mapping in pprof -raw output: {line!r}")
    p.mappings[int(m.group(1))] = Mapping(int(m.group(2), 16), int(m.group(3), 16),
                                          int(m.group(4), 16), m.group(5), m.group(6),
                                          m.group(7))


def parse_raw(raw):
    """Parses `go tool pprof -raw` output into a Profile: header, samples
    with their locations and labels, locations with their lines, mappings.
    Fails on any line it does not understand: it is a test oracle."""
    p = Profile(raw)
    section, refs, last = "header", [], None
    for line in raw.splitlines():
        if section == "header":
            section = "sample_types" if _parse_header(p, line) else section
        elif section == "sample_types":
            _parse_sample_types(p, line)
            section = "samples"
        elif line == "Locations" and section == "samples":
            section = "locations"
        elif line == "Mappings" and section == "locations":
            section = "mappings"
        elif section == "samples":
            _parse_sample(refs, line)
        elif section == "locations":
            last = _parse_location(p, line, last)
        elif line.strip():
            _parse_mapping(p, line)
    check(section == "mappings", f"pprof -raw output ended in section {section!r}:\n{raw}")
    for values, ids, labels in refs:
        missing = [i for i in ids if i not in p.locations]
        check(not missing, f"a sample refers to locations {missing}, which -raw does not list")
        p.samples.append(Sample(values, [p.locations[i] for i in ids], labels))
    return p


def decode(profile_bytes):
    """Decodes a gzipped profile.proto with `go tool pprof -raw` into a Profile
    (samples with 4 values and frames, leaf first)."""
    return parse_raw(pprof(profile_bytes, "-raw"))


def check_heap_shape(profile, period, what):
    """Fails unless the profile has our sample types, period type and period."""
    check_equal(profile.sample_types, SAMPLE_TYPES, f"{what}: sample types")
    check_equal(profile.period_type, ("space", "bytes"), f"{what}: period type")
    check_equal(profile.period, period, f"{what}: period")
    for s in profile.samples:
        check(len(s.values) == 4, f"{what}: sample with {len(s.values)} values: {s}")


def totals_by_leaf(samples):
    """Sums the values of samples per leaf function: {leaf: [4 values]}."""
    totals = {}
    for s in samples:
        t = totals.setdefault(s.leaf(), [0, 0, 0, 0])
        for i, v in enumerate(s.values):
            t[i] += v
    return totals


def traces(profile_bytes, *flags):
    """The output of `go tool pprof -traces` on a profile."""
    return pprof(profile_bytes, "-traces", *flags)


def describe(samples, limit=40):
    """A few samples, one a line, for failure messages."""
    out = [repr(s) for s in samples[:limit]]
    if len(samples) > limit:
        out.append(f"... and {len(samples) - limit} more")
    return "\n".join(out)
