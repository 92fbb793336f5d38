"""verify, read_records and repair on journal directories (journal/forensics.py, repair.py)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from journal import CorruptRecord, JournalError, read_records, repair, verify
from journal.checkpoints import checkpoint_name
from journal.fileops import OsFileOps
from journal.segments import list_segments
from tests.journal.helpers import (
    assert_holds_exactly,
    cause_of,
    events_of,
    newest_segment,
    open_journal,
    record_offsets,
    snapshot,
    write_records,
)
from tests.journal.test_corruption import flip_bit, truncate_tail


def multi_segment_journal(directory: Path, records: int = 60) -> None:
    journal, _ = open_journal(directory, segment_max_bytes=1024)
    with journal:
        for n in range(1, records + 1):
            journal.append(cause_of(n), events_of(n))
            if n in (20, 40):
                journal.write_checkpoint(n, {"seq": n})


# -- read_records ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("from_seq", "to_seq", "first", "last"),
    [
        pytest.param(None, None, 1, 60, id="everything"),
        pytest.param(25, None, 25, 60, id="from a seq in a later segment"),
        pytest.param(None, 7, 1, 7, id="up to a seq"),
        pytest.param(30, 33, 30, 33, id="a range inside one segment"),
        pytest.param(61, None, 61, 60, id="past the end is empty"),
    ],
)
def test_read_records_ranges(
    tmp_path: Path, from_seq: int | None, to_seq: int | None, first: int, last: int
) -> None:
    multi_segment_journal(tmp_path)
    assert_holds_exactly(list(read_records(str(tmp_path), from_seq, to_seq)), first, last)


def test_read_records_stops_quietly_at_a_torn_tail_and_changes_nothing(tmp_path: Path) -> None:
    multi_segment_journal(tmp_path)
    truncate_tail(5)(tmp_path)
    before = snapshot(tmp_path)
    assert_holds_exactly(list(read_records(str(tmp_path))), 1, 59)
    assert snapshot(tmp_path) == before


def test_read_records_raises_at_mid_log_damage(tmp_path: Path) -> None:
    write_records(tmp_path, 10)
    flip_bit(4, 30)(tmp_path)
    records = read_records(str(tmp_path))
    assert [next(records).seq for _ in range(3)] == [1, 2, 3]
    with pytest.raises(CorruptRecord, match="record seq 4"):
        next(records)


def test_read_records_works_on_a_copy_while_the_writer_runs(tmp_path: Path) -> None:
    journal, _ = open_journal(tmp_path / "live")
    with journal:
        for n in range(1, 6):
            journal.append(cause_of(n), events_of(n))
        shutil.copytree(tmp_path / "live", tmp_path / "copy")
        assert_holds_exactly(list(read_records(str(tmp_path / "copy"))), 1, 5)


# -- verify ----------------------------------------------------------------------------------


def test_verify_a_sound_journal(tmp_path: Path) -> None:
    multi_segment_journal(tmp_path)
    report = verify(str(tmp_path))
    assert report.ok and report.findings == ()
    assert (report.records, report.first_seq, report.last_seq) == (60, 1, 60)
    assert report.checkpoints == (20, 40) and report.segments > 3
    assert report.node_name == "node-a"


def test_verify_reports_every_problem_and_changes_nothing(tmp_path: Path) -> None:
    multi_segment_journal(tmp_path)
    segments = list_segments(OsFileOps(), str(tmp_path))
    first_segment = Path(segments[0][1])
    flip_offset = record_offsets(first_segment)[2]
    flip_bit(3, 30)(tmp_path)
    Path(segments[2][1]).unlink()
    (tmp_path / checkpoint_name(40)).write_bytes(b"rotten")
    (tmp_path / checkpoint_name(20)).unlink()  # so recovery would need every segment
    truncate_tail(4)(tmp_path)
    before = snapshot(tmp_path)
    report = verify(str(tmp_path))
    assert snapshot(tmp_path) == before
    kinds = [(f.kind, f.seq) for f in report.findings]
    assert kinds == [
        ("corrupt_record", 3),
        ("sequence_gap", segments[2][0]),
        ("torn_tail", 60),
        ("corrupt_checkpoint", 40),
    ]
    corrupt, gap, torn, _ = report.findings
    assert (corrupt.path, corrupt.offset) == (str(first_segment), flip_offset)
    assert corrupt.blocks_recovery and gap.blocks_recovery and not torn.blocks_recovery
    assert "records are missing" in gap.message and not report.ok
    assert report.records == 60 - 1 - (segments[3][0] - segments[2][0]) - 1


def test_verify_reports_a_checkpoint_ahead_of_the_log(tmp_path: Path) -> None:
    write_records(tmp_path, 5)
    journal, _ = open_journal(tmp_path)
    with journal:
        journal.write_checkpoint(5, {"seq": 5})
    truncate_tail(2)(tmp_path)  # record 5 torn, but the checkpoint covers it
    [torn, ahead] = verify(str(tmp_path)).findings
    assert (torn.kind, ahead.kind, ahead.seq) == ("torn_tail", "checkpoint_ahead_of_log", 5)


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(verify, id="verify"),
        pytest.param(repair, id="repair"),
        pytest.param(lambda d: list(read_records(d)), id="read_records"),
    ],
)
def test_a_missing_directory_says_so_and_is_not_created(tmp_path: Path, call: Any) -> None:
    with pytest.raises(JournalError, match="does not exist"):
        call(str(tmp_path / "nowhere"))
    assert not (tmp_path / "nowhere").exists()


# -- repair ----------------------------------------------------------------------------------


def test_repair_cuts_a_torn_tail_without_force(tmp_path: Path) -> None:
    write_records(tmp_path, 10)
    truncate_tail(7)(tmp_path)
    report = repair(str(tmp_path))
    assert report.applied and report.torn_tail and not report.needs_force
    assert report.lost_records == 0 and report.kept_last_seq == 9
    segment = str(newest_segment(tmp_path))
    assert report.moved_aside == ((segment, segment + ".broken"),)
    assert "never acknowledged" in report.description
    assert verify(str(tmp_path)).ok


def test_repair_describes_mid_log_damage_and_acts_only_with_force(tmp_path: Path) -> None:
    multi_segment_journal(tmp_path)
    flip_bit(30, 40)(tmp_path)
    # With the checkpoint at 40 lost, recovery starts from 20 and needs record 30.
    (tmp_path / checkpoint_name(40)).write_bytes(b"rotten")
    before = snapshot(tmp_path)
    plan = repair(str(tmp_path))
    assert not plan.applied and plan.needs_force and not plan.torn_tail
    assert snapshot(tmp_path) == before
    assert (plan.kept_last_seq, plan.lost_first_seq, plan.lost_last_seq, plan.lost_records) == (
        29,
        31,
        60,
        30,
    )
    assert "drops 30 intact records, seq 31-60" in plan.description
    assert "Checkpoints at seq 40" in plan.description
    assert f"qrmd journal repair {tmp_path} --force" in plan.description

    done = repair(str(tmp_path), force=True)
    assert done.applied and done.moved_aside == plan.moved_aside
    assert all(Path(broken).exists() for _, broken in done.moved_aside)
    assert verify(str(tmp_path)).ok
    journal, recovery = open_journal(tmp_path, segment_max_bytes=1024)
    with journal:
        assert recovery.checkpoint_seq == 20
        assert_holds_exactly(recovery.records, 21, 29)
        assert journal.append(cause_of(30), events_of(30)) == 30


def test_repair_of_a_sound_journal_does_nothing(tmp_path: Path) -> None:
    write_records(tmp_path, 3)
    before = snapshot(tmp_path)
    report = repair(str(tmp_path), force=True)
    assert not report.applied and "nothing to repair" in report.description
    assert snapshot(tmp_path) == before


def test_repair_refuses_a_journal_in_use(tmp_path: Path) -> None:
    journal, _ = open_journal(tmp_path)
    with journal, pytest.raises(JournalError, match="in use"):
        repair(str(tmp_path))


def test_repair_sets_aside_damaged_history_a_checkpoint_covers(tmp_path: Path) -> None:
    multi_segment_journal(tmp_path)  # checkpoints at 20 and 40
    segments = list_segments(OsFileOps(), str(tmp_path))
    flip_bit(5, 30)(tmp_path)
    # Recovery starts from the checkpoint at 40 and never reads the damaged segment.
    journal, recovery = open_journal(tmp_path, segment_max_bytes=1024)
    journal.close()
    assert recovery.checkpoint_seq == 40
    damaged = next(i for i, (first, _) in enumerate(segments) if first > 5) - 1
    [finding] = verify(str(tmp_path)).findings
    assert finding.kind == "corrupt_record" and not finding.blocks_recovery
    before = snapshot(tmp_path)
    plan = repair(str(tmp_path))
    assert not plan.applied and plan.needs_force and snapshot(tmp_path) == before
    next_first = segments[damaged + 1][0]
    assert plan.kept_last_seq == 60
    assert (plan.lost_first_seq, plan.lost_last_seq) == (1, next_first - 1)
    assert plan.lost_records == next_first - 2  # every record before next_first but the damaged one
    assert "the checkpoint at seq 40 covers it" in plan.description
    assert [src for src, _ in plan.moved_aside] == [path for _, path in segments[: damaged + 1]]

    done = repair(str(tmp_path), force=True)
    assert done.applied and verify(str(tmp_path)).findings == ()
    journal, recovery = open_journal(tmp_path, segment_max_bytes=1024)
    journal.close()
    assert recovery.checkpoint_seq == 40
    assert_holds_exactly(recovery.records, 41, 60)
    assert_holds_exactly(list(read_records(str(tmp_path))), next_first, 60)
