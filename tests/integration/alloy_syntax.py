"""A reader of the Alloy configuration syntax, enough for the snippets of
docs/integrations.md: blocks (`name.part "label" { ... }`), attributes
(`name = value`), strings with Go's escapes, numbers, booleans, null,
lists, objects, and references (`discovery.relabel.x.output`). Debian
packages no Alloy, and its own parser is a Go module of a newer Go than
Debian's, so the test reads the syntax itself (from Alloy's grammar:
syntax/parser and syntax/scanner in grafana/alloy). It fails on anything
else, with the line.
"""

import json
import re


class SyntaxError_(Exception):
    """Alloy syntax this reader does not take, with where."""


_TOKEN = re.compile(r"""
    (?P<space>[ \t\r\n]+)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<raw>`[^`]*`)
  | (?P<number>-?[0-9]+(?:\.[0-9]+)?)
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<punct>[{}\[\](),=.])
""", re.X | re.S)


def tokens(text):
    """(kind, value, line) of each token, comments and space left out."""
    out, at, line = [], 0, 1
    while at < len(text):
        m = _TOKEN.match(text, at)
        if not m:
            raise SyntaxError_(f"line {line}: unexpected {text[at:at + 20]!r}")
        kind = m.lastgroup
        value = m.group(kind)
        if kind == "string":
            value = json.loads(value)  # Go's escapes in these snippets are JSON's
        elif kind == "raw":
            kind, value = "string", value[1:-1]
        if kind not in ("space", "comment"):
            out.append((kind, value, line))
        line += m.group(0).count("\n")
        at = m.end()
    out.append(("end", None, line))
    return out


class Ref:
    """A reference to another component's export: its dotted name."""

    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return f"Ref({self.name})"


class Block:
    """A block: its dotted name, its label (or None), attributes and blocks."""

    def __init__(self, name, label, line):
        self.name, self.label, self.line = name, label, line
        self.attrs = {}
        self.blocks = []


class _Reader:
    def __init__(self, text):
        self.toks = tokens(text)
        self.at = 0

    def peek(self, ahead=0):
        return self.toks[self.at + ahead]

    def take(self, kind=None, value=None):
        tok = self.toks[self.at]
        if (kind and tok[0] != kind) or (value is not None and tok[1] != value):
            raise SyntaxError_(f"line {tok[2]}: expected {value or kind}, got {tok[1]!r}")
        self.at += 1
        return tok

    def dotted(self):
        parts = [self.take("ident")[1]]
        while self.peek()[1] == "." and self.peek()[0] == "punct":
            self.take("punct", ".")
            parts.append(self.take("ident")[1])
        return ".".join(parts)

    def body(self, into, closing):
        while self.peek()[1] != closing or self.peek()[0] not in ("punct", "end"):
            line = self.peek()[2]
            name = self.dotted()
            if self.peek()[1] == "=":
                self.take("punct", "=")
                if "." in name:
                    raise SyntaxError_(f"line {line}: attribute name {name!r} has a dot")
                if name in into.attrs:
                    raise SyntaxError_(f"line {line}: attribute {name} given twice")
                into.attrs[name] = self.value()
            else:
                label = self.take("string")[1] if self.peek()[0] == "string" else None
                self.take("punct", "{")
                block = Block(name, label, line)
                self.body(block, "}")
                self.take("punct", "}")
                into.blocks.append(block)

    def value(self):
        kind, value, line = self.peek()
        if kind in ("string", "number"):
            self.at += 1
            return value if kind == "string" else float(value)
        if kind == "ident" and value in ("true", "false", "null"):
            self.at += 1
            return {"true": True, "false": False, "null": None}[value]
        if kind == "ident":
            return Ref(self.dotted())
        if value == "[":
            self.take("punct", "[")
            items = []
            while self.peek()[1] != "]":
                items.append(self.value())
                if self.peek()[1] != "]":
                    self.take("punct", ",")
            self.take("punct", "]")
            return items
        if value == "{":
            self.take("punct", "{")
            obj = {}
            while self.peek()[1] != "}":
                key = self.take()[1] if self.peek()[0] in ("string", "ident") else None
                if key is None:
                    raise SyntaxError_(f"line {self.peek()[2]}: an object key expected")
                self.take("punct", "=")
                obj[key] = self.value()
                if self.peek()[1] != "}":
                    self.take("punct", ",")
            self.take("punct", "}")
            return obj
        raise SyntaxError_(f"line {line}: a value expected, got {value!r}")


def parse(text):
    """The top-level body of an Alloy configuration, as a Block named ""."""
    r = _Reader(text)
    top = Block("", None, 1)
    r.body(top, None)
    r.take("end")
    return top
