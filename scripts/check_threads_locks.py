#!/usr/bin/env python3
"""check_threads_locks.py - checks that daemon/README.md's tables of threads
and locks list every thread the daemon starts and every lock it declares.

Why a script: the tables are the one place the lock order is written, and a
thread or a mutex added without a row makes them wrong without anyone
noticing. The script reads the C sources (comments and strings blanked out)
and finds:

- threads: every pthread_create() call and every MHD_start_daemon() call
  (libmicrohttpd starts threads of its own), keyed `dir/file.c:routine`
  (the start routine, the third argument of pthread_create) or
  `dir/file.c:MHD_start_daemon`;
- locks: every declaration of a pthread_mutex_t, pthread_cond_t,
  pthread_rwlock_t, pthread_spinlock_t, pthread_once_t, pthread_barrier_t,
  sem_t, mtx_t, cnd_t or atomic_flag (a pointer to one is a reference, not
  a lock), keyed `dir/file:scope.name`, where scope is the struct whose
  field it is or the function it is a static of (none for a file-level
  variable); and every flock()/lockf() call, keyed `dir/file.c:function.flock`.

Paths are relative to daemon/. In daemon/README.md, under the heading
"## Threads and locks", the first cell of each row of the table after
"### Threads" names its threads' keys in backticks, and likewise the table
after "### Locks" for locks. It fails, naming the row to add, for a key the
code has and the table lacks; naming the row to remove, for a row the code
no longer has; and for a key written anywhere in the section (the lock
order, the other cells) that the code does not have.

Usage: check_threads_locks.py [--self-test] [REPO_ROOT]   (default: this script's repo)
Exit status 0 when the tables match, 1 otherwise. --self-test checks the
checker on a copy of daemon/ with a thread and locks added and rows removed.
"""
import os
import re
import sys

LOCK_TYPES = (
    "pthread_mutex_t",
    "pthread_cond_t",
    "pthread_rwlock_t",
    "pthread_spinlock_t",
    "pthread_once_t",
    "pthread_barrier_t",
    "sem_t",
    "mtx_t",
    "cnd_t",
    "atomic_flag",
)
C_KEYWORDS = {"if", "for", "while", "switch", "do", "else", "return", "sizeof"}
SECTION = "## Threads and locks"
KEY = re.compile(r"`([\w./-]+\.[ch]:[\w.]+)`")


def blank(text):
    """The C text with comments, strings and character literals replaced by
    spaces (newlines kept), so that offsets and line numbers stay."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
        else:
            out.append(c)
            i += 1
            continue
        out.append(re.sub(r"[^\n]", " ", text[i:j]))
        i = j
    return "".join(out)


def matching(code, start, open_ch, close_ch):
    """The offset just past the bracket that closes the one at `start`."""
    depth = 0
    for i in range(start, len(code)):
        if code[i] == open_ch:
            depth += 1
        elif code[i] == close_ch:
            depth -= 1
            if depth == 0:
                return i + 1
    return len(code)


def brace_scopes(code):
    """Each brace block as (open, close, name): name is the struct's tag, the
    function's name, the name declared after an anonymous struct at file
    level, or None for a block that names nothing (it takes its parent's)."""
    pairs, stack = [], []
    for i, c in enumerate(code):
        if c == "{":
            stack.append(i)
        elif c == "}" and stack:
            pairs.append((stack.pop(), i + 1, not stack))
    scopes = []
    for start, end, outermost in sorted(pairs):
        window = code[max(0, start - 400):start]
        head = window[max(window.rfind(";"), window.rfind("}"), window.rfind("{")) + 1:]
        name = None
        tag = re.search(r"\b(?:struct|union)\s+(\w+)\s*$", head)
        if tag:
            name = tag.group(1)
        elif re.search(r"\b(?:struct|union)\s*$", head):
            after = re.match(r"\s*\**\s*(\w+)", code[end:end + 200])
            name = after.group(1) if after and outermost else None
        elif head.rstrip().endswith(")"):
            depth = 0
            stripped = head.rstrip()
            for i in range(len(stripped) - 1, -1, -1):
                depth += stripped[i] == ")"
                depth -= stripped[i] == "("
                if depth == 0:
                    fn = re.search(r"(\w+)\s*$", stripped[max(0, i - 100):i])
                    if fn and fn.group(1) not in C_KEYWORDS:
                        name = fn.group(1)
                    break
        scopes.append((start, end, name))
    return scopes


def scope_at(scopes, pos):
    """The name of the innermost named block around `pos`, or None."""
    best = None
    for start, end, name in scopes:
        if name and start < pos < end and (best is None or start > best[0]):
            best = (start, name)
    return best[1] if best else None


def function_at(scopes, code, pos):
    """The name of the function whose body holds `pos` (the outermost
    block), or None."""
    outer = [s for s in scopes if s[0] < pos < s[1]]
    if not outer:
        return None
    start, _, name = min(outer)
    return name


def line_of(code, pos):
    return code.count("\n", 0, pos) + 1


def split_args(code, open_paren):
    """The top-level arguments of the call whose '(' is at `open_paren`."""
    end = matching(code, open_paren, "(", ")")
    args, depth, cur = [], 0, []
    for c in code[open_paren + 1:end - 1]:
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        if c == "," and depth == 0:
            args.append("".join(cur).strip())
            cur = []
        else:
            cur.append(c)
    args.append("".join(cur).strip())
    return args


def scan_file(path, rel):
    """The threads and locks of one source file, each as (key, line, what)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        code = blank(f.read())
    scopes = brace_scopes(code)
    threads, locks = [], []
    for m in re.finditer(r"\bpthread_create\s*\(", code):
        args = split_args(code, m.end() - 1)
        routine = re.sub(r"^\(.*?\)|[&\s()]", "", args[2]) if len(args) >= 3 else "?"
        threads.append((f"{rel}:{routine}", line_of(code, m.start()),
                        f"pthread_create(..., {routine}, ...)"))
    for m in re.finditer(r"\bMHD_start_daemon\s*\(", code):
        threads.append((f"{rel}:MHD_start_daemon", line_of(code, m.start()),
                        "MHD_start_daemon() (libmicrohttpd's threads)"))
    types = "|".join(LOCK_TYPES)
    for m in re.finditer(r"\b(%s)\b([^;(){}]*);" % types, code):
        for decl in m.group(2).split(","):
            d = re.match(r"\s*(\**)\s*(\w+)", decl)
            if not d or d.group(1):
                continue  # a pointer: a reference to a lock declared elsewhere
            scope = scope_at(scopes, m.start())
            key = f"{rel}:{scope + '.' if scope else ''}{d.group(2)}"
            locks.append((key, line_of(code, m.start()), f"{m.group(1)} `{d.group(2)}`"
                          + (f" in {scope}" if scope else "")))
    for m in re.finditer(r"\b(flock|lockf)\s*\(", code):
        if re.search(r"\b(?:int|void)\s*$", code[:m.start()]):
            continue  # a prototype
        fn = function_at(scopes, code, m.start()) or "file"
        locks.append((f"{rel}:{fn}.{m.group(1)}", line_of(code, m.start()),
                      f"{m.group(1)}() in {fn}()"))
    return threads, locks


def scan_tree(daemon):
    threads, locks = {}, {}
    for root, dirs, files in os.walk(daemon):
        dirs.sort()
        for name in sorted(files):
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, daemon)
            t, l = scan_file(path, rel)
            for key, line, what in t:
                threads.setdefault(key, (f"daemon/{rel}:{line}", what))
            for key, line, what in l:
                locks.setdefault(key, (f"daemon/{rel}:{line}", what))
    return threads, locks


def table_rows(lines, heading):
    """The keys in the first cell of each row of the first table after
    `heading`, as {key: line number}."""
    rows, seen_table = {}, False
    for i, line in lines:
        if line.startswith("### ") and line.strip() != heading and seen_table:
            break
        if line.startswith("|"):
            seen_table = True
            first = line.split("|")[1]
            for key in KEY.findall(first):
                rows.setdefault(key, []).append(i)
        elif seen_table:
            break
    return rows


def readme_section(readme):
    with open(readme, encoding="utf-8") as f:
        lines = f.read().split("\n")
    out, inside = [], False
    for i, line in enumerate(lines, 1):
        if line.strip() == SECTION:
            inside = True
        elif inside and line.startswith("## "):
            break
        elif inside:
            out.append((i, line))
    return out


def subsection(section, heading):
    at = [k for k, (_, line) in enumerate(section) if line.strip() == heading]
    return section[at[0]:] if at else []


def check(repo):
    """The problems of `repo`'s tables, and a line saying what was found."""
    daemon = os.path.join(repo, "daemon")
    readme = os.path.join(daemon, "README.md")
    threads, locks = scan_tree(daemon)
    section = readme_section(readme)
    errors = []
    if not section:
        errors.append(f"daemon/README.md has no section '{SECTION}'")
    kinds = (("thread", "### Threads", threads), ("lock", "### Locks", locks))
    for kind, heading, found in kinds:
        rows = table_rows(subsection(section, heading), heading)
        if section and not rows:
            errors.append(f"daemon/README.md: no table of {kind}s after '{heading}'")
        for key, (where, what) in sorted(found.items()):
            if key not in rows:
                errors.append(f"{where}: {what} has no row in daemon/README.md's {kind} table: "
                              f"add a row whose first cell names `{key}`")
        for key, at in sorted(rows.items()):
            if len(at) > 1:
                errors.append(f"daemon/README.md:{at[1]}: `{key}` has a row already "
                              f"(line {at[0]}): one row per {kind}")
            if key not in found:
                errors.append(f"daemon/README.md:{at[0]}: the {kind} table's row `{key}` names no "
                              f"{kind} in daemon/ (moved or gone?): rename or remove the row")
    known = set(threads) | set(locks)
    for i, line in section:
        for key in KEY.findall(line):
            if key not in known:
                errors.append(f"daemon/README.md:{i}: `{key}` names no thread or lock in "
                              "daemon/: correct it")
    summary = (f"{len(threads)} thread sites and {len(locks)} locks, each with its row in "
               "daemon/README.md")
    return list(dict.fromkeys(errors)), summary


# A source file the self-test adds: one thread, two locks, and what must not
# count (a pointer, a parameter, a comment, a string).
ADDED_C = r"""
#include <pthread.h>
static pthread_mutex_t added_lock = PTHREAD_MUTEX_INITIALIZER;
struct added { pthread_cond_t ready; pthread_mutex_t *borrowed; };
/* pthread_create(&t, NULL, in_a_comment, NULL); pthread_mutex_t in_comment; */
static void *added_main(void *arg) { return arg; }
int added_start(pthread_mutex_t *param)
{
    pthread_t t;
    const char *s = "pthread_create(&t, NULL, in_a_string, NULL)";
    (void)param; (void)s;
    return pthread_create(&t, NULL, added_main, NULL);
}
"""


def self_test(repo):
    """Checks the checker on a copy of `repo`'s daemon/: it passes as it
    is, and fails naming exactly the rows a new thread and new locks lack,
    a row whose thread is gone, and a misspelt key."""
    import shutil
    import tempfile
    failures = []

    def expect(what, errors, wanted, unwanted=()):
        text = "\n".join(errors)
        for w in wanted:
            if w not in text:
                failures.append(f"{what}: no error names {w}; got:\n{text}")
        for u in unwanted:
            if u in text:
                failures.append(f"{what}: an error names {u}, which is no thread or lock:\n{text}")

    with tempfile.TemporaryDirectory() as tmp:
        shutil.copytree(os.path.join(repo, "daemon"), os.path.join(tmp, "daemon"))
        errors, _ = check(tmp)
        if errors:
            failures.append("the tree as it is fails:\n" + "\n".join(errors))
        with open(os.path.join(tmp, "daemon", "attach", "added.c"), "w") as f:
            f.write(ADDED_C)
        errors, _ = check(tmp)
        expect("a new file", errors,
               ["add a row whose first cell names `attach/added.c:added_main`",
                "add a row whose first cell names `attach/added.c:added_lock`",
                "add a row whose first cell names `attach/added.c:added.ready`"],
               ["in_a_comment", "in_a_string", "in_comment", "borrowed", "param"])
        if len(errors) != 3:
            failures.append(f"a new file: {len(errors)} errors, not 3:\n" + "\n".join(errors))
        os.remove(os.path.join(tmp, "daemon", "attach", "added.c"))
        readme = os.path.join(tmp, "daemon", "README.md")
        with open(readme) as f:
            lines = f.read().split("\n")
        # The first thread row goes, and a misspelt key joins the section.
        start = lines.index("### Threads") if "### Threads" in lines else 0
        rows = [i for i in range(start, len(lines)) if lines[i].startswith("| `")]
        key = KEY.findall(lines[rows[0]].split("|")[1])[0] if rows else None
        if rows:
            del lines[rows[0]]
        lines.insert(start + 1, "`attach/targets.h:targets.mutex`")
        with open(readme, "w") as f:
            f.write("\n".join(lines))
        errors, _ = check(tmp)
        if key is None:
            failures.append("the README has no thread row to remove")
        else:
            expect("an edited README", errors,
                   [f"add a row whose first cell names `{key}`",
                    "`attach/targets.h:targets.mutex` names no thread or lock"])
    for f in failures:
        print("self-test: " + f)
    print("check_threads_locks self-test: " + ("FAILED" if failures else "passed"))
    return 1 if failures else 0


def main():
    args = sys.argv[1:]
    test = "--self-test" in args
    args = [a for a in args if a != "--self-test"]
    repo = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    if test:
        return self_test(repo)
    errors, summary = check(repo)
    for e in errors:
        print(e)
    if errors:
        print(f"check_threads_locks: {len(errors)} problem(s); keys are `dir/file:routine` for "
              "threads, `dir/file:struct.field`, `dir/file:function.var` or `dir/file:var` "
              "for locks (see the script's top comment)")
        return 1
    print("check_threads_locks: " + summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
