"""Checkpoints: atomic files, when one is due, and recovery's fallback (journal/checkpoints.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from journal import CorruptCheckpoint, JournalMismatch, OsFileOps, load_checkpoint
from journal.checkpoints import checkpoint_name
from tests.journal.helpers import (
    FakeClock,
    assert_holds_exactly,
    cause_of,
    events_of,
    open_journal,
)


def state_at(seq: int) -> dict[str, object]:
    """A stand-in for the state codec's output after commits 1..seq."""
    return {"seq": seq, "entries": {f"pod-{n}": {"main": [n % 16]} for n in range(1, seq + 1)}}


def journal_with_checkpoints(directory: Path, records: int, at: list[int]) -> None:
    journal, _ = open_journal(directory)
    with journal:
        for n in range(1, records + 1):
            journal.append(cause_of(n), events_of(n))
            if n in at:
                journal.write_checkpoint(n, state_at(n))


def test_recovery_starts_from_the_newest_checkpoint(tmp_path: Path) -> None:
    journal_with_checkpoints(tmp_path, 30, at=[10, 20])
    journal, recovery = open_journal(tmp_path)
    journal.close()
    assert recovery.checkpoint_seq == 20 and recovery.checkpoint_state == state_at(20)
    assert recovery.checkpoint_path == str(tmp_path / checkpoint_name(20))
    assert_holds_exactly(recovery.records, 21, 30)
    assert recovery.skipped_checkpoints == () and journal.checkpoint_seq == 20


def test_a_checkpoint_file_holds_its_header_and_state(tmp_path: Path) -> None:
    journal_with_checkpoints(tmp_path, 5, at=[5])
    checkpoint = load_checkpoint(OsFileOps(), str(tmp_path / checkpoint_name(5)))
    assert checkpoint.seq == 5 and checkpoint.state == state_at(5)
    assert checkpoint.header.node_name == "node-a" and checkpoint.header.state_bytes > 0


def _flip_middle(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x04
    path.write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-3])


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _trailing(path: Path) -> None:
    path.write_bytes(path.read_bytes() + b"\x00")


def _renamed(path: Path) -> None:
    path.rename(path.with_name(checkpoint_name(25)))  # the header still says 20


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        pytest.param(_flip_middle, "checksum", id="a bit flip in the newest checkpoint"),
        pytest.param(_truncate, "announced", id="the newest checkpoint cut short"),
        pytest.param(_empty, "header bytes", id="the newest checkpoint empty"),
        pytest.param(_trailing, "unexpected bytes", id="bytes after the newest checkpoint's state"),
        pytest.param(
            _renamed, "file name says 25", id="a checkpoint whose name and header disagree"
        ),
    ],
)
def test_a_corrupt_newest_checkpoint_falls_back_to_the_previous_one(
    tmp_path: Path, damage: Callable[[Path], None], reason: str
) -> None:
    journal_with_checkpoints(tmp_path, 30, at=[10, 20])
    damage(tmp_path / checkpoint_name(20))
    journal, recovery = open_journal(tmp_path)
    journal.close()
    assert recovery.checkpoint_seq == 10 and recovery.checkpoint_state == state_at(10)
    assert_holds_exactly(recovery.records, 11, 30)
    [skipped] = recovery.skipped_checkpoints
    assert reason in skipped.reason


def test_with_every_checkpoint_corrupt_replay_starts_from_the_first_record(tmp_path: Path) -> None:
    journal_with_checkpoints(tmp_path, 12, at=[4, 8])
    _flip_middle(tmp_path / checkpoint_name(4))
    _flip_middle(tmp_path / checkpoint_name(8))
    journal, recovery = open_journal(tmp_path)
    journal.close()
    assert recovery.checkpoint_seq is None and recovery.checkpoint_state is None
    assert_holds_exactly(recovery.records, 1, 12)
    assert len(recovery.skipped_checkpoints) == 2


def test_without_a_usable_checkpoint_or_the_first_records_recovery_refuses(tmp_path: Path) -> None:
    journal, _ = open_journal(tmp_path, segment_max_bytes=1024)
    with journal:
        for n in range(1, 61):
            journal.append(cause_of(n), events_of(n))
    first = sorted(tmp_path.glob("*.seg"))[0]
    first.unlink()  # the records before the second segment are gone, and no checkpoint covers them
    with pytest.raises(CorruptCheckpoint, match="the state cannot be rebuilt"):
        open_journal(tmp_path, segment_max_bytes=1024)


def test_a_checkpoint_from_another_machine_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "other"
    journal_with_checkpoints(other, 3, at=[3])
    mine = tmp_path / "mine"
    journal_with_checkpoints(mine, 3, at=[])
    for segment in mine.glob("*.seg"):
        segment.unlink()
    (other / checkpoint_name(3)).rename(mine / checkpoint_name(3))
    # A directory holding only a checkpoint: its header is the identity checked.
    with pytest.raises(JournalMismatch):
        open_journal(mine, node_name="node-b")


def test_checkpoint_due_after_n_records_or_t_seconds(tmp_path: Path) -> None:
    clock = FakeClock()
    journal, _ = open_journal(
        tmp_path, clock=clock, checkpoint_every_records=5, checkpoint_every_s=30.0
    )
    with journal:
        clock.advance(100.0)
        assert not journal.checkpoint_due()  # time passed, but there is nothing to cover
        for n in range(1, 5):
            journal.append(cause_of(n), events_of(n))
        assert journal.checkpoint_due()  # 100 s since open
        journal.write_checkpoint(4, state_at(4))
        assert not journal.checkpoint_due()
        for n in range(5, 9):
            journal.append(cause_of(n), events_of(n))
        clock.advance(29.0)
        assert not journal.checkpoint_due()  # 4 records, 29 s
        journal.append(cause_of(9), events_of(9))
        assert journal.checkpoint_due()  # 5 records
        journal.write_checkpoint(9, state_at(9))
        journal.append(cause_of(10), events_of(10))
        clock.advance(29.9)
        assert not journal.checkpoint_due()
        clock.advance(0.1)
        assert journal.checkpoint_due()  # 30 s


@pytest.mark.parametrize(
    ("seq", "message"),
    [
        pytest.param(6, "newest record \\(5\\)", id="a seq not journaled yet"),
        pytest.param(2, "newest checkpoint \\(3\\)", id="a seq older than the newest checkpoint"),
    ],
)
def test_write_checkpoint_refuses_a_seq_out_of_range(
    tmp_path: Path, seq: int, message: str
) -> None:
    journal_with_checkpoints(tmp_path, 5, at=[3])
    journal, _ = open_journal(tmp_path)
    with journal, pytest.raises(ValueError, match=message):
        journal.write_checkpoint(seq, state_at(seq))


def test_leftover_temporary_files_are_removed_on_open(tmp_path: Path) -> None:
    journal_with_checkpoints(tmp_path, 5, at=[5])
    stray = tmp_path / (checkpoint_name(9) + ".tmp")
    stray.write_bytes(b"half a checkpoint")
    journal, recovery = open_journal(tmp_path)
    journal.close()
    assert recovery.removed_temp_files == (str(stray),) and not stray.exists()
    assert recovery.checkpoint_seq == 5


def test_a_checkpoint_ahead_of_the_log_is_refused_and_nothing_changes(tmp_path: Path) -> None:
    # Only possible with durability none and a power loss: the checkpoint reached the disk, the
    # newest record did not. Replaying an older checkpoint would silently lose record 5.
    journal_with_checkpoints(tmp_path, 5, at=[2, 5])
    segment = next(tmp_path.glob("*.seg"))
    segment.write_bytes(segment.read_bytes()[:-3])
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    with pytest.raises(CorruptCheckpoint, match="records 5-5 are missing"):
        open_journal(tmp_path)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
