#!/usr/bin/env python3
"""Builds company-sized schemas out of Spider's: for each database of a slice, one SQLite file
under the same id that holds the database's own tables, unchanged, and whole databases of
Spider's training set beside them until it has at least --tables tables.

The asked database's tables keep their names, rows and keys, so its questions and their gold
queries run unchanged against the merged file: `quorum eval --database-dir OUT` asks the slice
against the large schemas. An added table whose name another table already has is renamed
`<its database>__<name>` (SQLite's ALTER TABLE RENAME rewrites the foreign keys that point at
it). Which databases are added is fixed by the asked database's id, so every run builds the
same files.

    scripts/merge-spider-schemas.py --slice dev300 --out /tmp/spider-merged
    quorum eval --slice dev300 --database-dir /tmp/spider-merged --out merged.jsonl
"""

import argparse
import hashlib
import json
import shutil
import sqlite3
import sys
import tempfile
from pathlib import Path


def user_tables(conn, schema="main"):
    rows = conn.execute(
        f"SELECT name, sql FROM {schema}.sqlite_master "
        "WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY rowid"
    ).fetchall()
    return [(name, sql) for name, sql in rows if sql]


def quote(name):
    return '"' + name.replace('"', '""') + '"'


def add_database(merged, source, db_id, taken, scratch):
    """Copies every table of `source` into `merged`, renaming those whose names are taken."""
    copy = Path(scratch) / f"{db_id}.sqlite"
    shutil.copyfile(source, copy)
    conn = sqlite3.connect(copy)
    conn.execute("PRAGMA legacy_alter_table = OFF")
    for name, _ in user_tables(conn):
        if name.lower() in taken:
            conn.execute(f"ALTER TABLE {quote(name)} RENAME TO {quote(db_id + '__' + name)}")
    conn.commit()
    tables = user_tables(conn)
    conn.close()
    merged.execute("ATTACH DATABASE ? AS pad", (str(copy),))
    for name, sql in tables:
        merged.execute(sql)
        merged.execute(f"INSERT INTO main.{quote(name)} SELECT * FROM pad.{quote(name)}")
        taken.add(name.lower())
    merged.commit()
    merged.execute("DETACH DATABASE pad")
    copy.unlink()
    return len(tables)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spider", default=str(Path(__file__).resolve().parents[2] / "shared/data/spider"))
    parser.add_argument("--slice", default="dev300")
    parser.add_argument("--questions", default="dev.json")
    parser.add_argument("--tables", type=int, default=50, help="at least this many tables each")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    spider = Path(args.spider)
    questions = json.loads((spider / args.questions).read_text())
    slices = json.loads((spider / "slices.json").read_text())
    asked = sorted({questions[i]["db_id"] for i in slices[args.slice]})
    train_ids = sorted({q["db_id"] for q in json.loads((spider / "train.json").read_text())})
    # Spider's distribution lacks the files of a few training databases.
    padding = [
        d
        for d in train_ids
        if d not in asked and (spider / "database" / d / f"{d}.sqlite").is_file()
    ]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary = {}
    with tempfile.TemporaryDirectory() as scratch:
        for db_id in asked:
            source = spider / "database" / db_id / f"{db_id}.sqlite"
            target = out / db_id / f"{db_id}.sqlite"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.unlink(missing_ok=True)
            shutil.copyfile(source, target)
            merged = sqlite3.connect(target)
            taken = {name.lower() for name, _ in user_tables(merged)}
            own = len(taken)
            start = int(hashlib.sha256(db_id.encode()).hexdigest(), 16) % len(padding)
            added = []
            for k in range(len(padding)):
                if len(taken) >= args.tables:
                    break
                pad_id = padding[(start + k) % len(padding)]
                pad = spider / "database" / pad_id / f"{pad_id}.sqlite"
                add_database(merged, pad, pad_id, taken, scratch)
                added.append(pad_id)
            merged.execute("VACUUM")
            merged.close()
            summary[db_id] = {"own_tables": own, "tables": len(taken), "added": added}
            print(f"{db_id}: {own} + {len(taken) - own} tables from {', '.join(added)}", file=sys.stderr)
    (out / "merged.json").write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
