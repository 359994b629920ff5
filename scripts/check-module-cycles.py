#!/usr/bin/env python3
"""Fails when modules of a workspace crate import each other in a circle, at any depth.

For every crate under the workspace, each source file is mapped to its module path
(`src/pipeline/run.rs` -> `pipeline::run`), and every path in it (`use` trees and inline
`crate::`, `super::`, `self::` paths, and child modules named bare) is resolved to the module it
points into. An import between two modules is an edge between the two siblings under their
closest common parent that contain them: `pipeline::run` importing `pipeline::config` is
`run -> config` under `pipeline`; `pipeline::run` importing `vote` is `pipeline -> vote` under
the crate root. Each parent's sibling graph must be acyclic. Test code (`#[cfg(test)]` modules
and files under a `tests` module directory) is left out: tests may reach anywhere. A cycle is
printed with the files that close it.

`cargo modules dependencies --acyclic` does this from rust-analyzer's view of the crate, but it
builds rust-analyzer first (many minutes on CI's two cores); crate paths are plain enough to
read with a regular expression.
"""

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
CRATES = ["proto", "kernels", "weights", "models", "engine", "sql", "eval", "postgres",
          "training", "server"]
CRATE_PATH = re.compile(r"\bcrate::(?:\{\s*)?([a-z_][a-z0-9_]*)")
# `use crate::{a::x, b::y}` names several modules in one declaration.
CRATE_GROUP = re.compile(r"\bcrate::\{([^}]*(?:\{[^}]*\}[^}]*)*)\}", re.S)
CFG_TEST = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\([a-z]+\))?\s+)?mod\s+\w+\s*\{")


def strip_test_modules(text):
    """Removes `#[cfg(test)] mod x { ... }` blocks (brace matching, strings ignored)."""
    out = []
    pos = 0
    for m in CFG_TEST.finditer(text):
        if m.start() < pos:
            continue
        out.append(text[pos:m.start()])
        depth = 1
        i = m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        pos = i
    out.append(text[pos:])
    return "".join(out)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def module_path(src, path):
    """`src/pipeline/run.rs` -> ("pipeline", "run"); `src/pipeline/mod.rs` -> ("pipeline",);
    None for the crate root and for test files (under a `tests` module directory)."""
    parts = path.relative_to(src).with_suffix("").parts
    if parts in (("lib",), ("main",)):
        return ()
    if "tests" in parts[1:] or parts[-1] == "tests":
        return None
    if parts[-1] == "mod":
        parts = parts[:-1]
    return tuple(parts)


def is_module(src, parts):
    if not parts:
        return True
    base = src.joinpath(*parts)
    return base.with_suffix(".rs").exists() or (base / "mod.rs").exists()


def longest_module(src, parts):
    """The longest prefix of `parts` that is a module of the crate."""
    found = ()
    for i in range(1, len(parts) + 1):
        if not is_module(src, parts[:i]):
            break
        found = parts[:i]
    return found


def expand_use(tree):
    """`a::{b, c::{d, e}}` -> ["a::b", "a::c::d", "a::c::e"]."""
    tree = tree.strip()
    brace = tree.find("{")
    if brace < 0:
        return [tree]
    head, inner = tree[:brace], tree[brace + 1:tree.rfind("}")]
    items, depth, start = [], 0, 0
    for i, ch in enumerate(inner):
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            items.append(inner[start:i])
            start = i + 1
    items.append(inner[start:])
    return [p for item in items if item.strip() for p in expand_use(head + item.strip())]


USE = re.compile(r"\buse\s+([^;]+);", re.S)
INLINE = re.compile(r"\b(?:crate|super|self)(?:::[a-z_][a-z0-9_]*)+")


def resolve(src, here, is_mod_file, path):
    """The module a path in module `here` points into, as a tuple of parts, or None."""
    parts = [p.strip() for p in re.sub(r"\s+as\s+\w+$", "", path).split("::")]
    parts = [p for p in parts if p]
    if not parts:
        return None
    # A non-mod file `a/b.rs` is module (a, b): its `super` is (a,). A mod.rs is the same.
    base = list(here)
    if parts[0] == "crate":
        base, parts = [], parts[1:]
    elif parts[0] in ("super", "self"):
        while parts and parts[0] in ("super", "self"):
            if parts[0] == "super":
                if not base:
                    return None
                base.pop()
            parts = parts[1:]
    elif is_module(src, tuple(here) + (parts[0],)):
        pass  # a child module named without `self::`
    else:
        return None
    return longest_module(src, tuple(base) + tuple(parts))


def edges_of(crate):
    """Edges between sibling modules, keyed by their parent: an import from anywhere inside
    sibling `a` into anywhere inside sibling `b` is the edge a -> b under their parent."""
    src = ROOT / crate / "src"
    edges = {}
    for path in sorted(src.rglob("*.rs")):
        here = module_path(src, path)
        if here is None:
            continue
        text = strip_comments(strip_test_modules(path.read_text()))
        paths = [p for m in USE.finditer(text) for p in expand_use(m.group(1))]
        paths += INLINE.findall(text)
        for target in {resolve(src, here, path.name == "mod.rs", p) for p in paths} - {None}:
            common = 0
            while common < min(len(here), len(target)) and here[common] == target[common]:
                common += 1
            if common == len(here) or common == len(target):
                continue  # into its own ancestor or descendant: not between siblings
            parent = "::".join(here[:common]) or "crate"
            edges.setdefault(parent, {}).setdefault(here[common], {}).setdefault(
                target[common], []).append(str(path.relative_to(ROOT)))
    return edges


def circles(edges):
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for child in sorted(edges.get(node, {})):
            if child not in index:
                visit(child)
                low[node] = min(low[node], low[child])
            elif child in on_stack:
                low[node] = min(low[node], index[child])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def main():
    failed = False
    parents = 0
    for crate in CRATES:
        for parent, edges in sorted(edges_of(crate).items()):
            parents += 1
            for component in circles(edges):
                failed = True
                print(f"{crate}: these modules of {parent} import each other in a circle: "
                      f"{', '.join(component)}")
                for a in component:
                    for b in sorted(edges.get(a, {})):
                        if b in component:
                            print(f"  {a} -> {b}: {', '.join(sorted(set(edges[a][b])))}")
    if failed:
        sys.exit(1)
    print(f"module graph ok: no import cycle among the sibling modules of {parents} parents "
          f"in {len(CRATES)} crates")


if __name__ == "__main__":
    main()
