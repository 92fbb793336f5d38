"""The one walk over a journal directory (journal/walk.py): its start and the records after it.

The journal is generic, so the walk is tested with a state of its own: the tuple of seqs
applied so far, which a checkpoint holds as ``{"seqs": [...]}``. A walk that starts in the
wrong place, skips a record or applies one twice shows in that tuple.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from journal import Record
from journal.checkpoints import checkpoint_name
from journal.fileops import OsFileOps
from journal.segments import list_segments
from journal.walk import NoStart, Start, find_start, replay_to, span, steps
from tests.journal.helpers import cause_of, events_of, open_journal

Seqs = tuple[int, ...]


class SeqReplayer:
    """A state that is the seqs applied: the empty state is (), a checkpoint holds its own."""

    def empty(self) -> Seqs:
        return ()

    def from_checkpoint(self, payload: Any, seq: int) -> Seqs:
        if not isinstance(payload, dict) or "seqs" not in payload:
            raise ValueError(f"checkpoint {seq} holds no seqs")
        return tuple(payload["seqs"])

    def apply(self, state: Seqs, records: Sequence[Record]) -> Seqs:
        return state + tuple(record.seq for record in records)


REPLAYER = SeqReplayer()


def journal_with(
    directory: Path,
    records: int,
    checkpoints: Sequence[int],
    payloads: dict[int, Any] | None = None,
) -> None:
    """Records 1..records in small segments, and a checkpoint after each seq of ``checkpoints``."""
    journal, _ = open_journal(directory, segment_max_bytes=1024)
    with journal:
        for n in range(1, records + 1):
            journal.append(cause_of(n), events_of(n))
            if n in checkpoints:
                payload = (payloads or {}).get(n, {"seqs": list(range(1, n + 1))})
                journal.write_checkpoint(n, payload)


def retire_before(directory: Path, seq: int) -> int:
    """Delete the segments whose records all come before ``seq``, as retention would; returns
    the first kept record."""
    segments = list_segments(OsFileOps(), str(directory))
    kept = segments[0][0]
    for (_, path), following in itertools.pairwise(segments):
        if following[0] <= seq:
            os.remove(path)
            kept = following[0]
    assert kept > 1
    return kept


def first_seq(directory: Path) -> int | None:
    first = span(str(directory), whole=False).first
    return None if first is None else first.seq


@pytest.mark.parametrize(
    ("newest", "at_most", "expected"),
    [
        pytest.param(
            False, None, 0, id="the oldest start is the empty state when record 1 is kept"
        ),
        pytest.param(True, None, 20, id="the newest start is the newest checkpoint"),
        pytest.param(True, 15, 10, id="the newest start covers no more than it is bounded by"),
        pytest.param(True, 9, 0, id="before every checkpoint the newest start is the empty state"),
    ],
)
def test_a_whole_journal_starts_where_it_is_asked(
    tmp_path: Path, newest: bool, at_most: int | None, expected: int
) -> None:
    journal_with(tmp_path, 30, [10, 20])
    start = find_start(str(tmp_path), REPLAYER, 1, at_most=at_most, newest=newest)
    assert start.seq == expected
    assert start.state == tuple(range(1, expected + 1))
    assert (start.path is None) == (expected == 0)


def test_records_retention_retired_are_covered_by_the_oldest_checkpoint_that_reaches_them(
    tmp_path: Path,
) -> None:
    journal_with(tmp_path, 60, [5, 25, 40])
    kept = retire_before(tmp_path, 26)
    assert 5 + 1 < kept <= 26
    oldest = find_start(str(tmp_path), REPLAYER, kept, newest=False)
    newest = find_start(str(tmp_path), REPLAYER, kept, at_most=39)
    assert (oldest.seq, newest.seq) == (25, 25)
    assert find_start(str(tmp_path), REPLAYER, kept).seq == 40


def test_retired_records_no_checkpoint_covers_refuse_a_start_naming_the_first_kept(
    tmp_path: Path,
) -> None:
    journal_with(tmp_path, 60, [5])
    kept = retire_before(tmp_path, 30)
    with pytest.raises(NoStart, match=f"records before seq {kept} of .* were retired") as err:
        find_start(str(tmp_path), REPLAYER, kept, newest=False)
    assert err.value.first_seq == kept


@pytest.mark.parametrize(
    ("skip", "expected"),
    [
        pytest.param((ValueError,), 10, id="a checkpoint that does not decode is stepped over"),
        pytest.param((), None, id="with nothing to skip it is the caller's error"),
    ],
)
def test_an_unusable_checkpoint_is_stepped_over_only_when_asked(
    tmp_path: Path, skip: tuple[type[Exception], ...], expected: int | None
) -> None:
    journal_with(tmp_path, 30, [10, 20], {20: {"not": "seqs"}})
    if expected is None:
        with pytest.raises(ValueError, match="checkpoint 20 holds no seqs"):
            find_start(str(tmp_path), REPLAYER, 1, skip=skip)
    else:
        assert find_start(str(tmp_path), REPLAYER, 1, skip=skip).seq == expected


def test_a_damaged_checkpoint_file_is_stepped_over_by_default(tmp_path: Path) -> None:
    journal_with(tmp_path, 30, [10, 20])
    (tmp_path / checkpoint_name(20)).write_bytes(b"not a checkpoint")
    assert find_start(str(tmp_path), REPLAYER, 1).seq == 10


@pytest.mark.parametrize(
    ("start_at", "to_seq"),
    [
        pytest.param(0, None, id="from the empty state to the newest record"),
        pytest.param(10, 17, id="from a checkpoint to a record before the newest"),
    ],
)
def test_each_step_carries_the_state_on_either_side_and_replay_ends_in_the_same_state(
    tmp_path: Path, start_at: int, to_seq: int | None
) -> None:
    journal_with(tmp_path, 30, [10, 20])
    start = find_start(str(tmp_path), REPLAYER, 1, at_most=start_at)
    walked = list(steps(str(tmp_path), REPLAYER, start, to_seq))
    end = to_seq or 30
    assert [step.record.seq for step in walked] == list(range(start_at + 1, end + 1))
    for step in walked:
        assert step.before == tuple(range(1, step.record.seq))
        assert step.after == tuple(range(1, step.record.seq + 1))
    assert replay_to(str(tmp_path), REPLAYER, start, to_seq) == (walked[-1].after, end)


def test_replay_to_refuses_records_that_do_not_follow_the_start(tmp_path: Path) -> None:
    journal_with(tmp_path, 60, [])
    kept = retire_before(tmp_path, 30)
    with pytest.raises(Exception, match=f"records 1-{kept - 1} are gone"):
        replay_to(str(tmp_path), REPLAYER, Start(0, ()))


def test_the_span_is_the_first_and_last_kept_record(tmp_path: Path) -> None:
    journal_with(tmp_path, 30, [])
    whole = span(str(tmp_path))
    assert (whole.first and whole.first.seq, whole.last and whole.last.seq) == (1, 30)
    assert span(str(tmp_path), whole=False).last is None
    assert first_seq(tmp_path) == 1
