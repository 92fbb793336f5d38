"""Injected write, fsync and truncation failures (DESIGN.md, the commit protocol, step 3).

A failed append raises, leaves the disk holding exactly the acknowledged records, is never
replayed after reopening, and the next append succeeds once the fault clears. A failure that
cannot be undone makes the journal refuse every later append and report itself unhealthy.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from journal import (
    Journal,
    JournalError,
    JournalFailed,
    JournalWriteError,
    WriteOutcomeUnknown,
    read_records,
)
from journal.fileops import OsFileOps
from journal.segments import list_segments
from tests.journal.helpers import (
    FakeClock,
    FaultyFileOps,
    assert_holds_exactly,
    cause_of,
    events_of,
    newest_segment,
    open_journal,
)


@pytest.mark.parametrize(
    ("op", "partial", "durability"),
    [
        pytest.param("write", 0, "always", id="a write that fails at once"),
        pytest.param("write", 20, "always", id="a write that fails after 20 bytes (disk full)"),
        pytest.param("write", 20, "none", id="a write that fails after 20 bytes, durability none"),
        pytest.param("fsync", 0, "always", id="an fsync that fails after the write"),
    ],
)
def test_a_failed_append_leaves_the_acknowledged_records(
    tmp_path: Path, op: str, partial: int, durability: str
) -> None:
    fs = FaultyFileOps()
    journal, _ = open_journal(tmp_path, fs=fs, durability=durability)
    with journal:
        for n in range(1, 4):
            journal.append(cause_of(n), events_of(n))
        acknowledged = newest_segment(tmp_path).read_bytes()
        fs.partial_write_bytes = partial
        fs.fail(op)
        with pytest.raises(JournalWriteError, match="record 4 was not journaled") as caught:
            journal.append({"rpc": "never-acknowledged"}, [{"lost": True}])
        assert "still ends at seq 3" in str(caught.value)
        assert newest_segment(tmp_path).read_bytes() == acknowledged
        assert journal.healthy and journal.last_seq == 3
        assert journal.stats.append_failures == 1
        # The fault has cleared: the next append takes the seq the failed one did not get.
        assert journal.append(cause_of(4), events_of(4)) == 4
    _, recovery = open_journal(tmp_path)
    assert_holds_exactly(recovery.records, 1, 4)
    assert recovery.truncated_bytes == 0


@pytest.mark.parametrize(
    ("second_failure", "durability"),
    [
        pytest.param("truncate", "none", id="the truncation fails"),
        pytest.param("truncate", "always", id="the truncation fails, durability always"),
        pytest.param("fsync", "always", id="the fsync of the truncation fails"),
    ],
)
def test_a_failure_that_cannot_be_undone_fails_the_journal(
    tmp_path: Path, second_failure: str, durability: str
) -> None:
    fs = FaultyFileOps()
    journal, _ = open_journal(tmp_path, fs=fs, durability=durability)
    with journal:
        journal.append(cause_of(1), events_of(1))
        fs.partial_write_bytes = 10
        fs.fail("write")
        fs.fail(second_failure)
        with pytest.raises(WriteOutcomeUnknown, match="unhealthy") as unknown:
            journal.append(cause_of(2), events_of(2))
        assert (unknown.value.first_seq, unknown.value.last_seq) == (2, 2)
        assert not journal.healthy
        assert journal.failure is not None and "could not be cut" in journal.failure
        with pytest.raises(JournalFailed, match="refuses appends"):
            journal.append(cause_of(2), events_of(2))  # the fault is gone, the refusal stays
        with pytest.raises(JournalFailed):
            journal.write_checkpoint(1, {"state": 1})
    # The next start decides from the disk: stray bytes of the failed record are a torn tail.
    _, recovery = open_journal(tmp_path)
    assert_holds_exactly(recovery.records, 1, 1)
    assert recovery.truncated_bytes == (10 if second_failure == "truncate" else 0)


def test_a_group_that_cannot_be_cut_back_names_every_record_whose_outcome_is_unknown(
    tmp_path: Path,
) -> None:
    fs = FaultyFileOps()
    journal, _ = open_journal(tmp_path, fs=fs, durability="always")
    with journal:
        journal.append(cause_of(1), events_of(1))
        journal.append(cause_of(2), events_of(2), sync=False)
        journal.append(cause_of(3), events_of(3), sync=False)
        fs.fail("fsync")
        fs.fail("truncate")
        with pytest.raises(WriteOutcomeUnknown, match="records 2-3 failed") as unknown:
            journal.sync()
        assert (unknown.value.first_seq, unknown.value.last_seq) == (2, 3)
        assert journal.last_seq == 1 and not journal.healthy
    # Both were written whole: the next start replays them, as the error warned.
    _, recovery = open_journal(tmp_path)
    assert_holds_exactly(recovery.records, 1, 3)


def test_a_failed_rotation_is_a_failed_append(tmp_path: Path) -> None:
    fs = FaultyFileOps()
    journal, _ = open_journal(tmp_path, fs=fs, segment_max_bytes=1024)
    with journal:
        n = 0
        while len(list_segments(OsFileOps(), str(tmp_path))) == 1:
            n += 1
            fs.fail("rename")  # creating the next segment fails at its rename
            try:
                journal.append(cause_of(n), events_of(n))
            except JournalWriteError as exc:
                assert "could not be started" in str(exc)
                break
            fs.pending.clear()
        assert journal.last_seq == n - 1 and journal.healthy
        assert not list(tmp_path.glob("*.tmp"))
        assert journal.append(cause_of(n), events_of(n)) == n  # the rename works again
    assert len(list_segments(OsFileOps(), str(tmp_path))) == 2
    assert_holds_exactly(list(read_records(str(tmp_path))), 1, n)


def test_a_failed_directory_fsync_on_rotation_is_a_failed_append(tmp_path: Path) -> None:
    fs = FaultyFileOps()
    journal, _ = open_journal(tmp_path, fs=fs, segment_max_bytes=1024, durability="always")
    with journal:
        n = 0
        while True:
            n += 1
            fs.fail("fsync_dir")
            try:
                journal.append(cause_of(n), events_of(n))
            except JournalWriteError:
                break
            fs.pending.clear()
        assert journal.append(cause_of(n), events_of(n)) == n
        for extra in range(n + 1, n + 4):
            assert journal.append(cause_of(extra), events_of(extra)) == extra
    _, recovery = open_journal(tmp_path)
    assert_holds_exactly(recovery.records, 1, n + 3)


@pytest.mark.parametrize(
    "op",
    [
        pytest.param("write", id="its write fails"),
        pytest.param("fsync", id="its fsync fails"),
        pytest.param("rename", id="its rename fails"),
        pytest.param("fsync_dir", id="the directory fsync after its rename fails"),
    ],
)
def test_a_failed_checkpoint_leaves_the_older_ones(tmp_path: Path, op: str) -> None:
    fs = FaultyFileOps()
    journal, _ = open_journal(tmp_path, fs=fs, durability="always")
    with journal:
        for n in range(1, 6):
            journal.append(cause_of(n), events_of(n))
        journal.write_checkpoint(3, {"upto": 3})
        fs.fail(op)
        with pytest.raises(JournalWriteError, match="checkpoint at seq 5 was not written"):
            journal.write_checkpoint(5, {"upto": 5})
        assert journal.healthy and journal.checkpoint_seq == 3
        assert journal.append(cause_of(6), events_of(6)) == 6
    assert not list(tmp_path.glob("*.tmp"))
    _, recovery = open_journal(tmp_path)
    # A rename that happened before the directory fsync failed may or may not be durable; here
    # it is on disk, and recovery uses whichever checkpoint is newest and valid.
    expected = 5 if op == "fsync_dir" else 3
    assert recovery.checkpoint_seq == expected
    assert recovery.checkpoint_state == {"upto": expected}
    assert_holds_exactly(recovery.records, expected + 1, 6)


def test_failures_with_a_fake_clock_do_not_disturb_checkpoint_timing(tmp_path: Path) -> None:
    clock = FakeClock()
    fs = FaultyFileOps(clock)
    journal, _ = open_journal(tmp_path, fs=fs, clock=clock, checkpoint_every_s=60.0)
    with journal:
        journal.append(cause_of(1), events_of(1))
        fs.fail("write")
        with pytest.raises(JournalWriteError):
            journal.append(cause_of(2), events_of(2))
        clock.advance(59.0)
        assert not journal.checkpoint_due()
        clock.advance(1.0)
        assert journal.checkpoint_due()


def _rotate_with_failing_directory_fsync(
    tmp_path: Path, fs: FaultyFileOps, journal: Journal, fsync_dir_failures: int
) -> int:
    """Append until an append needs a new segment, with its directory fsync failing; returns
    the seq that failed."""
    n = 0
    while True:
        n += 1
        fs.fail("fsync_dir", fsync_dir_failures)
        try:
            journal.append(cause_of(n), events_of(n))
        except JournalError:
            return n
        fs.pending.clear()


def test_a_small_record_after_a_failed_rotation_goes_to_the_old_segment_and_reopens(
    tmp_path: Path,
) -> None:
    # Found by `qrmd sim` (seed 18): the rotation's segment stayed on disk after its directory
    # fsync failed, a smaller record then fitted in the old segment under the same seq, and the
    # next start refused the journal (a segment starting at a seq the previous one holds).
    fs = FaultyFileOps()
    journal, _ = open_journal(tmp_path, fs=fs, segment_max_bytes=1024, durability="always")
    with journal:
        n = _rotate_with_failing_directory_fsync(tmp_path, fs, journal, 1)
        assert journal.healthy and len(list_segments(OsFileOps(), str(tmp_path))) == 1
        assert journal.append(cause_of(n), []) == n  # small: it fits in the old segment
    _, recovery = open_journal(tmp_path)
    assert [r.seq for r in recovery.records] == list(range(1, n + 1))


def test_a_rotation_whose_segment_cannot_be_taken_back_refuses_every_append(
    tmp_path: Path,
) -> None:
    fs = FaultyFileOps()
    journal, _ = open_journal(tmp_path, fs=fs, segment_max_bytes=1024, durability="always")
    with journal:
        n = _rotate_with_failing_directory_fsync(tmp_path, fs, journal, 2)
        assert not journal.healthy and "could not be removed" in (journal.failure or "")
        with pytest.raises(JournalFailed):
            journal.append(cause_of(n), [])
    _, recovery = open_journal(tmp_path)
    assert [r.seq for r in recovery.records] == list(range(1, n))
