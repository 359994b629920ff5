#!/usr/bin/env python3
"""Writes docs/runs/README.md, the index of the run records: each file with what it is, its
date and the dated records of docs/history that discuss it.

Run: scripts/runs_index.py [--check]  (--check fails when a file is missing from the index or
the index names a file that is not there).
"""

import argparse
import pathlib
import re
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
RUNS = ROOT / "docs" / "runs"
HISTORY = ROOT / "docs" / "history"
KINDS = {
    ".jsonl": "eval records (one JSON line per question)",
    ".gz": "eval records (one JSON line per question), gzip-compressed",
    ".md": "eval summary",
    ".toml": "pipeline configuration",
    ".txt": "device script log",
    ".ids": "question ids",
    ".xz": "compressed candidate answers",
}
HEADER = """# Run records

Every file here is what a command wrote when a figure in [docs/RESULTS.md](../RESULTS.md) or
[docs/history](../history/) was measured, named by what it is: the dataset or task, the
configuration, the date (and, where two runs of one configuration share a date, what that day's
work was about). Eval records are kept gzip-compressed; `quorum eval --compare A.jsonl.gz
B.jsonl.gz` compares two as they are (`zcat` shows one); an eval
summary (`.md`) is what `quorum eval` printed beside its records. `scripts/runs_index.py`
writes this index.

| file | what | date | discussed in |
|---|---|---|---|
"""


def files():
    return sorted(p.name for p in RUNS.iterdir() if p.name != "README.md")


def stem(name):
    for ext in (".jsonl.xz", ".jsonl.gz", ".jsonl", ".md", ".toml", ".txt", ".ids"):
        if name.endswith(ext):
            return name[: -len(ext)]
    return name


def date_of(name):
    m = re.search(r"\d{4}-\d{2}-\d{2}", name)
    if m:
        return m.group(0)
    log = subprocess.run(
        ["git", "log", "--diff-filter=A", "--format=%ad", "--date=short", "--", f"docs/runs/{name}"],
        cwd=ROOT, capture_output=True, text=True).stdout.split()
    return log[-1] if log else ""


def index():
    histories = {p.name: p.read_text() for p in sorted(HISTORY.glob("*.md"))}
    rows = []
    for name in files():
        path = RUNS / name
        kind = "directory of bench output" if path.is_dir() else KINDS.get(path.suffix, "file")
        where = [h for h, text in histories.items() if stem(name) in text]
        links = ", ".join(f"[{h[:-3]}](../history/{h})" for h in where[:2])
        rows.append(f"| `{name}` | {kind} | {date_of(name)} | {links} |")
    return HEADER + "\n".join(rows) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    target = RUNS / "README.md"
    if args.check:
        listed = set(re.findall(r"^\| `([^`]+)`", target.read_text(), re.M))
        present = set(files())
        if listed != present:
            missing, stale = sorted(present - listed), sorted(listed - present)
            sys.exit(f"docs/runs/README.md is out of date (run scripts/runs_index.py): "
                     f"not listed {missing}, not present {stale}")
        print(f"run index ok: {len(present)} records listed")
        return
    target.write_text(index())


if __name__ == "__main__":
    main()
