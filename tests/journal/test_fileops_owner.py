"""``FileOps.restrict_to_owner`` (journal.fileops): the journal directory made owner-only, the
port ``journal.lock`` tightens it through (so a simulated disk needs no real directory)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from journal.fileops import OsFileOps
from journal.lock import lock_directory


@pytest.mark.parametrize(
    ("mode", "previous"),
    [
        pytest.param(0o755, 0o755, id="a 0755 directory is made 0700 and its old mode returned"),
        pytest.param(0o700, None, id="a 0700 directory is left alone"),
    ],
)
def test_restrict_to_owner(tmp_path: Path, mode: int, previous: int | None) -> None:
    directory = tmp_path / "journal"
    directory.mkdir()
    os.chmod(directory, mode)
    assert OsFileOps().restrict_to_owner(str(directory)) == previous
    assert directory.stat().st_mode & 0o777 == 0o700


def test_locking_a_0755_journal_directory_tightens_it_and_says_so(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "journal"
    directory.mkdir()
    os.chmod(directory, 0o755)
    fs = OsFileOps()
    with caplog.at_level(logging.WARNING, logger="journal"):
        fd = lock_directory(fs, str(directory))
    fs.close(fd)
    assert directory.stat().st_mode & 0o777 == 0o700
    assert "was mode 755; made it 700" in caplog.text
