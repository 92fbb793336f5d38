"""Reading records as their frames are read gives what reading whole segments first gave.

``journal.segments.SegmentReader`` yields records one by one and ``read_records`` passes them
on before the rest of the segment is read, so a reader holds one record, not a segment's.
The oracle here is the whole-segment scan the journal used before, written out once more on
the framing primitives: on random journals with random damage (flipped bytes, cut tails,
removed bytes, garbage appended), both give the same records, offsets, ends and damage, and
``read_records`` the same records followed by the same error.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from journal import CorruptRecord, JournalError, read_records
from journal.errors import FrameError, PayloadError
from journal.fileops import OsFileOps
from journal.framing import decode_frame, find_next_frame
from journal.records import Record, decode_record
from journal.segments import (
    Damage,
    SegmentHeaderError,
    SegmentReader,
    list_segments,
    read_segment_header,
    scan_segment,
)
from tests.journal.helpers import cause_of, events_of, open_journal


@dataclass
class OracleScan:
    header_first_seq: int
    records: list[Record] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    end: int = 0
    damage: list[Damage] = field(default_factory=list)


def oracle_scan(data: bytes, *, resync: bool) -> OracleScan:
    """The whole-segment scan as the journal did it before records were streamed."""
    header, header_end = read_segment_header(data)
    scan = OracleScan(header.first_seq, end=header_end)
    offset, expected, skipped = header_end, header.first_seq, False
    while offset < len(data):
        try:
            payload, frame_end = decode_frame(data, offset)
        except FrameError as exc:
            resumes = find_next_frame(data, offset + 1)
            scan.damage.append(Damage(offset, expected, exc.reason, True, resumes))
            if not resync or resumes is None:
                break
            offset, skipped = resumes, True
            continue
        record: Record | None
        try:
            record = decode_record(payload)
            if skipped and record.seq > expected:
                problem = ""
            elif record.seq != expected:
                problem = f"record carries seq {record.seq} where seq {expected} belongs"
            else:
                problem = ""
        except PayloadError as exc:
            problem, record = str(exc), None
        skipped = False
        if problem:
            scan.damage.append(Damage(offset, expected, problem, False, offset))
            if not resync:
                break
            if record is None:
                offset = frame_end
                continue
        assert record is not None
        scan.records.append(record)
        scan.offsets.append(offset)
        if not scan.damage:
            scan.end = frame_end
        expected, offset = record.seq + 1, frame_end
    return scan


def oracle_read_records(directory: str, low: int, to_seq: int | None) -> Iterator[Record]:
    """``read_records`` without ``on_damage``, over whole-segment scans (the former code)."""
    segments = list_segments(OsFileOps(), directory)
    expected: int | None = None
    for index, (named_first, path) in enumerate(segments):
        following = segments[index + 1][0] if index + 1 < len(segments) else None
        if following is not None and following <= low:
            continue
        if to_seq is not None and named_first > to_seq:
            return
        try:
            scan = oracle_scan(Path(path).read_bytes(), resync=False)
        except SegmentHeaderError as exc:
            raise CorruptRecord(path, 0, named_first, str(exc), directory=directory) from exc
        if expected is not None and scan.header_first_seq != expected:
            raise CorruptRecord(
                path,
                0,
                expected,
                f"segment starts at seq {scan.header_first_seq}, expected {expected}",
                directory=directory,
            )
        for record in scan.records:
            if record.seq >= low and (to_seq is None or record.seq <= to_seq):
                yield record
        if scan.damage:
            damage = scan.damage[0]
            if following is None and damage.could_be_torn_write:
                return
            raise CorruptRecord(
                path, damage.offset, damage.expected_seq, damage.reason, directory=directory
            )
        expected = scan.records[-1].seq + 1 if scan.records else scan.header_first_seq


def outcome(records: Iterator[Record]) -> tuple[list[Record], str | None]:
    """Every record yielded, then the error that ended the iteration (type and message)."""
    got: list[Record] = []
    try:
        for record in records:
            got.append(record)
    except JournalError as exc:
        return got, f"{type(exc).__name__}: {exc}"
    return got, None


@st.composite
def damages(draw: st.DrawFn, size: int) -> list[tuple[str, int, int]]:
    """A few byte-level damages of one segment of ``size`` bytes: (how, where, value)."""
    kinds = st.sampled_from(["flip", "cut", "remove", "append"])
    return draw(
        st.lists(
            st.tuples(kinds, st.integers(0, max(size - 1, 0)), st.integers(1, 255)), max_size=3
        )
    )


def damaged(data: bytes, damage: list[tuple[str, int, int]]) -> bytes:
    out = bytearray(data)
    for how, position, value in damage:
        at = min(position, max(len(out) - 1, 0))
        if how == "flip" and out:
            out[at] ^= value
        elif how == "cut":
            del out[at:]
        elif how == "remove":
            del out[at : at + value % 40 + 1]
        elif how == "append":
            out += bytes([value]) * (value % 24) + b"QRJF"[: value % 5]
    return bytes(out)


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.data())
def test_streamed_reading_equals_whole_segment_scans_on_damaged_journals(
    tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    directory = tmp_path_factory.mktemp("journal")
    count = data.draw(st.integers(0, 24), label="records")
    journal, _ = open_journal(directory, segment_max_bytes=1024)
    with journal:
        for n in range(1, count + 1):
            journal.append(cause_of(n), events_of(n))
    segments = list_segments(OsFileOps(), str(directory))
    target = data.draw(st.sampled_from(segments), label="segment")[1]
    original = Path(target).read_bytes()
    Path(target).write_bytes(damaged(original, data.draw(damages(len(original)))))

    for _, path in segments:
        content = Path(path).read_bytes()
        for resync in (False, True):
            try:
                want = oracle_scan(content, resync=resync)
            except SegmentHeaderError as exc:
                with pytest.raises(SegmentHeaderError, match=re.escape(str(exc))):
                    scan_segment(content, path, resync=resync)
                continue
            got = scan_segment(content, path, resync=resync)
            assert (got.records, got.offsets, got.end, got.damage) == (
                want.records,
                want.offsets,
                want.end,
                want.damage,
            )
            # Recovery's scan passes over the records its checkpoint covers: the same scan
            # without them, the same end, damage and next seq.
            needed = data.draw(st.integers(0, count + 2), label="from_seq of the scan")
            passed = scan_segment(content, path, resync=resync, from_seq=needed)
            kept = [
                (r, o) for r, o in zip(want.records, want.offsets, strict=True) if r.seq >= needed
            ]
            next_seq = want.records[-1].seq + 1 if want.records else want.header_first_seq
            assert (passed.records, passed.offsets, passed.end, passed.damage) == (
                [r for r, _ in kept],
                [o for _, o in kept],
                want.end,
                want.damage,
            )
            assert passed.next_seq == next_seq
            # The StateStore's recovery reads the events only: the same scan, causes empty.
            events_only = scan_segment(content, path, resync=resync, causes=False)
            assert (events_only.end, events_only.damage, events_only.offsets) == (
                want.end,
                want.damage,
                want.offsets,
            )
            assert [replace(r, cause={}) for r in want.records] == events_only.records
            # Both at once, as the StateStore recovers after a checkpoint.
            recovered = scan_segment(content, path, resync=resync, from_seq=needed, causes=False)
            assert (recovered.end, recovered.damage, recovered.offsets) == (
                passed.end,
                passed.damage,
                passed.offsets,
            )
            assert [replace(r, cause={}) for r in passed.records] == recovered.records
            assert recovered.next_seq == passed.next_seq

    low = data.draw(st.integers(0, count + 2), label="from_seq")
    high = data.draw(st.none() | st.integers(0, count + 2), label="to_seq")
    assert outcome(read_records(str(directory), low, high)) == outcome(
        oracle_read_records(str(directory), low, high)
    )


def test_a_reader_yields_each_record_before_reading_the_next_frame(tmp_path: Path) -> None:
    journal, _ = open_journal(tmp_path)
    with journal:
        for n in range(1, 4):
            journal.append(cause_of(n), events_of(n))
    (path,) = (p for _, p in list_segments(OsFileOps(), str(tmp_path)))
    data = Path(path).read_bytes()
    reader = SegmentReader(data, path)
    records = reader.records()
    first, offset = next(records)
    assert (first.seq, offset, reader.end) == (1, reader.header_end, _frame_end(data, offset))
    assert [r.seq for r, _ in records] == [2, 3] and reader.end == os.path.getsize(path)


def _frame_end(data: bytes, offset: int) -> int:
    return decode_frame(data, offset)[1]


def _record_frames(data: bytes, header_end: int) -> list[bytes]:
    frames, offset = [], header_end
    while offset < len(data):
        _, end = decode_frame(data, offset)
        frames.append(data[offset:end])
        offset = end
    return frames


@pytest.mark.parametrize(
    ("misplaced", "reason"),
    [
        pytest.param(lambda f: [*f[:3], f[2], *f[3:]], "seq 3 where seq 4", id="a record twice"),
        pytest.param(lambda f: [*f[:3], *f[4:]], "seq 5 where seq 4", id="a record missing"),
        pytest.param(
            lambda f: [*f[:2], f[3], f[2], *f[4:]], "seq 4 where seq 3", id="two records swapped"
        ),
    ],
)
@pytest.mark.parametrize("from_seq", [4, 6, 7], ids=lambda s: f"checkpoint covering {s - 1}")
def test_an_intact_frame_out_of_place_among_covered_records_is_damage_all_the_same(
    tmp_path: Path, misplaced: Any, reason: str, from_seq: int
) -> None:
    # Every checksum is right: only the seqs show that the records are not in place, and the
    # records a checkpoint covers are passed over by their frames and seqs only.
    journal, _ = open_journal(tmp_path)
    with journal:
        for n in range(1, 8):
            journal.append(cause_of(n), events_of(n))
    (path,) = (p for _, p in list_segments(OsFileOps(), str(tmp_path)))
    original = Path(path).read_bytes()
    header_end = SegmentReader(original, path).header_end
    frames = _record_frames(original, header_end)
    data = original[:header_end] + b"".join(misplaced(frames))
    whole = scan_segment(data, path)
    passed = scan_segment(data, path, from_seq=from_seq, causes=False)
    assert reason in whole.damage[0].reason
    assert (passed.end, passed.damage) == (whole.end, whole.damage)
    assert [r.seq for r in passed.records] == [r.seq for r in whole.records if r.seq >= from_seq]
