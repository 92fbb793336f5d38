"""Damage in history a valid checkpoint covers does not refuse start (DESIGN.md, Journal).

Recovery needs the newest valid checkpoint and the records after it, nothing older. A flipped
byte in a record the checkpoint covers is reported (which seqs are unreadable, in which file)
and start proceeds from the checkpoint; ``repair`` never drops the intact records recovery
uses. Damage after the newest valid checkpoint still refuses start.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from journal import CorruptRecord, repair, verify
from journal.checkpoints import checkpoint_name
from tests.journal.helpers import assert_holds_exactly, cause_of, events_of, open_journal
from tests.journal.test_corruption import (
    flip_bit,
    locate,
    remove_record,
    truncate_tail,
    zero_record,
)

RECORDS = 131
CHECKPOINT = 100


def one_segment_journal(directory: Path) -> None:
    """131 records in one segment, a checkpoint covering seq 100 (the issue's reproduction)."""
    journal, _ = open_journal(directory)
    with journal:
        for n in range(1, RECORDS + 1):
            journal.append(cause_of(n), events_of(n))
            if n == CHECKPOINT:
                journal.write_checkpoint(n, {"seq": n})


@pytest.mark.parametrize(
    ("damage", "unreadable"),
    [
        pytest.param(flip_bit(66, 20), (66, 66), id="a flipped byte in record 66 is skipped"),
        pytest.param(zero_record(66), (66, 66), id="a zeroed record 66 is skipped"),
        pytest.param(flip_bit(100, 20), (100, 100), id="the checkpointed record itself"),
        pytest.param(flip_bit(1, 5), (1, 1), id="the first record"),
    ],
)
def test_start_proceeds_from_the_checkpoint_over_damaged_history(
    tmp_path: Path, damage, unreadable: tuple[int, int]
) -> None:
    one_segment_journal(tmp_path)
    damage(tmp_path)
    journal, recovery = open_journal(tmp_path)
    with journal:
        assert recovery.checkpoint_seq == CHECKPOINT
        assert_holds_exactly(recovery.records, CHECKPOINT + 1, RECORDS)
        [history] = recovery.damaged_history
        assert (history.first_seq, history.last_seq) == unreadable
        assert history.path.endswith("0000000000000001.seg") and history.offset > 0
        # It keeps serving: the next record follows the last one.
        assert journal.append(cause_of(RECORDS + 1), events_of(RECORDS + 1)) == RECORDS + 1
    _, again = open_journal(tmp_path, read_only=True)
    assert_holds_exactly(again.records, CHECKPOINT + 1, RECORDS + 1)


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(flip_bit(110, 20), id="a flipped byte after the checkpoint refuses start"),
        pytest.param(remove_record(101), id="a missing first record after it refuses start"),
    ],
)
def test_damage_after_the_newest_valid_checkpoint_still_refuses_start(
    tmp_path: Path, damage
) -> None:
    one_segment_journal(tmp_path)
    damage(tmp_path)
    with pytest.raises(CorruptRecord):
        open_journal(tmp_path)


def test_history_damage_with_the_checkpoint_lost_refuses_start(tmp_path: Path) -> None:
    one_segment_journal(tmp_path)
    flip_bit(66, 20)(tmp_path)
    (tmp_path / checkpoint_name(CHECKPOINT)).write_bytes(b"rotten")
    with pytest.raises(CorruptRecord, match="seq 66"):
        open_journal(tmp_path)


def test_history_damage_and_a_torn_tail_start_and_cut_the_tail(tmp_path: Path) -> None:
    one_segment_journal(tmp_path)
    flip_bit(66, 20)(tmp_path)
    truncate_tail(3)(tmp_path)
    journal, recovery = open_journal(tmp_path)
    journal.close()
    assert recovery.torn_tail is not None and recovery.torn_tail.seq == RECORDS
    assert_holds_exactly(recovery.records, CHECKPOINT + 1, RECORDS - 1)
    assert [(h.first_seq, h.last_seq) for h in recovery.damaged_history] == [(66, 66)]


@pytest.mark.parametrize("force", [False, True], ids=["repair", "repair --force"])
def test_repair_never_drops_records_recovery_uses(tmp_path: Path, force: bool) -> None:
    one_segment_journal(tmp_path)
    flip_bit(66, 20)(tmp_path)
    report = repair(str(tmp_path), force=force)
    assert report.lost_records == 0 and not report.needs_force, report.description
    assert "66" in report.description and f"seq {CHECKPOINT}" in report.description
    assert report.kept_last_seq == RECORDS
    _, recovery = open_journal(tmp_path, read_only=True)
    assert recovery.checkpoint_seq == CHECKPOINT
    assert_holds_exactly(recovery.records, CHECKPOINT + 1, RECORDS)
    # verify still reports the damage: history is kept for forensics, damaged as it is.
    [finding] = verify(str(tmp_path)).findings
    assert finding.seq == 66 and not finding.blocks_recovery


def test_repair_cuts_at_damage_after_the_checkpoint_keeping_what_recovery_uses(
    tmp_path: Path,
) -> None:
    one_segment_journal(tmp_path)
    places = locate(tmp_path)  # both located before either is damaged
    segment = places[66].segment
    data = bytearray(segment.read_bytes())
    for seq in (66, 120):
        data[places[seq].offset + 20] ^= 1
    segment.write_bytes(bytes(data))
    report = repair(str(tmp_path), force=True)
    # Records 101-119 are what recovery from the checkpoint uses: they are kept.
    assert report.kept_last_seq == 119 and report.lost_first_seq == 121, report.description
    _, recovery = open_journal(tmp_path, read_only=True)
    assert recovery.checkpoint_seq == CHECKPOINT
    assert_holds_exactly(recovery.records, CHECKPOINT + 1, 119)


def test_history_damage_and_a_torn_first_needed_record(tmp_path: Path) -> None:
    journal, _ = open_journal(tmp_path)
    with journal:
        for n in range(1, 11):
            journal.append(cause_of(n), events_of(n))
        journal.write_checkpoint(10, {"seq": 10})
        journal.append(cause_of(11), events_of(11))
    flip_bit(4, 20)(tmp_path)
    truncate_tail(3)(tmp_path)  # record 11, the only one after the checkpoint, torn
    journal, recovery = open_journal(tmp_path)
    journal.close()
    assert recovery.torn_tail is not None and recovery.torn_tail.seq == 11
    assert recovery.records == [] and recovery.last_seq == 10
    assert [(h.first_seq, h.last_seq) for h in recovery.damaged_history] == [(4, 4)]
