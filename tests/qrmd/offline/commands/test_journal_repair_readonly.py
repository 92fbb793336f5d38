"""``qrmd journal repair`` without ``--force`` (and with ``--dry-run``) opens nothing for
writing: it runs on a read-only copy of a node's journal (a dry run writes nothing).

The copy is a real read-only bind mount, so any open for writing fails with EROFS.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from qrmd.cli import main
from tests.journal.helpers import snapshot
from tests.mounts import read_only_view
from tests.qrmd.offline.commands.test_journal_cli import (
    flip_byte_in_record,
    journal_dir,
    lose_checkpoints,
)

__all__ = ["journal_dir"]  # the fixture, shared with the CLI tests


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["journal", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize(
    ("damage", "flags", "code", "says"),
    [
        pytest.param(
            lambda d: (flip_byte_in_record(d, 4), lose_checkpoints(d, 6)),
            (),
            1,
            "Nothing was changed",
            id="mid-log damage is described without force on a read-only copy",
        ),
        pytest.param(
            lambda d: flip_byte_in_record(d, 6),
            ("--dry-run",),
            0,
            "Dry run: nothing was changed",
            id="a torn tail is described by a dry run on a read-only copy",
        ),
        pytest.param(
            lambda d: None,
            (),
            0,
            "nothing to repair",
            id="a sound journal is checked on a read-only copy",
        ),
    ],
)
def test_repair_without_changes_works_on_a_read_only_copy(
    journal_dir: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    damage,
    flags: tuple[str, ...],
    code: int,
    says: str,
) -> None:
    damage(journal_dir)
    copy = tmp_path / "copy"
    shutil.copytree(journal_dir, copy)
    before = snapshot(copy)
    with read_only_view(copy, tmp_path / "ro") as view:
        got, out, err = run(capsys, "repair", str(view), *flags)
        assert (got, err) == (code, ""), out + err
        assert says in out
    assert snapshot(copy) == before
