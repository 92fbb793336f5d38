"""``qrmd run`` takes its dataclasses' generated methods compiled from the previous start
(``qrmd.commands.run_dataclasses``): the classes behave exactly as when ``dataclasses``
compiles them, the file follows the bytecode rules (magic number, not written under
``PYTHONDONTWRITEBYTECODE``), a foreign or broken file is the same as none, and a second
process compiles nothing the first saved."""

from __future__ import annotations

import dataclasses
import importlib.util
import inspect
import marshal
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import qrmd.commands.run
from qrmd.cli import main
from qrmd.commands import run_dataclasses
from qrmd.commands.run_dataclasses import DataclassCode

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def builtin_exec_restored(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # As an interpreter that writes bytecode (the suite may run under PYTHONDONTWRITEBYTECODE).
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    yield
    run_dataclasses.uninstall()


def _define(options: dict[str, Any]) -> type[Any]:
    """A dataclass with a default, a default factory and a class variable, under ``options``."""

    class Pod:
        uid: str
        cpus: float = 1.5
        containers: tuple[str, ...] = dataclasses.field(default_factory=tuple)

    return dataclasses.dataclass(**options)(Pod)


def _method_code(cls: type[Any]) -> dict[str, tuple[bytes, int, tuple[str, ...]]]:
    return {
        name: (fn.__code__.co_code, fn.__code__.co_flags, fn.__code__.co_varnames)
        for name, fn in vars(cls).items()
        if callable(fn) and hasattr(fn, "__code__") and name.startswith("__")
    }


OPTIONS = [
    pytest.param({}, id="a plain dataclass"),
    pytest.param({"frozen": True}, id="a frozen one, with its setattr and hash"),
    pytest.param({"frozen": True, "slots": True}, id="a frozen one with slots"),
    pytest.param({"order": True}, id="an ordered one"),
    pytest.param({"eq": False, "repr": False}, id="one without eq and repr"),
]


@pytest.mark.parametrize("options", OPTIONS)
@pytest.mark.parametrize("saved", [False, True], ids=["compiled now", "read from the file"])
def test_a_class_gets_the_methods_dataclasses_compiles(
    tmp_path: Path, options: dict[str, Any], saved: bool
) -> None:
    plain = _define(options)
    path = str(tmp_path / "methods")
    if saved:
        run_dataclasses.install(path)
        _define(options)
        assert run_dataclasses.save()
        run_dataclasses.uninstall()

    installed = run_dataclasses.install(path)
    cached = _define(options)

    assert (installed.compiled == 0) == saved
    assert _method_code(cached) == _method_code(plain)
    assert inspect.signature(cached) == inspect.signature(plain)
    assert cached.__init__.__annotations__ == plain.__init__.__annotations__
    one, same = cached("a"), cached("a")
    if options.get("repr", True):
        assert repr(one) == repr(plain("a"))
    assert (one == same) == (plain("a") == plain("a"))
    if options.get("frozen"):
        assert hash(one) == hash(same)
        with pytest.raises(dataclasses.FrozenInstanceError):
            one.uid = "b"


def _garbage(path: Path) -> None:
    path.write_bytes(b"\x00\x01 not marshal")


def _foreign_magic(path: Path) -> None:
    path.write_bytes(b"XXXX" + marshal.dumps({"def f(): pass": compile("1", "<s>", "eval")}))


def _truncated(path: Path) -> None:
    data = importlib.util.MAGIC_NUMBER + marshal.dumps({"text": compile("1", "<s>", "eval")})
    path.write_bytes(data[: len(data) // 2])


def _not_a_dict(path: Path) -> None:
    path.write_bytes(importlib.util.MAGIC_NUMBER + marshal.dumps([1, 2]))


def _a_directory(path: Path) -> None:
    path.mkdir()


@pytest.mark.parametrize(
    "spoil",
    [
        pytest.param(_garbage, id="garbage"),
        pytest.param(_foreign_magic, id="another interpreter's file"),
        pytest.param(_truncated, id="a truncated file"),
        pytest.param(_not_a_dict, id="a file of another shape"),
        pytest.param(_a_directory, id="a directory in its place"),
    ],
)
def test_an_unreadable_file_is_the_same_as_none(
    tmp_path: Path, spoil: Callable[[Path], None]
) -> None:
    path = tmp_path / "methods"
    spoil(path)

    installed = run_dataclasses.install(str(path))
    cls = _define({"frozen": True})

    assert installed.compiled > 0
    assert cls("a") == cls("a")


def test_nothing_is_written_when_the_interpreter_writes_no_bytecode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    path = tmp_path / "methods"
    installed = run_dataclasses.install(str(path))
    _define({})

    assert installed.compiled > 0
    assert not run_dataclasses.save()
    assert not path.exists()


def test_nothing_is_written_when_nothing_was_compiled(tmp_path: Path) -> None:
    path = tmp_path / "methods"
    run_dataclasses.install(str(path))
    _define({})
    assert run_dataclasses.save()
    written = path.stat().st_mtime_ns
    run_dataclasses.uninstall()

    run_dataclasses.install(str(path))
    _define({})

    assert not run_dataclasses.save()
    assert path.stat().st_mtime_ns == written


def test_a_file_that_cannot_be_written_is_not_an_error(tmp_path: Path) -> None:
    blocked = tmp_path / "a file"
    blocked.write_text("")
    installed = DataclassCode(str(blocked / "methods"))  # its directory is a file
    installed.exec("x = 1", {})

    assert not installed.save()
    assert list(tmp_path.iterdir()) == [blocked]


def test_uninstall_gives_dataclasses_the_builtin_exec_again(tmp_path: Path) -> None:
    run_dataclasses.install(str(tmp_path / "methods"))
    assert "exec" in vars(dataclasses)

    run_dataclasses.uninstall()

    assert "exec" not in vars(dataclasses)
    assert not run_dataclasses.save()


def test_qrmd_run_takes_the_code_and_gives_it_back_when_it_returns(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    seen: list[bool] = []
    monkeypatch.setattr(run_dataclasses, "cache_path", lambda: str(tmp_path / "methods"))

    def command(_args: Any) -> int:
        seen.append("exec" in vars(dataclasses))
        return 0

    monkeypatch.setattr(qrmd.commands.run, "run", command)

    assert main(["run"]) == 0

    assert seen == [True]
    assert "exec" not in vars(dataclasses)


def test_qrmd_run_saves_the_code_once_the_daemon_serves(monkeypatch: pytest.MonkeyPatch) -> None:
    given: list[Any] = []

    def run_daemon(_config: Any, *, serving: Callable[[], None]) -> int:
        given.append(serving)
        return 0

    monkeypatch.setattr(qrmd.commands.run, "run_daemon", run_daemon)

    assert main(["run", "--metrics-address", "off"]) == 0

    assert given == [run_dataclasses.finish]


def test_finishing_the_start_saves_and_gives_the_builtin_exec_back(tmp_path: Path) -> None:
    path = tmp_path / "methods"
    run_dataclasses.install(str(path))
    _define({})

    assert run_dataclasses.finish()

    assert path.exists()
    assert "exec" not in vars(dataclasses)


#: What ``qrmd run`` imports for its default subsystems, with the code installed, in a fresh
#: interpreter: the number of texts compiled, then whether the file was saved.
_RUN_IMPORTS = """
from qrmd.commands import run_dataclasses
installed = run_dataclasses.install()
import qrmd.cli, qrmd.commands.run, wire.plugin_server
from qrmd.daemon import SUBSYSTEMS, _builder
for entry in SUBSYSTEMS[:2]:
    _builder(entry)
print(installed.compiled, run_dataclasses.save())
"""


def test_a_second_start_compiles_none_of_the_methods_the_first_saved(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    command = [sys.executable, "-X", f"pycache_prefix={tmp_path}", "-c", _RUN_IMPORTS]

    def start() -> list[str]:
        done = subprocess.run(
            command, cwd=ROOT, env=env, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    first_compiled, first_saved = start()
    assert int(first_compiled) > 100 and first_saved == "True"
    assert start() == ["0", "False"]


#: Every subsystem's wiring and the metrics, with the code installed, in a fresh interpreter:
#: the number of texts compiled.
_EVERY_SUBSYSTEM = """
import importlib
from qrmd.commands import run_dataclasses
installed = run_dataclasses.install()
from qrmd.daemon import SUBSYSTEMS, _builder
for entry in SUBSYSTEMS:
    _builder(entry)
importlib.import_module("qrmd.status.endpoint")
importlib.import_module("qrmd.status.metrics")
print(installed.compiled)
"""


@pytest.mark.parametrize(
    ("writes", "status", "compiled_after"),
    [
        pytest.param(True, 0, "0", id="the install step leaves nothing to compile"),
        pytest.param(False, 1, None, id="without bytecode writes it fails and saves nothing"),
    ],
)
def test_the_install_step_compiles_every_subsystem_s_methods(
    tmp_path: Path, writes: bool, status: int, compiled_after: str | None
) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
    if writes:
        env.pop("PYTHONDONTWRITEBYTECODE")
    prefix = ["-X", f"pycache_prefix={tmp_path}"]

    step = subprocess.run(
        [sys.executable, *prefix, "-m", "qrmd.commands.run_dataclasses"],
        check=False,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert step.returncode == status, step.stderr
    assert ("PYTHONDONTWRITEBYTECODE" in step.stderr) == (not writes)
    after = subprocess.run(
        [sys.executable, *prefix, "-c", _EVERY_SUBSYSTEM],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    compiled = after.stdout.strip()
    assert compiled == compiled_after if compiled_after is not None else int(compiled) > 100
