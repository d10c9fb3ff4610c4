#!/usr/bin/env python3
"""No import cycle between the files of a crate, no source file over 700 lines before its tests.

Run by `make lint`; exits 1 listing every cycle and every oversized file, 0 when there is none.

The graph, per crate (each crate root - src/lib.rs, src/main.rs, src/bin/*.rs - is a tree of
its own): one node per source file reached from the root through `mod NAME;` declarations
(honouring `#[path = ...]`). An edge a -> b when the code of a, outside anything marked
`#[cfg(test)]` (a test module inline or in its own file, a test-only `use` or function),
names a module that lives in b:
  - `crate::x::y...`, `super::...`, `self::...` paths, in `use` trees and in code;
  - paths that start with a child module's name (`child::Item`, `use child::Item`);
  - the name of an item is followed through `pub use` re-exports to the file that defines it
    (`crate::Thing` re-exported by lib.rs from `a.rs` is an edge to a.rs, not to lib.rs).
What is not an edge, and why:
  - a `mod child;` declaration: it says where code lives, not what code uses; a child that
    uses its parent through `super::` is an edge child -> parent, and a parent that calls
    its child's items is an edge parent -> child, so a real loop between them is still seen;
  - a `pub use` re-export whose name the file's own code does not use: the file is only a
    signpost, the users are pointed (as above) at the defining file;
  - test code: tests may reach anywhere;
  - anything to or from a crate root (lib.rs, main.rs, bin/*.rs): the root is where the
    crate is put together - it declares every module, wires them (starts the tasks, holds
    the struct they share) and is the crate's public face - so every file may name it and
    it may name every file. What the root re-exports is still followed to its source.
A cycle is a strongly connected component of two files or more; each is listed with one
loop through it and the line that makes each edge.

The size rule counts the lines before a file's first line `#[cfg(test)]` (the same count as
awk '/^#\\[cfg\\(test\\)\\]/{exit} {n++} END{print n+0}'); a file that is itself a test
module (`#[cfg(test)] mod tests;`, `#[path = "x_tests.rs"]`) is all tests and not counted.

Standard library only; reads each file once (well under a second for the workspace).
"""

import os
import re
import sys

LINES_BEFORE_TESTS_MAX = 700

ITEM_KEYWORDS = {"struct", "enum", "union", "trait", "type", "fn", "const", "static"}

TOKEN = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<line_comment>//[^\n]*)
  | (?P<block_comment>/\*)
  | (?P<raw_string>b?r\#*")
  | (?P<string>b?")
  | (?P<char>b?'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]+\}|.)|[^\\'\n])')
  | (?P<lifetime>'[A-Za-z_][A-Za-z0-9_]*)
  | (?P<ident>r\#[A-Za-z_][A-Za-z0-9_]*|[A-Za-z_][A-Za-z0-9_]*)
  | (?P<path_sep>::)
  | (?P<number>[0-9][A-Za-z0-9_.]*)
  | (?P<punct>.)
    """,
    re.VERBOSE | re.DOTALL,
)


def tokenize(text):
    """(kind, value, line) for identifiers, `::` and punctuation; comments and literals dropped."""
    tokens = []
    pos = 0
    line = 1
    n = len(text)
    while pos < n:
        m = TOKEN.match(text, pos)
        kind = m.lastgroup
        start = pos
        pos = m.end()
        if kind == "block_comment":
            depth = 1
            while depth and pos < n:
                if text.startswith("/*", pos):
                    depth += 1
                    pos += 2
                elif text.startswith("*/", pos):
                    depth -= 1
                    pos += 2
                else:
                    pos += 1
        elif kind == "raw_string":
            hashes = m.group(kind).count("#")
            end = text.find('"' + "#" * hashes, pos)
            pos = n if end < 0 else end + 1 + hashes
        elif kind == "string":
            while pos < n and text[pos] != '"':
                pos += 2 if text[pos] == "\\" else 1
            pos += 1
        elif kind in ("ident", "path_sep", "punct"):
            tokens.append((kind, m.group(kind), line))
        line += text.count("\n", start, pos)
    return tokens


def skip_item(tokens, i):
    """Index just past the item starting at tokens[i] (after its attributes)."""
    depth = 0
    while i < len(tokens):
        v = tokens[i][1]
        if v in "([":
            depth += 1
        elif v in ")]":
            depth -= 1
        elif v == ";" and depth == 0:
            return i + 1
        elif v == "{" and depth == 0:
            return skip_block(tokens, i)
        i += 1
    return i


def skip_block(tokens, i):
    """Index just past the `}` matching the `{` at tokens[i]."""
    depth = 0
    while i < len(tokens):
        v = tokens[i][1]
        if v == "{":
            depth += 1
        elif v == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return i


def read_attribute(tokens, i):
    """(end index, tokens inside) of the attribute `#[...]` starting at tokens[i]."""
    j = i + 2
    depth = 1
    while j < len(tokens) and depth:
        v = tokens[j][1]
        if v == "[":
            depth += 1
        elif v == "]":
            depth -= 1
        j += 1
    return j, tokens[i + 2 : j - 1]


def is_test_only(attribute):
    values = [t[1] for t in attribute]
    return values[:1] == ["cfg"] and "test" in values and "not" not in values


class FileScan:
    """What one file declares and names, outside its test code."""

    def __init__(self, path, module):
        self.path = path
        self.module = module  # tuple of names from the crate root
        self.children = []  # (module tuple, file path or None when inline, test-only)
        self.paths = []  # (module tuple the path is written in, segments, line, in_pub_use)
        self.reexports = {}  # (module tuple, name) -> (module tuple, segments)
        self.globs = []  # (module tuple, segments) of `pub use path::*`
        self.defines = set()  # (module tuple, name) of the items declared here
        self.idents = {}  # identifier -> occurrences in non-test code


def parse_use_tree(tokens, i, prefix, out):
    """Parse a use tree at tokens[i]; append full segment lists to out. Returns the end index."""
    segs = list(prefix)
    while i < len(tokens):
        kind, v, _ = tokens[i]
        if v == "{":
            i += 1
            while i < len(tokens) and tokens[i][1] != "}":
                i = parse_use_tree(tokens, i, segs, out)
                if i < len(tokens) and tokens[i][1] == ",":
                    i += 1
            return i + 1
        if v == "*":
            out.append((segs + ["*"], None))
            return i + 1
        if kind == "ident":
            segs.append(v)
            i += 1
            if i < len(tokens) and tokens[i][1] == "::":
                i += 1
                continue
            alias = None
            if i + 1 < len(tokens) and tokens[i][1] == "as":
                alias = tokens[i + 1][1]
                i += 2
            out.append((segs, alias))
            return i
        return i + 1
    return i


def scan(path, module, text):
    tokens = tokenize(text)
    scan_ = FileScan(path, module)
    stack = [(module, 0)]  # inline modules: (module tuple, brace depth inside it)
    depth = 0
    i = 0
    pending_path = None
    pending_test = False
    while i < len(tokens):
        kind, v, line = tokens[i]
        current = stack[-1][0]
        if v == "#" and i + 1 < len(tokens) and tokens[i + 1][1] in ("[", "!"):
            if tokens[i + 1][1] == "!":
                i, _ = read_attribute(tokens, i + 1)
                continue
            i, attribute = read_attribute(tokens, i)
            if is_test_only(attribute):
                pending_test = True
            if attribute and attribute[0][1] == "path":
                m = re.search(r'#\[\s*path\s*=\s*"([^"]+)"', text.splitlines()[line - 1])
                pending_path = m.group(1) if m else None
            continue
        if pending_test:
            # Find the item's own tokens: a test-only `mod x;` names a test file.
            j = i
            while j < len(tokens) and tokens[j][1] in ("pub", "(", ")", "crate", "super", "in"):
                j += 1
            if j + 2 < len(tokens) and tokens[j][1] == "mod" and tokens[j + 2][1] == ";":
                scan_.children.append((current + (tokens[j + 1][1],), pending_path, True))
            i = skip_item(tokens, i)
            pending_test = False
            pending_path = None
            continue
        if v == "mod" and i + 2 < len(tokens) and tokens[i + 1][0] == "ident":
            name = tokens[i + 1][1]
            if tokens[i + 2][1] == ";":
                scan_.children.append((current + (name,), pending_path, False))
                pending_path = None
                i += 3
                continue
            if tokens[i + 2][1] == "{":
                scan_.children.append((current + (name,), None, False))
                depth += 1
                stack.append((current + (name,), depth))
                i += 3
                continue
        if v == "{":
            depth += 1
        elif v == "}":
            if stack[-1][1] == depth and len(stack) > 1:
                stack.pop()
            depth -= 1
        if v == "use":
            is_pub = i > 0 and (
                tokens[i - 1][1] == "pub" or (tokens[i - 1][1] == ")" and "pub" in
                                              [t[1] for t in tokens[max(0, i - 6) : i]])
            )
            trees = []
            j = i + 1
            if j < len(tokens) and tokens[j][1] == "::":
                j += 1
            j = parse_use_tree(tokens, j, [], trees)
            for segs, alias in trees:
                scan_.paths.append((current, segs, line, is_pub, alias))
            i = j
            continue
        if v in ITEM_KEYWORDS and i + 1 < len(tokens) and tokens[i + 1][0] == "ident":
            scan_.defines.add((current, tokens[i + 1][1]))
        if kind == "ident":
            scan_.idents[v] = scan_.idents.get(v, 0) + 1
            prev = tokens[i - 1][1] if i else ""
            if prev != "::" and i + 1 < len(tokens) and tokens[i + 1][1] == "::":
                segs = [v]
                j = i + 1
                while (
                    j + 1 < len(tokens) and tokens[j][1] == "::" and tokens[j + 1][0] == "ident"
                ):
                    segs.append(tokens[j + 1][1])
                    j += 2
                if j + 1 < len(tokens) and tokens[j][1] == "::" and tokens[j + 1][1] == "{":
                    trees = []
                    j = parse_use_tree(tokens, j + 1, segs, trees)
                    for s, alias in trees:
                        scan_.paths.append((current, s, line, False, alias))
                else:
                    scan_.paths.append((current, segs, line, False, None))
                for s in segs[1:]:
                    scan_.idents[s] = scan_.idents.get(s, 0) + 1
                i = j
                continue
        i += 1
    return scan_


class Crate:
    def __init__(self, name):
        self.name = name
        self.modules = {}  # (root, module tuple) -> file path
        self.scans = {}  # file path -> FileScan
        self.root_of = {}  # file path -> root
        self.test_files = set()
        self.roots = set()  # lib.rs, main.rs, bin/*.rs: where the crate is assembled

    def load_tree(self, root, root_file):
        self.roots.add(root_file)
        todo = [(root_file, ())]
        while todo:
            path, module = todo.pop()
            if path in self.scans or not os.path.exists(path):
                continue
            with open(path, encoding="utf-8") as f:
                s = scan(path, module, f.read())
            self.scans[path] = s
            self.root_of[path] = root
            self.modules[(root, module)] = path
            base = os.path.dirname(path)
            stem = os.path.splitext(os.path.basename(path))[0]
            own_dir = base if stem in ("lib", "main", "mod") or module == () else \
                os.path.join(base, stem)
            for child, explicit, test_only in s.children:
                if explicit is None and len(child) > len(module) + 1:
                    # inline module (or a file module below one): lives in this file
                    pass
                if explicit is not None:
                    child_file = os.path.join(base, explicit)
                else:
                    inline_parent = child[len(module) : -1]
                    d = os.path.join(own_dir, *inline_parent)
                    child_file = os.path.join(d, child[-1] + ".rs")
                    if not os.path.exists(child_file):
                        child_file = os.path.join(d, child[-1], "mod.rs")
                if test_only:
                    self.test_files.add(os.path.normpath(child_file))
                    continue
                if explicit is None and not os.path.exists(child_file):
                    self.modules[(root, child)] = path  # an inline `mod x { }`
                    continue
                todo.append((os.path.normpath(child_file), child))

    def resolve(self, root, module, segs, seen=0):
        """(file, line-independent) that the path segs written in module names, or None."""
        if not segs:
            return None
        first = segs[0]
        if first == "crate":
            m, rest = (), segs[1:]
        elif first in ("super", "self"):
            m = module
            rest = segs
            while rest and rest[0] in ("super", "self"):
                if rest[0] == "super":
                    m = m[:-1]
                rest = rest[1:]
        elif (root, module + (first,)) in self.modules:
            m, rest = module + (first,), segs[1:]
        else:
            return None
        while rest and (root, m + (rest[0],)) in self.modules:
            m, rest = m + (rest[0],), rest[1:]
        target = self.modules.get((root, m))
        if target is None:
            return None
        if rest and rest[0] != "*" and seen < 8:
            scan_ = self.scans[target]
            if (m, rest[0]) in scan_.defines:
                return target
            follow = scan_.reexports.get((m, rest[0]))
            if follow is not None:
                where, path = follow
                deeper = self.resolve(root, where, path + rest[1:], seen + 1)
                if deeper is not None:
                    return deeper
            for where, path in scan_.globs:
                if where != m or not self.knows(root, where, path[:-1] + rest[:1], seen + 1):
                    continue
                deeper = self.resolve(root, where, path[:-1] + rest, seen + 1)
                if deeper is not None and deeper != target:
                    return deeper
        return target

    def knows(self, root, module, segs, seen):
        """Whether the item segs (written in module) is declared or re-exported where it leads."""
        if seen > 8:
            return False
        first = segs[0]
        if first == "crate":
            m, rest = (), segs[1:]
        elif first in ("super", "self"):
            m, rest = module, segs
            while rest and rest[0] in ("super", "self"):
                m, rest = (m[:-1] if rest[0] == "super" else m), rest[1:]
        else:
            m, rest = module + (first,), segs[1:]
        while rest and (root, m + (rest[0],)) in self.modules:
            m, rest = m + (rest[0],), rest[1:]
        target = self.modules.get((root, m))
        if target is None or len(rest) != 1:
            return False
        scan_ = self.scans[target]
        if (m, rest[0]) in scan_.defines or (m, rest[0]) in scan_.reexports:
            return True
        return any(w == m and self.knows(root, w, p[:-1] + rest, seen + 1) for w, p in scan_.globs)

    def graph(self):
        for path, s in self.scans.items():
            for module, segs, _, is_pub, alias in s.paths:
                if is_pub and segs and segs[-1] != "*":
                    s.reexports[(module, alias or segs[-1])] = (module, segs)
                elif is_pub and segs:
                    s.globs.append((module, segs))
        edges = {}
        for path, s in self.scans.items():
            root = self.root_of[path]
            for module, segs, line, is_pub, alias in s.paths:
                if is_pub:
                    name = alias or segs[-1]
                    if name == "*" or s.idents.get(name, 0) == 0:
                        continue  # a signpost only: its users are pointed at the source
                target = self.resolve(root, module, segs)
                if target is None or target == path or target in self.roots:
                    continue
                if path in self.roots:
                    continue
                edges.setdefault(path, {}).setdefault(target, (line, "::".join(segs)))
        return edges


def strongly_connected(nodes, edges):
    index = {}
    low = {}
    on_stack = set()
    stack = []
    out = []
    counter = [0]

    def visit(v):
        work = [(v, iter(sorted(edges.get(v, {}))))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        while work:
            node, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges.get(w, {})))))
                    advanced = True
                    break
                if w in on_stack:
                    low[node] = min(low[node], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.append(w)
                    if w == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def one_loop(component, edges):
    """A shortest loop through the component's first file, as a list of files."""
    members = set(component)
    start = component[0]
    previous = {start: None}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in sorted(edges.get(v, {})):
                if w not in members:
                    continue
                if w == start:
                    loop = [v]
                    while previous[loop[-1]] is not None:
                        loop.append(previous[loop[-1]])
                    return list(reversed(loop)) + [start]
                if w not in previous:
                    previous[w] = v
                    nxt.append(w)
        frontier = nxt
    return component


def lines_before_tests(path):
    n = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("#[cfg(test)]"):
                break
            n += 1
    return n


def main():
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    crates_dir = os.path.join(top, "crates")
    problems = 0
    for name in sorted(os.listdir(crates_dir)):
        src = os.path.join(crates_dir, name, "src")
        if not os.path.isdir(src):
            continue
        crate = Crate(name)
        roots = [("lib", "lib.rs"), ("main", "main.rs")]
        bin_dir = os.path.join(src, "bin")
        if os.path.isdir(bin_dir):
            roots += [("bin:" + b, os.path.join("bin", b)) for b in sorted(os.listdir(bin_dir))
                      if b.endswith(".rs")]
        for root, rel in roots:
            crate.load_tree(root, os.path.normpath(os.path.join(src, rel)))
        edges = crate.graph()
        rel = lambda p: os.path.relpath(p, top)
        for component in strongly_connected(crate.scans.keys(), edges):
            problems += 1
            loop = one_loop(component, edges)
            print(f"cycle in {name}: " + ", ".join(rel(p) for p in component))
            for a, b in zip(loop, loop[1:]):
                line, what = edges[a][b]
                print(f"    {rel(a)}:{line} names {what} ({rel(b)})")
        for path in sorted(crate.scans):
            if path in crate.test_files:
                continue
            n = lines_before_tests(path)
            if n > LINES_BEFORE_TESTS_MAX:
                problems += 1
                print(f"too long: {rel(path)} has {n} lines before its tests "
                      f"(at most {LINES_BEFORE_TESTS_MAX})")
    if problems:
        print(f"module-cycles: {problems} problem(s); move the shared items into a leaf module "
              "or split the file by concern")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
