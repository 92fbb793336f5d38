"""Generate the Python stubs of `wire/protos/*.proto` into `wire/gen/` (wire.md §1).

Run `python -m wire.generate` after changing a `.proto` file and commit the result;
`tests/wire/test_generated_stubs.py` regenerates into a temporary directory and fails
when the committed stubs no longer match the protos.

For every proto it writes `<name>_pb2.py` (messages) and `<name>_pb2.pyi` (their
types), and `<name>_pb2_grpc.py` (client stub, servicer base, server registration)
for the protos that declare a service.

protoc names a generated module after its proto file and imports it as a top-level
module (`import resourceplugin_pb2 as ...`). The stubs live in the package `wire.gen`,
so the generator rewrites those imports, and the module name protoc gives the message
classes, to `wire.gen.<name>_pb2`. A proto's own package and file name, which form the
gRPC method paths and the descriptor-pool entries, are not touched.

`grpc_tools` (grpcio-tools) is a development dependency (the `test` extra): the daemon
imports the committed stubs and never this module.
"""

from __future__ import annotations

import argparse
import importlib.resources
import re
import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc

PROTO_DIR = Path(__file__).resolve().parent / "protos"
GEN_DIR = Path(__file__).resolve().parent / "gen"
GEN_PACKAGE = "wire.gen"

GEN_INIT = '''"""Generated protobuf and gRPC stubs of wire/protos (python -m wire.generate).

Do not edit: change the .proto and regenerate. Only the wire package imports these.
"""
'''

# A service-bearing proto starts a line with `service Name {`; comments start with //.
_SERVICE_LINE = re.compile(r"^\s*service\s+\w+\s*\{", re.MULTILINE)
# `import resourceplugin_pb2 as resourceplugin__pb2` in .py, `... as _resourceplugin_pb2` in .pyi.
_TOP_LEVEL_IMPORT = re.compile(r"^import (\w+_pb2) as (\w+)$", re.MULTILINE)
# The module name protoc hands the builder for the classes' __module__.
_BUILDER_MODULE = re.compile(r"(BuildTopDescriptorsAndMessages\(DESCRIPTOR, )'(\w+_pb2)'")


class GenerationError(Exception):
    """protoc failed, or its output is not in the shape the import fix-up expects."""


def proto_files(proto_dir: Path = PROTO_DIR) -> list[Path]:
    """Every `.proto` file of the protocol directory, sorted by name.

    Args:
        proto_dir: directory holding the `.proto` files (flat, no subdirectories).

    Returns:
        The proto paths.

    Raises:
        GenerationError: the directory holds no `.proto` file.
    """
    protos = sorted(proto_dir.glob("*.proto"))
    if not protos:
        raise GenerationError(f"no .proto files in {proto_dir}")
    return protos


def declares_service(proto: Path) -> bool:
    """Whether a proto file declares a gRPC service (and so gets a `_pb2_grpc.py`)."""
    return _SERVICE_LINE.search(proto.read_text(encoding="utf-8")) is not None


def fix_imports(text: str, modules: set[str], file_name: str) -> str:
    """Point protoc's top-level imports of our own modules at the `wire.gen` package.

    Args:
        text: one generated `.py` or `.pyi` file.
        modules: module names generated in this run (`resourceplugin_pb2`, ...).
        file_name: the file's name, for the error message.

    Returns:
        The text with `import x_pb2 as y` turned into `from wire.gen import x_pb2 as y`
        and the builder's module name `'x_pb2'` into `'wire.gen.x_pb2'`.

    Raises:
        GenerationError: a top-level `_pb2` import names a module not generated here.
    """

    def rewrite_import(match: re.Match[str]) -> str:
        module, alias = match.group(1), match.group(2)
        if module not in modules:
            raise GenerationError(
                f"{file_name}: imports {module}, which is not generated from wire/protos"
            )
        return f"from {GEN_PACKAGE} import {module} as {alias}"

    def rewrite_module_name(match: re.Match[str]) -> str:
        call, module = match.group(1), match.group(2)
        return f"{call}'{GEN_PACKAGE}.{module}'" if module in modules else match.group(0)

    text = _TOP_LEVEL_IMPORT.sub(rewrite_import, text)
    return _BUILDER_MODULE.sub(rewrite_module_name, text)


def _run_protoc(args: list[str]) -> None:
    # protoc.main takes argv with the program name first; it prints its own errors.
    well_known = str(importlib.resources.files("grpc_tools") / "_proto")
    code = protoc.main(["grpc_tools.protoc", f"-I{well_known}", *args])
    if code != 0:
        raise GenerationError(f"protoc exited with status {code} (its messages are above)")


def generate(out_dir: Path = GEN_DIR, proto_dir: Path = PROTO_DIR) -> list[Path]:
    """Generate, fix up and write the stubs of every proto into out_dir.

    protoc runs into a scratch directory first, so a failure leaves out_dir as it was.
    Stub files in out_dir that no proto produces any more are removed.

    Args:
        out_dir: the package directory to write (`wire/gen` by default).
        proto_dir: the directory of `.proto` files.

    Returns:
        The paths written, sorted, `__init__.py` included.

    Raises:
        GenerationError: protoc failed or its output did not look as expected.
    """
    proto_dir = proto_dir.resolve()
    protos = proto_files(proto_dir)
    # Absolute paths under the one -I directory: protoc names each file by its path
    # relative to it ("resourceplugin.proto"), whatever the current directory holds.
    names = [str(p) for p in protos]
    with_services = [str(p) for p in protos if declares_service(p)]
    modules = {p.stem + "_pb2" for p in protos}

    with tempfile.TemporaryDirectory(prefix="wire-gen-") as scratch_name:
        scratch = Path(scratch_name)
        _run_protoc([f"-I{proto_dir}", f"--python_out={scratch}", f"--pyi_out={scratch}", *names])
        if with_services:
            _run_protoc([f"-I{proto_dir}", f"--grpc_python_out={scratch}", *with_services])

        produced: dict[str, str] = {"__init__.py": GEN_INIT}
        for path in sorted(scratch.iterdir()):
            produced[path.name] = fix_imports(path.read_text(encoding="utf-8"), modules, path.name)

    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.iterdir():
        if old.name not in produced and old.name.endswith((".py", ".pyi")):
            old.unlink()
    written = []
    for name, text in produced.items():
        target = out_dir / name
        target.write_text(text, encoding="utf-8")
        written.append(target)
    return sorted(written)


def main(argv: list[str] | None = None) -> int:
    """Command line: `python -m wire.generate [--out DIR]`."""
    parser = argparse.ArgumentParser(
        prog="python -m wire.generate",
        description="Generate the protobuf/gRPC stubs of wire/protos into wire/gen.",
    )
    parser.add_argument(
        "--out", type=Path, default=GEN_DIR, help=f"output package directory (default {GEN_DIR})"
    )
    args = parser.parse_args(argv)
    try:
        written = generate(args.out)
    except GenerationError as exc:
        print(f"wire.generate: {exc}", file=sys.stderr)
        return 1
    print(f"wrote {len(written)} files to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
