"""``qrmd diagrams`` in-process, and the committed docs/diagrams kept up to date.

The committed Mermaid files are golden: regenerate them with
``QRMD_UPDATE_GOLDEN=1 pytest tests/qrmd/commands/test_diagrams.py`` (or ``qrmd diagrams``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from machines.catalog import TABLES
from machines.diagram import to_mermaid
from qrmd.cli import main
from qrmd.commands.diagrams import render

REPO = Path(__file__).resolve().parents[3]
COMMITTED = REPO / "docs" / "diagrams"
HAS_DOT = shutil.which("dot") is not None


def test_mermaid_files_are_written_into_the_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "new" / "dir"
    assert main(["diagrams", "--out", str(out)]) == 0
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted([f"{t.name}.mmd" for t in TABLES] + ["README.md"])
    assert (out / "ramp_up.mmd").read_text() == to_mermaid(TABLES[0])
    assert str(out / "ramp_up.mmd") in capsys.readouterr().out


def test_out_dash_prints_each_diagram_to_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagrams", "--out", "-"]) == 0
    printed = capsys.readouterr().out
    for table in TABLES:
        assert f"%% file: {table.name}.mmd\n{to_mermaid(table)}" in printed
    assert "README.md" not in printed


def test_one_machine_can_be_selected(tmp_path: Path) -> None:
    assert main(["diagrams", "--machine", "registration", "--out", str(tmp_path)]) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["registration.mmd"]


def test_an_unknown_machine_is_one_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagrams", "--machine", "nope", "--out", "-"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("qrmd diagrams: error: no state machine named 'nope' (machines: ramp_up")
    assert err.count("\n") == 1


def test_svg_without_graphviz_says_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert main(["diagrams", "--format", "svg", "--out", str(tmp_path / "svg")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert "qrmd diagrams: error: Graphviz 'dot' is not on PATH" in captured.err
    assert "apt-get install graphviz" in captured.err
    assert not (tmp_path / "svg").exists(), "nothing is written when SVG cannot be made"


def test_a_failing_dot_is_reported_with_the_machine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = tmp_path / "bin"
    fake.mkdir()
    dot = fake / "dot"
    dot.write_text("#!/bin/sh\necho 'Error: syntax error in line 1' >&2\nexit 1\n")
    dot.chmod(0o755)
    monkeypatch.setenv("PATH", str(fake))
    assert main(["diagrams", "--format", "svg", "--out", "-"]) == 2
    err = capsys.readouterr().err
    assert "dot failed for machine 'ramp_up' (exit 1): Error: syntax error in line 1" in err


@pytest.mark.skipif(not HAS_DOT, reason="Graphviz 'dot' is not installed on this machine")
def test_svg_with_graphviz(tmp_path: Path) -> None:
    assert main(["diagrams", "--format", "svg", "--out", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{t.name}.svg" for t in TABLES)
    svg = (tmp_path / "ramp_up.svg").read_text()
    assert "<svg" in svg and svg.rstrip().endswith("</svg>")
    assert "finish_ramp_up [transition_period_passed] / commit RampUpFinished" in svg


def test_committed_diagrams_are_up_to_date() -> None:
    """docs/diagrams must equal what `qrmd diagrams` renders now (QRMD_UPDATE_GOLDEN=1 rewrites)."""
    fresh = render(TABLES, "mermaid")
    if os.environ.get("QRMD_UPDATE_GOLDEN") == "1":
        COMMITTED.mkdir(parents=True, exist_ok=True)
        for stale in COMMITTED.glob("*.mmd"):
            stale.unlink()
        for name, text in fresh.items():
            (COMMITTED / name).write_text(text, encoding="utf-8")
    committed = {
        p.name: p.read_text(encoding="utf-8")
        for p in sorted(COMMITTED.iterdir())
        if p.suffix in (".mmd", ".md")
    }
    assert sorted(committed) == sorted(fresh), (
        "docs/diagrams lists other machines than machines/ defines; "
        "run `qrmd diagrams` or QRMD_UPDATE_GOLDEN=1 pytest"
    )
    for name, text in fresh.items():
        assert committed[name] == text, (
            f"docs/diagrams/{name} is stale; run `qrmd diagrams` or QRMD_UPDATE_GOLDEN=1 pytest"
        )
