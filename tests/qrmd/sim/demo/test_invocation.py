"""The qrmd command the demo suggests works as pasted from where the demo was started."""

from __future__ import annotations

from pathlib import Path

import pytest

from qrmd.sim.demo.invocation import qrmd_command


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A checkout with qrmd installed in its .venv, as after ``make demo``."""
    script = tmp_path / "check out" / ".venv" / "bin" / "qrmd"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    (script.parent / "python").write_text("")
    return tmp_path / "check out"


def test_a_script_the_path_finds_is_plain_qrmd(checkout: Path) -> None:
    script = checkout / ".venv" / "bin" / "qrmd"
    assert qrmd_command(str(script), cwd=checkout, which=lambda _: str(script)) == "qrmd"


@pytest.mark.parametrize(
    ("argv0", "cwd", "want"),
    [
        pytest.param(".venv/bin/qrmd", ".", ".venv/bin/qrmd", id="make demo: the venv's script"),
        pytest.param(
            ".venv/bin/qrmd",
            "..",
            "'check out/.venv/bin/qrmd'",
            id="pasted from above the checkout: its path from there, quoted",
        ),
    ],
)
def test_a_script_the_path_does_not_find_is_its_path(
    checkout: Path, monkeypatch: pytest.MonkeyPatch, argv0: str, cwd: str, want: str
) -> None:
    monkeypatch.chdir(checkout)
    pasted_in = (checkout / cwd).resolve()
    assert qrmd_command(argv0, cwd=pasted_in, which=lambda _: None) == want


def test_another_qrmd_on_the_path_is_not_this_one(checkout: Path, tmp_path: Path) -> None:
    other = tmp_path / "qrmd"
    other.write_text("#!/bin/sh\n")
    script = checkout / ".venv" / "bin" / "qrmd"
    got = qrmd_command(str(script), cwd=checkout, which=lambda _: str(other))
    assert got == ".venv/bin/qrmd"


def test_python_dash_m_is_this_interpreter_dash_m(checkout: Path) -> None:
    main = checkout / "qrmd" / "__main__.py"
    python = checkout / ".venv" / "bin" / "python"
    got = qrmd_command(str(main), executable=str(python), cwd=Path("/elsewhere"))
    assert got == f"'{python}' -m qrmd"
