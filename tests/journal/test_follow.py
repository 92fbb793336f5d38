"""``journal.follow.JournalFollower``: a live journal's records, every seq once, in order.

Each test drives the real writer (``Journal``) and the follower pass by pass in one thread, so
every interleaving is chosen, not raced: a frame half written, rotation, checkpoints and
retention deleting segments the follower has or has not read, a segment deleted between the
listing and the read, a writer restart cutting a torn tail, a journal replaced, and damage.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from journal import CorruptRecord, Gap, Journal, Retention
from journal.fileops import OsFileOps
from journal.follow import JournalFollower, Skipped
from journal.framing import encode_frame
from journal.records import Record, encode_record
from journal.segments import list_segments
from tests.journal.helpers import (
    FakeClock,
    cause_of,
    events_of,
    newest_segment,
    open_journal,
    record_offsets,
)

#: A few dozen records a segment: appends rotate often.
SEGMENT_BYTES = 2048
NO_HISTORY = Retention(max_bytes=0, max_age_s=None)


def open_small(directory: Path) -> Journal:
    journal, _ = open_journal(directory, segment_max_bytes=SEGMENT_BYTES, retention=NO_HISTORY)
    return journal


def append(journal: Journal, count: int) -> int:
    for _ in range(count):
        n = journal.last_seq + 1
        assert journal.append(cause_of(n), events_of(n)) == n
    return journal.last_seq


def frame_of(seq: int) -> bytes:
    return encode_frame(encode_record(Record(seq, 0.0, 0.0, cause_of(seq), events_of(seq))))


class Follow:
    """A follower and what it said: the seqs of each pass, the skips and the gaps."""

    def __init__(
        self,
        directory: Path,
        after_seq: int | None = None,
        *,
        read_past_damage: bool = False,
        fs: OsFileOps | None = None,
    ) -> None:
        self.skipped: list[Skipped] = []
        self.gaps: list[Gap] = []
        self.follower = JournalFollower(
            str(directory),
            after_seq,
            fs=fs,
            on_skip=self.skipped.append,
            on_damage=self.gaps.append if read_past_damage else None,
        )

    def poll(self) -> list[int]:
        return [record.seq for record in self.follower.poll()]


def test_a_frame_being_written_is_read_whole_on_a_later_pass(tmp_path: Path) -> None:
    journal = open_small(tmp_path)
    append(journal, 3)
    journal.close()
    follow = Follow(tmp_path)
    assert follow.poll() == [1, 2, 3]
    frame = frame_of(4)
    # Cut in the frame header, just after it, and one byte short of the end.
    pieces = [frame[:5], frame[5:16], frame[16:-1], frame[-1:]]
    with open(newest_segment(tmp_path), "ab", buffering=0) as segment:
        for piece in pieces[:-1]:
            segment.write(piece)
            assert follow.poll() == [], f"{segment.tell()} bytes of a frame are not a record"
        segment.write(pieces[-1])
    assert follow.poll() == [4]
    assert follow.poll() == []
    assert follow.skipped == [] and follow.gaps == []


def test_records_come_once_across_rotations_between_passes(tmp_path: Path) -> None:
    journal = open_small(tmp_path)
    append(journal, 5)
    follow = Follow(tmp_path)
    seen = follow.poll()
    for count in (1, 0, 40, 3, 120, 0, 1):
        append(journal, count)
        seen += follow.poll()
    journal.close()
    assert len(list_segments(OsFileOps(), str(tmp_path))) > 4
    assert seen == list(range(1, journal.last_seq + 1))
    assert follow.skipped == []


def test_retention_deleting_segments_already_read_costs_nothing(tmp_path: Path) -> None:
    journal = open_small(tmp_path)
    append(journal, 100)
    follow = Follow(tmp_path)
    seen = follow.poll()
    journal.write_checkpoint(append(journal, 50), {})
    seen += follow.poll()
    journal.write_checkpoint(append(journal, 50), {})  # retention deletes what the first covers
    assert not (tmp_path / "0000000000000001.seg").exists()
    seen += follow.poll() + follow.poll()
    append(journal, 30)
    seen += follow.poll()
    journal.close()
    assert seen == list(range(1, 231)) and follow.skipped == []


def test_seqs_retention_deleted_before_they_were_read_are_said_not_silently_skipped(
    tmp_path: Path,
) -> None:
    journal = open_small(tmp_path)
    append(journal, 10)
    follow = Follow(tmp_path)
    assert follow.poll() == list(range(1, 11))
    journal.write_checkpoint(append(journal, 200), {})
    journal.write_checkpoint(append(journal, 200), {})
    oldest = list_segments(OsFileOps(), str(tmp_path))[0][0]
    assert oldest > 11
    seen = follow.poll()
    journal.close()
    assert seen == list(range(oldest, 411))
    [skipped] = follow.skipped
    assert (skipped.first_seq, skipped.last_seq) == (11, oldest - 1)
    assert "deleted by retention before they were read (the checkpoint at seq" in skipped.reason


class VanishingFileOps(OsFileOps):
    """Deletes a segment just before reading it: retention between the listing and the read."""

    def __init__(self) -> None:
        self.armed = False

    def read_file(self, path: str) -> bytes:
        if self.armed:
            self.armed = False
            os.unlink(path)
        return super().read_file(path)


def test_a_segment_deleted_between_listing_and_reading_is_said_on_the_next_pass(
    tmp_path: Path,
) -> None:
    journal, _ = open_journal(tmp_path, segment_max_bytes=SEGMENT_BYTES)
    journal.write_checkpoint(append(journal, 210), {})
    journal.close()
    second_oldest = list_segments(OsFileOps(), str(tmp_path))[1][0]
    fs = VanishingFileOps()
    follow = Follow(tmp_path, 5, fs=fs)  # the next seq is in the oldest segment
    fs.armed = True
    assert follow.poll() == [] and follow.skipped == []  # the pass ends where it vanished...
    assert follow.poll() == list(range(second_oldest, 211))
    [skipped] = follow.skipped  # ...and the next one says what went with it
    assert (skipped.first_seq, skipped.last_seq) == (6, second_oldest - 1)
    assert "deleted by retention before they were read" in skipped.reason


def test_a_writer_restart_cutting_a_torn_tail_gives_the_rewritten_seq_once(tmp_path: Path) -> None:
    journal = open_small(tmp_path)
    append(journal, 5)
    journal.close()
    follow = Follow(tmp_path)
    assert follow.poll() == [1, 2, 3, 4, 5]
    with open(newest_segment(tmp_path), "ab") as out:
        out.write(frame_of(6)[:-7])  # the crash: half a record, never acknowledged
    assert follow.poll() == []
    journal = open_small(tmp_path)  # recovery cuts it
    append(journal, 40)
    seen = follow.poll()
    journal.close()
    assert seen == list(range(6, 46)) and follow.skipped == [] and follow.gaps == []


def test_a_journal_replaced_under_the_follower_is_said_and_no_seq_comes_twice(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "journal"
    journal = open_small(directory)
    append(journal, 30)
    journal.close()
    follow = Follow(directory)
    assert follow.poll() == list(range(1, 31))
    shutil.rmtree(directory)
    journal, _ = open_journal(  # a new journal: the same records at other times
        directory, segment_max_bytes=SEGMENT_BYTES, clock=FakeClock(wall=1_800_000_000.0)
    )
    append(journal, 40)
    seen = follow.poll()
    journal.close()
    assert seen == list(range(31, 41))
    [skipped] = follow.skipped
    assert (skipped.first_seq, skipped.last_seq) == (30, 30)
    assert "was cut back (qrmd journal repair) or replaced" in skipped.reason


def test_segments_deleted_by_hand_are_damage_not_a_quiet_skip(tmp_path: Path) -> None:
    journal = open_small(tmp_path)
    append(journal, 5)
    follow = Follow(tmp_path)
    follow_past = Follow(tmp_path, read_past_damage=True)
    assert follow.poll() == follow_past.poll() == [1, 2, 3, 4, 5]
    append(journal, 200)
    journal.close()
    segments = list_segments(OsFileOps(), str(tmp_path))
    for _, path in segments[:2]:
        os.unlink(path)  # no checkpoint covers them: not retention
    with pytest.raises(CorruptRecord, match="no checkpoint covers seqs 6-"):
        follow.poll()
    assert follow_past.poll() == list(range(segments[2][0], 206))
    assert follow_past.poll() == []
    [gap] = follow_past.gaps
    assert (gap.first_missing_seq, gap.resumed_at_seq) == (6, segments[2][0])


def test_damage_behind_the_tail_is_reported_once_and_read_past(tmp_path: Path) -> None:
    journal = open_small(tmp_path)
    append(journal, 3)
    follow = Follow(tmp_path)
    follow_past = Follow(tmp_path, read_past_damage=True)
    assert follow.poll() == follow_past.poll() == [1, 2, 3]
    append(journal, 100)
    journal.close()
    first = Path(list_segments(OsFileOps(), str(tmp_path))[0][1])
    offset = record_offsets(first)[5]  # seq 6
    data = bytearray(first.read_bytes())
    data[offset + 20] ^= 0xFF
    first.write_bytes(bytes(data))
    with pytest.raises(CorruptRecord, match="record seq 6"):
        follow.poll()
    assert follow_past.poll() == [4, 5, *range(7, 104)]
    assert follow_past.poll() == []
    [gap] = follow_past.gaps
    assert (gap.path, gap.offset, gap.first_missing_seq, gap.resumed_at_seq) == (
        str(first),
        offset,
        6,
        7,
    )


class CountingFileOps(OsFileOps):
    def __init__(self) -> None:
        self.bytes_read = 0

    def read_file(self, path: str) -> bytes:
        data = super().read_file(path)
        self.bytes_read += len(data)
        return data

    def read_from(self, path: str, offset: int) -> bytes:
        data = super().read_from(path, offset)
        self.bytes_read += len(data)
        return data


def test_a_pass_reads_from_the_last_record_not_the_whole_segment(tmp_path: Path) -> None:
    journal, _ = open_journal(tmp_path)  # one large segment
    append(journal, 500)
    fs = CountingFileOps()
    follow = Follow(tmp_path, fs=fs)
    assert len(follow.poll()) == 500
    fs.bytes_read = 0
    append(journal, 1)
    assert follow.poll() == [501]
    journal.close()
    assert fs.bytes_read == len(frame_of(500)) + len(frame_of(501))
