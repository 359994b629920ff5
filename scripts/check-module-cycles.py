#!/usr/bin/env python3
"""Fails when the top-level modules of a workspace crate import each other in a circle.

For every crate under the workspace, each source file is mapped to its top-level module
(`src/pipeline/run.rs` -> `pipeline`), and every `crate::<module>` path in it (in `use`
declarations or inline) is an edge from the file's module to that module. Test code
(`#[cfg(test)]` modules and files under a `tests/` module directory) is left out: tests may
reach anywhere. A cycle in the resulting graph is printed with the lines that close it.

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


def top_module(src, path):
    rel = path.relative_to(src).with_suffix("")
    parts = rel.parts
    if parts[0] in ("lib", "main"):
        return None
    if len(parts) > 1 and "tests" in parts[1:]:
        return None
    return parts[0]


def super_targets(src, path, text):
    """Top-level modules named through enough `super::` to reach the crate root."""
    rel = path.relative_to(src).with_suffix("")
    depth = len(rel.parts) - (1 if rel.name == "mod" else 0)
    found = set()
    for m in re.finditer(r"\b((?:super::)+)([a-z_][a-z0-9_]*)", text):
        if m.group(1).count("super::") >= depth:
            found.add(m.group(2))
    return found


def edges_of(crate):
    src = ROOT / crate / "src"
    edges = {}
    for path in sorted(src.rglob("*.rs")):
        module = top_module(src, path)
        if module is None:
            continue
        text = strip_comments(strip_test_modules(path.read_text()))
        targets = set()
        for group in CRATE_GROUP.finditer(text):
            for item in re.split(r",(?![^{]*\})", group.group(1)):
                name = item.strip().split("::")[0].strip()
                if re.fullmatch(r"[a-z_][a-z0-9_]*", name):
                    targets.add(name)
        targets.update(CRATE_PATH.findall(text))
        targets.update(super_targets(src, path, text))
        for target in targets:
            is_module = (src / f"{target}.rs").exists() or (src / target / "mod.rs").exists()
            if target != module and is_module:
                edges.setdefault(module, {}).setdefault(target, []).append(
                    str(path.relative_to(ROOT)))
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
    for crate in CRATES:
        edges = edges_of(crate)
        for component in circles(edges):
            failed = True
            print(f"{crate}: these modules import each other in a circle: {', '.join(component)}")
            for a in component:
                for b in sorted(edges.get(a, {})):
                    if b in component:
                        print(f"  {a} -> {b}: {', '.join(sorted(set(edges[a][b])))}")
    if failed:
        sys.exit(1)
    print(f"module graph ok: no import cycle among the top-level modules of {len(CRATES)} crates")


if __name__ == "__main__":
    main()
