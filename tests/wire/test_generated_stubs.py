"""The committed stubs in wire/gen are what `python -m wire.generate` makes of wire/protos.

The test extra pins grpcio-tools to the generator that made the committed stubs, so every
install regenerates with it: the files must match byte for byte, and the serialized
descriptors (every package, message, field and method) are compared on their own so a
changed proto is named as such.
"""

import ast
import re
import shutil
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from wire import generate

REGENERATE = "stale stubs: run `python -m wire.generate` and commit wire/gen"


@pytest.fixture(scope="module")
def fresh() -> Iterator[Path]:
    out = Path(tempfile.mkdtemp(prefix="wire-gen-test-", dir="/tmp"))
    try:
        generate.generate(out)
        yield out
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _stub_files(directory: Path) -> dict[str, str]:
    return {
        p.name: p.read_text(encoding="utf-8")
        for p in sorted(directory.iterdir())
        if p.suffix in {".py", ".pyi"}
    }


def _serialized_descriptor(source: str) -> bytes:
    """The bytes literal a generated `_pb2.py` passes to `AddSerializedFile`."""
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "AddSerializedFile"
        ):
            value = ast.literal_eval(node.args[0])
            assert isinstance(value, bytes)
            return value
    raise AssertionError("no AddSerializedFile call in generated module")


def _generator_versions(files: dict[str, str]) -> set[str]:
    stamps = r"# Protobuf Python Version: (\S+)|GRPC_GENERATED_VERSION = '([^']+)'"
    return {m.group(0) for text in files.values() for m in re.finditer(stamps, text)}


def test_the_same_files_are_generated(fresh: Path) -> None:
    assert set(_stub_files(generate.GEN_DIR)) == set(_stub_files(fresh)), REGENERATE


def test_descriptors_match_the_protos(fresh: Path) -> None:
    committed, regenerated = _stub_files(generate.GEN_DIR), _stub_files(fresh)
    modules = [name for name in regenerated if name.endswith("_pb2.py")]
    assert modules, "generation produced no _pb2.py"
    for name in modules:
        assert name in committed, REGENERATE
        assert _serialized_descriptor(committed[name]) == _serialized_descriptor(
            regenerated[name]
        ), f"{name}: {REGENERATE}"


def test_the_test_extra_pins_the_generator_that_made_the_stubs() -> None:
    pyproject = Path(generate.__file__).resolve().parents[1] / "pyproject.toml"
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    pins = [req for req in project["optional-dependencies"]["test"] if "grpcio-tools" in req]
    made_by = {
        f"grpcio-tools=={version}"
        for text in _stub_files(generate.GEN_DIR).values()
        for version in re.findall(r"GRPC_GENERATED_VERSION = '([^']+)'", text)
    }
    assert pins == sorted(made_by), f"the test extra pins {pins}; the stubs were made by {made_by}"


def test_files_are_byte_identical(fresh: Path) -> None:
    committed, regenerated = _stub_files(generate.GEN_DIR), _stub_files(fresh)
    assert _generator_versions(regenerated) == _generator_versions(committed), (
        f"installed generator {sorted(_generator_versions(regenerated))} is not the one that "
        f"made the committed stubs {sorted(_generator_versions(committed))}: "
        "`pip install -e '.[test]'` installs the pinned one"
    )
    for name, text in regenerated.items():
        assert committed.get(name) == text, f"{name}: {REGENERATE}"


# --- the import fix-up ----------------------------------------------------------------


def test_fix_imports_points_our_modules_at_the_package() -> None:
    text = (
        "from google.protobuf import descriptor as _descriptor\n"
        "import advisorsvc_pb2 as advisorsvc__pb2\n"
        "_builder.BuildTopDescriptorsAndMessages(DESCRIPTOR, 'cpuadvisor_pb2', _globals)\n"
    )
    fixed = generate.fix_imports(text, {"advisorsvc_pb2", "cpuadvisor_pb2"}, "cpuadvisor_pb2.py")
    assert fixed == (
        "from google.protobuf import descriptor as _descriptor\n"
        "from wire.gen import advisorsvc_pb2 as advisorsvc__pb2\n"
        "_builder.BuildTopDescriptorsAndMessages(DESCRIPTOR, 'wire.gen.cpuadvisor_pb2', _globals)\n"
    )


def test_fix_imports_refuses_a_module_it_did_not_generate() -> None:
    with pytest.raises(generate.GenerationError, match=r"x_pb2\.py: imports gogo_pb2"):
        generate.fix_imports("import gogo_pb2 as gogo__pb2\n", {"x_pb2"}, "x_pb2.py")


def test_no_generated_module_imports_a_top_level_stub() -> None:
    for name, text in _stub_files(generate.GEN_DIR).items():
        assert not re.search(r"^import \w+_pb2\b", text, re.MULTILINE), name


def test_protoc_failure_is_reported_and_leaves_the_output_alone() -> None:
    scratch = Path(tempfile.mkdtemp(prefix="wire-gen-bad-", dir="/tmp"))
    try:
        protos, out = scratch / "protos", scratch / "out"
        protos.mkdir()
        out.mkdir()
        (protos / "broken.proto").write_text('syntax = "proto3";\nmessage {\n')
        (out / "keep_pb2.py").write_text("# previous output\n")
        with pytest.raises(generate.GenerationError, match="protoc exited with status"):
            generate.generate(out, protos)
        assert [p.name for p in out.iterdir()] == ["keep_pb2.py"]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
