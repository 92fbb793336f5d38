"""Group commit in the journal: records written without their fsync, one ``sync`` for them all,
and every unsynced record cut back when the group fails (journal.writer)."""

from __future__ import annotations

from pathlib import Path

import pytest

from journal import JournalWriteError, read_records
from tests.journal.helpers import FaultyFileOps, cause_of, events_of, open_journal


def test_a_group_of_records_is_made_durable_by_one_fsync_and_acknowledged_only_then(
    tmp_path: Path,
) -> None:
    fs = FaultyFileOps()
    journal, _ = open_journal(tmp_path, durability="always", fs=fs)
    with journal:
        journal.append(cause_of(1), events_of(1))
        before = fs.calls["fsync"]
        seqs = [journal.append(cause_of(n), events_of(n), sync=False) for n in (2, 3, 4)]
        assert seqs == [2, 3, 4]
        assert (journal.last_seq, journal.unsynced, fs.calls["fsync"]) == (1, 3, before)
        assert journal.sync() == 4
        assert (journal.last_seq, journal.unsynced, fs.calls["fsync"]) == (4, 0, before + 1)
        assert journal.stats.appends == 4
    assert [r.seq for r in read_records(str(tmp_path))] == [1, 2, 3, 4]


@pytest.mark.parametrize(
    "failing",
    [
        pytest.param("fsync", id="the group's fsync fails"),
        pytest.param("write", id="a later record of the group cannot be written"),
    ],
)
def test_a_failed_group_cuts_every_unsynced_record_back_and_the_next_append_goes_on(
    tmp_path: Path, failing: str
) -> None:
    fs = FaultyFileOps()
    journal, _ = open_journal(tmp_path, durability="always", fs=fs)
    with journal:
        journal.append(cause_of(1), events_of(1))
        journal.append(cause_of(2), events_of(2), sync=False)
        journal.append(cause_of(3), events_of(3), sync=False)
        fs.fail(failing)
        with pytest.raises(JournalWriteError, match="the journal still ends at seq 1"):
            if failing == "fsync":
                journal.sync()
            else:
                journal.append(cause_of(4), events_of(4), sync=False)
        assert (journal.last_seq, journal.unsynced) == (1, 0)
        # The seqs of the cut records are given again: the journal has no gap.
        assert journal.append(cause_of(5), events_of(5)) == 2
    records = list(read_records(str(tmp_path)))
    assert [(r.seq, r.cause["pod_uid"]) for r in records] == [(1, "pod-1"), (2, "pod-5")]


def test_a_group_never_spans_segments_a_rotation_syncs_it_first(tmp_path: Path) -> None:
    fs = FaultyFileOps()
    journal, _ = open_journal(tmp_path, durability="always", fs=fs, segment_max_bytes=1024)
    with journal:
        for n in range(1, 25):
            journal.append(cause_of(n), events_of(n), sync=False)
        journal.sync()
        assert journal.stats.rotations >= 1
        assert (journal.last_seq, journal.unsynced) == (24, 0)
    assert [r.seq for r in read_records(str(tmp_path))] == list(range(1, 25))


def test_an_abandoned_group_is_cut_back(tmp_path: Path) -> None:
    journal, _ = open_journal(tmp_path, durability="always")
    with journal:
        journal.append(cause_of(1), events_of(1))
        journal.append(cause_of(2), events_of(2), sync=False)
        journal.abandon("the writer gave up")
        assert (journal.last_seq, journal.unsynced) == (1, 0)
    assert [r.seq for r in read_records(str(tmp_path))] == [1]
