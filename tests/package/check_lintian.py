"""The ctest package.lintian: lintian, with every tag it has switched on,
finds nothing in the .deb but the tags packaging/lintian-tags.txt lists with
their reasons; and each listed tag still appears (a stale entry fails too,
so the list says what lintian says).

Environment (tests/package/CMakeLists.txt): HEAPPROF_DEB (the package),
HEAPPROF_SOURCE_DIR. Needs lintian (scripts/install-deps.sh installs it);
without it the test fails, it never skips. Python's standard library only.
"""

import os
import re
import shutil
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "integration"))
import heapprof_harness as h  # noqa: E402  (check, main)

DEB = os.environ.get("HEAPPROF_DEB", "")
SOURCE_DIR = os.environ.get("HEAPPROF_SOURCE_DIR", "")
EXPECTED = os.path.join(SOURCE_DIR, "packaging", "lintian-tags.txt")

# One tag line of lintian's output: "E: heapprofd: tag-name details...".
TAG_LINE = re.compile(r"^([EWIPXOC]): heapprofd(?: \w+)?: (\S+)(.*)$")


def expected_tags():
    """The tags of lintian-tags.txt, each with its reason."""
    tags = {}
    name = None
    with open(EXPECTED) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            if line[0].isspace():
                h.check(name, f"{EXPECTED}: a continuation line before any tag: {line!r}")
                tags[name] += " " + line.strip()
                continue
            name, _, reason = line.partition(":")
            tags[name] = reason.strip()
    for name, reason in tags.items():
        h.check(reason, f"{EXPECTED}: tag {name} has no reason")
    return tags


def lintian_tags():
    """The tags lintian reports for the package, as {tag: [its lines]}."""
    h.check(shutil.which("lintian"), "lintian is not installed (Debian: lintian; "
                                     "scripts/install-deps.sh installs it)")
    # --fail-on none: the comparison below judges the tags, so a non-zero
    # exit is lintian itself failing.
    r = subprocess.run(["lintian", "--pedantic", "--display-info", "--display-experimental",
                        "--tag-display-limit", "0", "--fail-on", "none", DEB],
                       capture_output=True, text=True, timeout=600)
    print(r.stdout, end="", flush=True)
    h.check(r.returncode == 0, f"lintian exited with {r.returncode}: {r.stderr}")
    found = {}
    for line in r.stdout.splitlines():
        m = TAG_LINE.match(line)
        if m:
            found.setdefault(m.group(2), []).append(line)
        elif line.strip() and not line.startswith("N:"):
            raise h.Failure(f"an unexpected lintian line: {line!r}")
    return found


class LintianTest(unittest.TestCase):
    def test_lintian_reports_only_the_explained_tags(self):
        want, got = expected_tags(), lintian_tags()
        new = sorted(set(got) - set(want))
        h.check(not new, "lintian tags not in packaging/lintian-tags.txt (fix them, or list "
                         "them there with the reason they stay):\n" +
                "\n".join(line for tag in new for line in got[tag]))
        stale = sorted(set(want) - set(got))
        h.check(not stale, f"tags in packaging/lintian-tags.txt that lintian no longer reports "
                           f"(remove them): {stale}")
        print(f"lintian: {len(got)} tags, all explained in packaging/lintian-tags.txt", flush=True)


if __name__ == "__main__":
    if not DEB or not os.path.isfile(DEB):
        sys.exit(f"FAIL: HEAPPROF_DEB={DEB!r} is not a file (the fixture package.build "
                 "makes it; run through ctest)")
    h.main()
