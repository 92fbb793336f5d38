"""Retention never deletes what recovery needs (journal/retention.py)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from journal import Retention
from journal.checkpoints import checkpoint_name
from journal.retention import StoredFile, plan_retention
from tests.journal.helpers import FakeClock, assert_holds_exactly, cause_of, events_of, open_journal

NOW = 1_000_000.0
DAY = 86400.0


def seg(first: int, size: int = 100, age: float = 0.0) -> StoredFile:
    return StoredFile(f"{first:016d}.seg", first, size, NOW - age)


def ckpt(seq: int, size: int = 100, age: float = 0.0) -> StoredFile:
    return StoredFile(checkpoint_name(seq), seq, size, NOW - age)


SEGMENTS = [seg(1), seg(101), seg(201), seg(301), seg(401)]


@pytest.mark.parametrize(
    ("segments", "checkpoints", "policy", "deleted"),
    [
        pytest.param(
            SEGMENTS,
            [ckpt(350)],
            Retention(max_bytes=0),
            [],
            id="with one checkpoint nothing is deleted: a fallback replays from seq 1",
        ),
        pytest.param(
            SEGMENTS,
            [ckpt(250), ckpt(350)],
            Retention(max_bytes=0),
            [seg(1).path, seg(101).path],
            id="segments before the older checkpoint's next record go when over the size limit",
        ),
        pytest.param(
            SEGMENTS,
            [ckpt(200), ckpt(350)],
            Retention(max_bytes=0),
            [seg(1).path, seg(101).path],
            id="the segment holding the record after the older checkpoint stays",
        ),
        pytest.param(
            SEGMENTS,
            [ckpt(150), ckpt(250), ckpt(350)],
            Retention(max_bytes=0),
            [seg(1).path, seg(101).path, checkpoint_name(150)],
            id="checkpoints beyond the newest two are forensic history",
        ),
        pytest.param(
            SEGMENTS,
            [ckpt(250), ckpt(350)],
            Retention(max_bytes=150),
            [seg(1).path],
            id="the oldest go first until the rest fits",
        ),
        pytest.param(
            SEGMENTS,
            [ckpt(250), ckpt(350)],
            Retention(max_bytes=200),
            [],
            id="forensic files within the size limit stay",
        ),
        pytest.param(
            [seg(1, age=9 * DAY), seg(101, age=2 * DAY), *SEGMENTS[2:]],
            [ckpt(250), ckpt(350)],
            Retention(max_bytes=None, max_age_s=7 * DAY),
            [seg(1).path],
            id="files older than the age limit go",
        ),
        pytest.param(
            [seg(s.seq, age=90 * DAY) for s in SEGMENTS],
            [ckpt(250, age=90 * DAY), ckpt(350, age=90 * DAY)],
            Retention(max_bytes=None, max_age_s=DAY),
            [seg(1).path, seg(101).path],
            id="needed files stay however old",
        ),
        pytest.param(
            SEGMENTS,
            [ckpt(250), ckpt(350)],
            Retention(max_bytes=None, max_age_s=None),
            [],
            id="no limits keep everything",
        ),
    ],
)
def test_plan_retention(
    segments: list[StoredFile], checkpoints: list[StoredFile], policy: Retention, deleted: list[str]
) -> None:
    assert plan_retention(segments, checkpoints, policy, NOW) == deleted


@given(
    firsts=st.lists(st.integers(2, 1000), max_size=12, unique=True),
    checkpoint_seqs=st.lists(st.integers(1, 1100), max_size=6, unique=True),
    sizes=st.lists(st.integers(0, 500), min_size=20, max_size=20),
    ages=st.lists(st.floats(0, 30 * DAY), min_size=20, max_size=20),
    max_bytes=st.none() | st.integers(0, 3000),
    max_age_s=st.none() | st.floats(0, 30 * DAY),
)
@settings(max_examples=300)
def test_retention_never_deletes_what_recovery_needs(
    firsts: list[int],
    checkpoint_seqs: list[int],
    sizes: list[int],
    ages: list[float],
    max_bytes: int | None,
    max_age_s: float | None,
) -> None:
    segments = [seg(first, sizes[i], ages[i]) for i, first in enumerate(sorted([1, *firsts]))]
    checkpoints = [ckpt(s, sizes[-1 - i], ages[-1 - i]) for i, s in enumerate(checkpoint_seqs)]
    deleted = set(plan_retention(segments, checkpoints, Retention(max_bytes, max_age_s), NOW))
    newest_two = sorted(checkpoint_seqs)[-2:]
    # Recovery may fall back to the older of the two newest checkpoints (or, without two, to
    # replay from seq 1), so every segment holding a record after it must stay.
    fallback_from = newest_two[0] + 1 if len(newest_two) == 2 else 1
    kept_segments = [s for s in segments if s.path not in deleted]
    assert kept_segments and kept_segments[-1] == segments[-1]
    # Segments start at seq 1, so the record fallback_from lies in a segment starting at or
    # before it: that segment, and all after it, are kept.
    assert kept_segments[0].seq <= fallback_from
    assert not {checkpoint_name(s) for s in newest_two} & deleted
    # What goes is always the oldest: the kept segments stay contiguous.
    assert kept_segments == segments[len(segments) - len(kept_segments) :]


def test_an_open_journal_keeps_what_a_fallback_needs(tmp_path: Path) -> None:
    journal, _ = open_journal(
        tmp_path, segment_max_bytes=1024, retention=Retention(max_bytes=0, max_age_s=None)
    )
    with journal:
        for n in range(1, 201):
            journal.append(cause_of(n), events_of(n))
            if n % 40 == 0:
                journal.write_checkpoint(n, {"seq": n})
        deleted = journal.stats.files_deleted
    assert deleted > 0
    assert sorted(p.name for p in tmp_path.glob("*.ckpt")) == [
        checkpoint_name(160),
        checkpoint_name(200),
    ]
    # The newest checkpoint lost: the previous one and the records after it are all there.
    (tmp_path / checkpoint_name(200)).write_bytes(b"rotten")
    journal, recovery = open_journal(tmp_path, segment_max_bytes=1024)
    journal.close()
    assert recovery.checkpoint_seq == 160
    assert_holds_exactly(recovery.records, 161, 200)


def test_old_history_goes_by_age(tmp_path: Path) -> None:
    clock = FakeClock(wall=time.time())
    journal, _ = open_journal(
        tmp_path,
        clock=clock,
        segment_max_bytes=1024,
        retention=Retention(max_bytes=None, max_age_s=7 * DAY),
    )
    with journal:
        for n in range(1, 101):
            journal.append(cause_of(n), events_of(n))
            if n in (50, 100):
                journal.write_checkpoint(n, {"seq": n})
        assert journal.stats.files_deleted == 0
        segments_before = len(list(tmp_path.glob("*.seg")))
        clock.advance(8 * DAY)
        deleted = journal.apply_retention()
    assert deleted and all(path.endswith(".seg") for path in deleted)
    assert len(list(tmp_path.glob("*.seg"))) == segments_before - len(deleted)
    journal, recovery = open_journal(tmp_path, segment_max_bytes=1024)
    journal.close()
    assert recovery.checkpoint_seq == 100 and recovery.records == []
