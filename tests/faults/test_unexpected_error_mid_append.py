"""An error that is not an ``OSError`` in the middle of an append (a bug in a file-system
layer, a ``MemoryError``) is cut back like an I/O failure (DESIGN.md, the commit protocol,
step 3): before, the half-written frame stayed, the next append wrote the same seq after it,
and the next start refused the journal ("record carries seq N where seq N+1 belongs")."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from journal.fileops import OsFileOps
from tests.journal.helpers import assert_holds_exactly, cause_of, events_of, open_journal


class InjectedBugError(Exception):
    """Not an OSError: what no rollback written for I/O errors expects."""


class BuggyFileOps(OsFileOps):
    """Real files; the ``fail_at``-th write writes half its bytes, then raises."""

    def __init__(self, fail_at: int) -> None:
        self.fail_at = fail_at
        self.writes = 0

    def write(self, fd: int, data: bytes) -> int:
        self.writes += 1
        if self.writes == self.fail_at:
            os.write(fd, data[: len(data) // 2])
            raise InjectedBugError("injected bug after a partial write")
        return super().write(fd, data)


def test_a_bug_mid_append_is_cut_back_and_the_journal_goes_on(tmp_path: Path) -> None:
    fs = BuggyFileOps(fail_at=6)  # the segment header is write 1; records 1-4 are writes 2-5
    journal, _ = open_journal(tmp_path, fs=fs)
    with journal:
        for n in range(1, 5):
            assert journal.append(cause_of(n), events_of(n)) == n
        with pytest.raises(InjectedBugError):
            journal.append(cause_of(5), events_of(5))
        assert journal.healthy and journal.last_seq == 4
        for n in range(5, 8):
            assert journal.append(cause_of(n), events_of(n)) == n
    _, recovery = open_journal(tmp_path)
    assert recovery.torn_tail is None
    assert_holds_exactly(recovery.records, 1, 7)
