#!/usr/bin/env python3
"""make_manpage.py - builds heapprofd(8) from `heapprofd --help`, so that the
man page cannot lag behind the flags.

    make_manpage.py HEAPPROFD INCLUDE VERSION CHANGELOG OUTPUT.8.gz

help2man (Debian's help2man) does the roff: it turns the option lines into
the OPTIONS section and adds the sections --help lacks from INCLUDE
(heapprofd.h2m). Two things it cannot do alone, done here first:
  - heapprofd prints `usage:` over three lines; help2man wants one `Usage:`
    line followed by an `Options:` heading, so the help text is rewritten
    that way and served to help2man by a stand-in script named heapprofd;
  - the CONFIGURATION FILE section lists every config key. A key is a
    flag's name without the dashes (daemon/core/options.c reads both through
    one setter), so the section is generated from the same --help lines:
    one entry per flag but --config and --help, with its value and text.
The page's date is the top entry of the Debian changelog (CHANGELOG), so
that two builds of one version give the same page; gzip -n keeps no time
either (Debian policy 12.1: man pages are compressed with gzip -9n).
Python's standard library only; help2man and gzip must be installed.
"""

import email.utils
import os
import re
import subprocess
import sys
import tempfile

# One option line of --help: two spaces, the flag(s) with their values,
# then at least two spaces and the text (the text may also start on the
# next line, as for --max-stacks).
OPTION_LINE = re.compile(r"^  (--[a-z][a-z0-9-]*(?:[ =][^ ,]+)?(?:, --[a-z][a-z0-9-]*(?:[ =][^ ,]+)?)*)(?:  +(\S.*))?$")
# A continuation of an option's text: deeper indentation, no flag first.
CONTINUATION = re.compile(r"^ {4,}(\S.*)$")
# One flag in an option line: its name and the value it takes, if any.
FLAG = re.compile(r"--([a-z][a-z0-9-]*)(?:[ =]([^ ,]+))?")

# Flags that are not settings: they have no config key.
NOT_SETTINGS = {"help", "config"}


def run_help(binary):
    """The text `BINARY --help` prints on stdout (it must exit 0)."""
    r = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        sys.exit(f"make_manpage: {binary} --help exited with {r.returncode}: {r.stderr}")
    return r.stdout


def parse_options(help_text):
    """The options of the help text: a list of ([(name, value or None)], text),
    in the order --help lists them. Exits if it finds none."""
    options = []
    for line in help_text.splitlines():
        m = OPTION_LINE.match(line)
        if m:
            flags = [(f.group(1), f.group(2)) for f in FLAG.finditer(m.group(1))]
            options.append((flags, [m.group(2)] if m.group(2) else []))
            continue
        m = CONTINUATION.match(line)
        if m and options and not line.lstrip().startswith("["):
            options[-1][1].append(m.group(1))
    if not options:
        sys.exit("make_manpage: no option lines ('  --name VALUE  text') in --help")
    return [(flags, " ".join(text)) for flags, text in options]


def help_for_help2man(help_text):
    """The help text as help2man parses it: `Usage: heapprofd [OPTION]...`
    on one line, then `Options:` before the first option line."""
    lines = help_text.splitlines()
    first_option = next(i for i, line in enumerate(lines) if OPTION_LINE.match(line))
    head = " ".join(line.strip() for line in lines[:first_option])
    head = re.sub(r"^[Uu]sage: *", "", head)
    return f"Usage: {head}\n\nOptions:\n" + "\n".join(lines[first_option:]) + "\n"


def roff_escape(text):
    """text with roff's special characters escaped (backslash, dashes,
    a leading dot or quote)."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return re.sub(r"^([.'])", r"\\&\1", text)


def config_section(options):
    """The [CONFIGURATION FILE] include section: the format, then one entry
    per config key, made from the option lines of --help."""
    out = [
        "[CONFIGURATION FILE]",
        "The file named by \\fB\\-\\-config\\fR (the systemd unit passes",
        "\\fI/etc/heapprofd/heapprofd.conf\\fR) holds one \\fIname\\fR \\fB=\\fR \\fIvalue\\fR",
        "per line; \\fB#\\fR starts a comment. Every option above but \\fB\\-\\-config\\fR",
        "and \\fB\\-\\-help\\fR is a setting there, named as the flag without its dashes.",
        "The file is read first, then the command line, whose flags override it;",
        "the repeatable settings (pid, comm, exe, cgroup) add to the file's.",
        "An unknown name or a bad value stops heapprofd with the file and line named.",
        "The keys:",
    ]
    for flags, text in options:
        for name, value in flags:
            if name in NOT_SETTINGS:
                continue
            shown = "\\fIyes\\fR|\\fIno\\fR" if value is None else f"\\fI{roff_escape(value)}\\fR"
            out += [".TP", f"\\fB{roff_escape(name)}\\fR = {shown}",
                    f"As \\fB\\-\\-{roff_escape(name)}\\fR: {roff_escape(text)}"]
    return "\n".join(out) + "\n"


def changelog_date(changelog):
    """The time of the top entry of a Debian changelog, in seconds since 1970."""
    with open(changelog) as f:
        for line in f:
            if line.startswith(" -- "):
                return int(email.utils.parsedate_to_datetime(line.split("  ", 1)[1]).timestamp())
    sys.exit(f"make_manpage: no ' -- maintainer  date' line in {changelog}")


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__.split("\n\n")[1])
    binary, include, version, changelog, output = sys.argv[1:]
    help_text = run_help(binary)
    options = parse_options(help_text)
    with tempfile.TemporaryDirectory(prefix="heapprofd-man.") as tmp:
        # help2man names the page after the program it runs: a stand-in
        # called heapprofd that prints the rewritten help.
        help_file = os.path.join(tmp, "help.txt")
        with open(help_file, "w") as f:
            f.write(help_for_help2man(help_text))
        stand_in = os.path.join(tmp, "heapprofd")
        with open(stand_in, "w") as f:
            f.write(f"#!/bin/sh\nexec cat '{help_file}'\n")
        os.chmod(stand_in, 0o755)
        generated = os.path.join(tmp, "config.h2m")
        with open(generated, "w") as f:
            f.write(config_section(options))
        page = os.path.join(tmp, "heapprofd.8")
        env = dict(os.environ, SOURCE_DATE_EPOCH=str(changelog_date(changelog)), LC_ALL="C.UTF-8")
        r = subprocess.run(["help2man", "--no-info", "--section=8", f"--version-string={version}",
                            "--name=eBPF heap profiler that serves pprof profiles over HTTP",
                            # The generated section first: help2man places
                            # other sections in the order it reads them, and
                            # CONFIGURATION FILE belongs after OPTIONS.
                            f"--include={generated}", f"--include={include}",
                            f"--output={page}", stand_in], env=env, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"make_manpage: help2man failed ({r.returncode}): {r.stderr}")
        with open(page, "rb") as src, open(output, "wb") as dst:
            subprocess.run(["gzip", "-9n"], stdin=src, stdout=dst, check=True)


if __name__ == "__main__":
    main()
