"""Regenerates quorum_client/_proto from the repository's proto/ files with grpcio-tools.

The generated modules import each other as `quorum.v1.x_pb2`; they are rewritten to import
from inside this package, so that installing the client adds no top-level `quorum` package.
Run: python generate.py [--check]  (--check fails when the committed stubs are out of date).
"""

import argparse
import filecmp
import pathlib
import re
import shutil
import sys
import tempfile

from grpc_tools import protoc

HERE = pathlib.Path(__file__).resolve().parent
PROTO_ROOT = HERE.parent.parent / "proto"
TARGET = HERE / "quorum_client" / "_proto"
PACKAGE = "quorum_client._proto"


def generate(out: pathlib.Path) -> None:
    protos = sorted(str(p.relative_to(PROTO_ROOT)) for p in (PROTO_ROOT / "quorum" / "v1").glob("*.proto"))
    include = pathlib.Path(protoc.__file__).parent / "_proto"
    args = ["protoc", f"-I{PROTO_ROOT}", f"-I{include}", f"--python_out={out}", f"--pyi_out={out}",
            f"--grpc_python_out={out}", *protos]
    if protoc.main(args) != 0:
        sys.exit("protoc failed")
    for path in out.rglob("*.py*"):
        text = path.read_text()
        text = re.sub(r"^from quorum\.v1 import", f"from {PACKAGE}.quorum.v1 import", text, flags=re.M)
        path.write_text(text)
    for package in [out, out / "quorum", out / "quorum" / "v1"]:
        (package / "__init__.py").write_text("")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "_proto"
        out.mkdir()
        generate(out)
        if args.check:
            cmp = filecmp.dircmp(out, TARGET)
            stale = []

            def walk(c: filecmp.dircmp, prefix: str) -> None:
                stale.extend(prefix + n for n in c.diff_files + c.left_only + c.right_only if n != "__pycache__")
                for name, sub in c.subdirs.items():
                    if name != "__pycache__":
                        walk(sub, prefix + name + "/")

            walk(cmp, "")
            if stale:
                sys.exit(f"the committed stubs are out of date ({', '.join(stale)}): run python generate.py")
            print("stubs up to date")
            return
        shutil.rmtree(TARGET, ignore_errors=True)
        shutil.copytree(out, TARGET)
        print(f"wrote {TARGET}")


if __name__ == "__main__":
    main()
