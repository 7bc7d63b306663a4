"""The ctest package.manpage: heapprofd(8) documents every flag and every
config key the daemon accepts, and no other.

The man page is generated from `heapprofd --help` (packaging/make_manpage.py),
so what can drift is --help itself: a flag added to the parser without a
line in --help. So the flags are taken from three places that do not share
code, and must agree:
  - the parser: the `{"name", ..._argument` entries of the getopt table in
    daemon/core/*.c (read from the source: the binary cannot list them);
  - `heapprofd --help`: the flags at the start of its option lines;
  - the man page: the OPTIONS entries and the CONFIGURATION FILE keys.
Then each key of the man page is put in a config file for the real binary,
which must know it (a bad value, not an unknown name). And the page must
render without a groff warning.

Environment (tests/package/CMakeLists.txt): HEAPPROFD (the binary),
HEAPPROF_MANPAGE (heapprofd.8.gz), HEAPPROF_SOURCE_DIR, HEAPPROF_VERSION.
Python's standard library only.
"""

import gzip
import os
import re
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
import heapprof_harness as h  # noqa: E402  (check, check_equal, main)

HEAPPROFD = os.environ.get("HEAPPROFD", "")
MANPAGE = os.environ.get("HEAPPROF_MANPAGE", "")
SOURCE_DIR = os.environ.get("HEAPPROF_SOURCE_DIR", "")
VERSION = os.environ.get("HEAPPROF_VERSION", "")

# A getopt_long table entry: {"name", required_argument, ...}.
PARSER_ENTRY = re.compile(r'\{\s*"([a-z][a-z0-9-]*)"\s*,\s*(?:no|required|optional)_argument')
# Flags that are not settings, so have no config key.
NOT_SETTINGS = {"help", "config"}


def parser_flags():
    """The long options of the getopt tables in daemon/core/*.c."""
    core = os.path.join(SOURCE_DIR, "daemon", "core")
    names = set()
    for name in sorted(os.listdir(core)):
        if name.endswith(".c"):
            with open(os.path.join(core, name)) as f:
                names |= set(PARSER_ENTRY.findall(f.read()))
    h.check(names, f"no getopt table entries ('{{\"name\", required_argument') in {core}/*.c: "
                   "the parser moved, update tests/package/check_manpage.py")
    return names


def help_flags():
    """The flags heading the option lines of `heapprofd --help`."""
    r = subprocess.run([HEAPPROFD, "--help"], capture_output=True, text=True, timeout=30)
    h.check_equal(r.returncode, 0, "heapprofd --help exit status")
    names = set()
    for line in r.stdout.splitlines():
        if line.startswith("  --"):
            heading = re.split(r"\s{2,}", line.strip())[0]
            names |= set(re.findall(r"--([a-z][a-z0-9-]*)", heading))
    h.check(names, f"no option lines in heapprofd --help:\n{r.stdout}")
    return names


def man_sections():
    """The man page's roff source, by section name (.SH)."""
    with gzip.open(MANPAGE, "rt") as f:
        text = f.read()
    sections, name = {}, None
    for line in text.splitlines():
        m = re.match(r'^\.SH\s+"?([^"]*)"?\s*$', line)
        if m:
            name = m.group(1)
            sections[name] = []
        elif name is not None:
            sections[name].append(line)
    return text, sections


def tagged_names(lines, pattern):
    """The names `pattern` finds in the tag line after each .TP."""
    names = set()
    for i, line in enumerate(lines[:-1]):
        if line.strip() == ".TP":
            names |= set(re.findall(pattern, lines[i + 1].replace("\\-", "-")))
    return names


class ManPageTest(unittest.TestCase):
    def test_every_parsed_flag_is_in_help(self):
        parsed, shown = parser_flags(), help_flags()
        missing = sorted(parsed - shown - {"help"})
        h.check(not missing, f"flags the parser takes but --help does not list (add a line to "
                             f"options_usage(); the man page is generated from it): {missing}")
        unknown = sorted(shown - parsed)
        h.check(not unknown, f"flags --help lists but the parser does not take: {unknown}")

    def test_the_man_page_has_every_flag_and_every_config_key(self):
        shown = help_flags()
        _, sections = man_sections()
        for want in ("NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "CONFIGURATION FILE",
                     "SIGNALS", "EXIT STATUS", "FILES", "SEE ALSO"):
            h.check(want in sections, f"no {want} section in {MANPAGE}: {sorted(sections)}")
        options = tagged_names(sections["OPTIONS"], r"\\fB--([a-z][a-z0-9-]*)")
        h.check_equal(sorted(options), sorted(shown | {"help"}), "flags in the man page's OPTIONS")
        keys = tagged_names(sections["CONFIGURATION FILE"], r"^\\fB([a-z][a-z0-9-]*)\\fR =")
        h.check_equal(sorted(keys), sorted(shown - NOT_SETTINGS),
                      "keys in the man page's CONFIGURATION FILE")

    def test_the_binary_knows_every_config_key_of_the_man_page(self):
        _, sections = man_sections()
        keys = tagged_names(sections["CONFIGURATION FILE"], r"^\\fB([a-z][a-z0-9-]*)\\fR =")
        h.check(keys, "no config keys in the man page")
        with tempfile.TemporaryDirectory(prefix="heapprofd-mancheck.") as tmp:
            config = os.path.join(tmp, "heapprofd.conf")
            for key in sorted(keys):
                # An empty value, then a line no heapprofd knows: whatever the
                # key accepts, parsing stops before the daemon would start.
                with open(config, "w") as f:
                    f.write(f"{key} =\nno-such-setting-here = 1\n")
                r = subprocess.run([HEAPPROFD, "--config", config], capture_output=True,
                                   text=True, timeout=30)
                h.check_equal(r.returncode, 2, f"exit status with config key {key!r}")
                first = r.stderr.splitlines()[0] if r.stderr else ""
                h.check(f":1: unknown setting '{key}'" not in first,
                        f"the man page documents config key {key!r}, which heapprofd does not "
                        f"know: {first}")

    def test_the_man_page_renders_without_warnings_and_names_the_version(self):
        text, _ = man_sections()
        h.check(re.search(rf'^\.TH HEAPPROFD "8" "[^"]+" "heapprofd {re.escape(VERSION)}"', text,
                          re.M), f"the .TH line does not name heapprofd {VERSION}: "
                                 f"{text.splitlines()[1]}")
        r = subprocess.run(["man", "--warnings", "-l", MANPAGE], capture_output=True, text=True,
                           env=dict(os.environ, MANWIDTH="80"), timeout=60)
        h.check_equal(r.returncode, 0, f"man -l {MANPAGE} exit status ({r.stderr})")
        h.check(r.stderr.strip() == "", f"groff warnings for {MANPAGE}:\n{r.stderr}")
        h.check("CONFIGURATION FILE" in r.stdout, "the rendered page lacks CONFIGURATION FILE")


if __name__ == "__main__":
    for var, value in (("HEAPPROFD", HEAPPROFD), ("HEAPPROF_MANPAGE", MANPAGE),
                       ("HEAPPROF_SOURCE_DIR", SOURCE_DIR)):
        if not value or not os.path.exists(value):
            sys.exit(f"FAIL: {var}={value!r} does not exist (run through ctest; "
                     "the man page needs help2man: scripts/install-deps.sh)")
    h.main()
