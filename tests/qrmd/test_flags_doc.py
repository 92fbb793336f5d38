"""``docs/flags.md`` is made from the option rows (qrmd.commands.run_flags) and is never stale, and
``qrmd run --help`` lists every flag on one line under its subsystem."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from qrmd.commands.run_flags import flags_reference
from qrmd.config import OPTIONS, SECTIONS, env_name

ROOT = Path(__file__).resolve().parents[2]


def test_the_flag_reference_is_the_generated_one() -> None:
    written = (ROOT / "docs" / "flags.md").read_text()
    assert written == flags_reference(), (
        "docs/flags.md is stale: run `python -m qrmd.commands.run_flags > docs/flags.md`"
    )


def test_the_reference_gives_every_flag_its_whole_help_default_and_variable() -> None:
    text = flags_reference()
    for opt in OPTIONS:
        row = next(line for line in text.splitlines() if line.startswith(f"| `--{opt.flag}` "))
        assert " ".join(opt.help.split()).replace("|", "\\|") in row
        assert f"`{env_name(opt.flag)}`" in row


def test_run_help_lists_each_flag_on_one_line_under_its_subsystem() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "qrmd.cli", "run", "--help"],
        capture_output=True, text=True, cwd=ROOT, check=True, timeout=60,
    )  # fmt: skip
    lines = done.stdout.splitlines()
    assert lines[0] == "usage: qrmd run [--config PATH] [--FLAG VALUE ...]"
    for name, options in SECTIONS:
        start = lines.index(f"{name} options:")
        group = lines[start + 1 : start + 1 + len(options)]
        assert [line.split()[0] for line in group] == [f"--{o.flag}" for o in options]
