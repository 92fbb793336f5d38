"""Segment files: their names, how a new one is created, and how one is read back.

A segment is ``<first seq, 16 digits>.seg``: a header frame, then one frame per record with
consecutive sequence numbers starting at the header's ``first_seq`` (package docstring).

Reading a segment is a scan over its bytes that stops at (or, for ``verify``, steps over) the
first damage: a frame cut short or failing a checksum, a payload that is not a record, or a
sequence number out of order. Whether damage is a torn tail or corruption is decided by the
caller, who knows whether anything valid follows in later segments; the scan reports whether an
intact frame follows *in this segment* (``Damage.resumes_at``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from journal.errors import FrameError, PayloadError
from journal.fileops import TEMP_SUFFIX, FileOps, close_quietly, remove_quietly, write_all
from journal.framing import (
    FRAME_HEADER_SIZE,
    decode_frame,
    encode_frame,
    find_next_frame,
    intact_frame_end,
    intact_frames,
)
from journal.records import (
    EventsReader,
    Record,
    RecordDecoder,
    RecordEventsDecoder,
    SegmentHeader,
    decode_segment_header,
    encode_segment_header,
    record_seq_at,
)
from journal.syncer import Syncer

__all__ = [
    "SEGMENT_SUFFIX",
    "Damage",
    "SegmentLeftBehind",
    "SegmentReader",
    "SegmentScan",
    "create_segment",
    "list_segments",
    "parse_segment_name",
    "scan_segment",
    "segment_name",
]

SEGMENT_SUFFIX = ".seg"
_SEGMENT_NAME = re.compile(r"^(\d{16})\.seg$")


def segment_name(first_seq: int) -> str:
    """File name of the segment whose first record is ``first_seq``.

    1 → ``0000000000000001.seg``.
    """
    return f"{first_seq:016d}{SEGMENT_SUFFIX}"


def parse_segment_name(name: str) -> int | None:
    """The first sequence number a segment file name announces, or None if it is not one."""
    match = _SEGMENT_NAME.match(name)
    return int(match.group(1)) if match else None


def list_segments(fs: FileOps, directory: str) -> list[tuple[int, str]]:
    """``(first_seq, path)`` of every segment in ``directory``, oldest first."""
    found = []
    for name in fs.listdir(directory):
        first = parse_segment_name(name)
        if first is not None:
            found.append((first, os.path.join(directory, name)))
    return sorted(found)


@dataclass(frozen=True, slots=True)
class Damage:
    """Where and how a segment stops being readable.

    Attributes:
        offset: start of the damaged frame (or of the intact frame that is out of place).
        expected_seq: the sequence number a record at that offset should carry.
        reason: what is wrong.
        frame_damaged: True when the frame itself is cut short or fails a checksum — the only
            damage a crash in the middle of a write can leave; False for an intact frame with
            the wrong content (never a torn write).
        resumes_at: offset of the next intact frame after the damage in this segment, or None.
    """

    offset: int
    expected_seq: int
    reason: str
    frame_damaged: bool
    resumes_at: int | None

    @property
    def could_be_torn_write(self) -> bool:
        """True when nothing intact follows in this segment and the frame itself is damaged."""
        return self.frame_damaged and self.resumes_at is None


@dataclass(slots=True)
class SegmentScan:
    """What reading one segment found.

    Attributes:
        path: the segment file.
        header: its header.
        header_end: offset of the first record frame.
        size: length of the file.
        records: the records read, in order.
        offsets: where each record's frame starts, parallel to ``records``.
        end: offset just after the last intact record frame read before any damage.
        damage: the damage met, in order (at most one unless the scan resynchronises).
        passed_seq: the seq of the last record passed over unkept (read before ``from_seq``,
            ``scan_segment``), or 0 when none was.
    """

    path: str
    header: SegmentHeader
    header_end: int
    size: int
    records: list[Record] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    end: int = 0
    damage: list[Damage] = field(default_factory=list)
    passed_seq: int = 0

    @property
    def next_seq(self) -> int:
        """The sequence number the next record after this segment's last one carries."""
        if self.records:
            return self.records[-1].seq + 1
        return max(self.header.first_seq, self.passed_seq + 1)


class SegmentHeaderError(Exception):
    """The header frame of a segment is damaged or is not a segment header."""


def read_segment_header(data: bytes) -> tuple[SegmentHeader, int]:
    """Decode the header frame at the start of a segment's bytes.

    Returns:
        The header and the offset just after it.

    Raises:
        SegmentHeaderError: the frame is damaged or does not hold a segment header.
    """
    try:
        payload, end = decode_frame(data, 0)
        return decode_segment_header(payload), end
    except (FrameError, PayloadError) as exc:
        raise SegmentHeaderError(f"segment header: {exc}") from exc


class SegmentReader:
    """Reads one segment's records in file order, frame by frame, as an iterator.

    ``records()`` yields each record as its frame is read, so a caller that keeps none of
    them (``read_records`` feeding a timeline) holds one record at a time instead of the whole
    segment's; holding them all made the cyclic garbage collector walk every record again and
    again, which was most of the cost of reading a journal (bench/bench_wire.py, replay rows).
    The rules are ``scan_segment``'s, which is this reader collected into lists.

    Attributes:
        path: the segment file.
        header: its header.
        header_end: offset of the first record frame.
        size: length of the file.
        end: offset just after the last intact record frame read before any damage (final once
            ``records()`` is exhausted).
        damage: the damage met so far, in order (at most one unless resynchronising).
        passed_seq: the seq of the last record passed over unkept (before ``from_seq``), or 0.
    """

    __slots__ = (
        "_data",
        "_decoder",
        "_from_seq",
        "_resync",
        "damage",
        "end",
        "header",
        "header_end",
        "passed_seq",
        "path",
        "size",
    )

    def __init__(
        self,
        data: bytes,
        path: str,
        *,
        resync: bool = False,
        from_seq: int = 0,
        causes: bool = True,
        events: EventsReader | None = None,
    ) -> None:
        """Read the header frame.

        Args:
            data: the segment's bytes.
            path: its file name, carried into the result.
            resync: False (recovery) stops at the first damage; True (``verify``) steps over
                damage to the next intact frame and keeps reading, so that all damage is
                reported.
            from_seq: the first record the caller needs (recovery: the one after its
                checkpoint); records before it are not yielded. One whose frame is intact
                and whose first bytes carry the seq that belongs there
                (``journal.records.record_seq``) is passed over without decoding the rest of
                it: decoding the records a checkpoint covers was most of a restart's reading.
                Anything else about such a record (another layout, another seq, damage just
                before it) is judged by decoding it, as without ``from_seq``.
            causes: False gives each record with an empty ``cause``, stepped over unbuilt
                (``journal.records.decode_record_events``), for a caller that replays the
                events only; what is damage is the same.
            events: with ``causes`` False, the caller's decoding of each record's events,
                applied as it is read (``journal.records.decode_record_events``).

        Raises:
            SegmentHeaderError: the header frame is damaged.
        """
        self.header, self.header_end = read_segment_header(data)
        self.path = path
        self.size = len(data)
        self.end = self.header_end
        self.damage: list[Damage] = []
        self.passed_seq = 0
        self._data = data
        self._resync = resync
        self._from_seq = from_seq
        # One decoder, and its one msgpack unpacker, for the whole segment's records.
        self._decoder = RecordDecoder() if causes else RecordEventsDecoder(events)

    def records(self) -> Iterator[tuple[Record, int]]:
        """Yield ``(record, offset of its frame)`` in file order; call it once.

        Stops at the first damage (or, resynchronising, at the end of the file); what was met
        is in ``damage`` when the iteration ends.
        """
        data, resync, from_seq = self._data, self._resync, self._from_seq
        size = len(data)
        offset = self.header_end
        expected = self.header.first_seq
        skipped_damage = False  # stepped over a damaged frame: how many records it held is unknown
        # Each frame is checked in place (intact_frame_end) and its payload read where it lies
        # by this reader's one decoder; a frame that is not intact goes through decode_frame,
        # whose error is the damage's reason.
        view = memoryview(data)
        decoder = self._decoder
        if expected < from_seq:
            offset, expected = self._pass_over(view, offset, expected)
        while offset < size:
            frame_end = intact_frame_end(data, view, offset)
            if frame_end is None:
                try:
                    _, frame_end = decode_frame(data, offset)  # raises: the frame is damaged
                except FrameError as exc:
                    resumes = find_next_frame(data, offset + 1)
                    self.damage.append(Damage(offset, expected, exc.reason, True, resumes))
                    if not resync or resumes is None:
                        return
                    offset = resumes
                    skipped_damage = True
                    continue
            start = offset + FRAME_HEADER_SIZE
            if (
                expected < from_seq
                and not skipped_damage
                and record_seq_at(data, start, frame_end) == expected
            ):
                # Not needed by the caller, and in its place: passed over (``from_seq``).
                if not self.damage:
                    self.end = frame_end
                self.passed_seq = expected
                expected += 1
                offset = frame_end
                continue
            problem, record = _record_problem(
                view[start:frame_end], expected, after_damage=skipped_damage, decoder=decoder
            )
            skipped_damage = False
            if problem:
                self.damage.append(Damage(offset, expected, problem, False, offset))
                if not resync:
                    return
                if record is None:
                    offset = frame_end
                    continue
            assert record is not None
            if not self.damage:
                self.end = frame_end
            if record.seq < from_seq:
                self.passed_seq = record.seq
            else:
                yield record, offset
            expected = record.seq + 1
            offset = frame_end

    def _pass_over(self, view: memoryview, offset: int, expected: int) -> tuple[int, int]:
        """Pass over the records before ``from_seq`` from ``offset`` on that are intact and in
        place, as the frame-by-frame reading does (``__init__``, ``from_seq``), in one loop
        over the frames (``journal.framing.intact_frames``); returns where it stopped and the
        seq that belongs there, for the frame-by-frame reading to go on from (and judge
        whatever stopped it)."""
        data, from_seq = self._data, self._from_seq
        for start, frame_end in intact_frames(data, view, offset):
            if expected >= from_seq or record_seq_at(data, start, frame_end) != expected:
                break
            self.end = frame_end
            self.passed_seq = expected
            expected += 1
            offset = frame_end
        return offset, expected


def scan_segment(
    data: bytes,
    path: str,
    *,
    resync: bool = False,
    from_seq: int = 0,
    causes: bool = True,
    events: EventsReader | None = None,
) -> SegmentScan:
    """Read every record of one segment (from ``from_seq`` on).

    Args:
        data: the segment's bytes.
        path: its file name, carried into the result.
        resync: False (recovery) stops at the first damage; True (``verify``) steps over damage
            to the next intact frame and keeps reading, so that all damage is reported.
        from_seq: records before it are checked by frame and seq only and not kept
            (``SegmentReader``); ``passed_seq`` says up to where.
        causes: False reads each record's cause as an empty map (``SegmentReader``).
        events: with ``causes`` False, applied to each record's events (``SegmentReader``).

    Returns:
        The scan; ``damage`` is empty when the segment reads cleanly to its last byte.

    Raises:
        SegmentHeaderError: the header frame is damaged.
    """
    reader = SegmentReader(
        data, path, resync=resync, from_seq=from_seq, causes=causes, events=events
    )
    scan = SegmentScan(
        path=path, header=reader.header, header_end=reader.header_end, size=reader.size
    )
    records, offsets = scan.records, scan.offsets
    for record, offset in reader.records():
        records.append(record)
        offsets.append(offset)
    scan.end = reader.end
    scan.damage = reader.damage
    scan.passed_seq = reader.passed_seq
    return scan


def _record_problem(
    payload: bytes | memoryview,
    expected: int,
    *,
    after_damage: bool,
    decoder: RecordDecoder | RecordEventsDecoder,
) -> tuple[str, Record | None]:
    try:
        record = decoder.decode(payload)
    except PayloadError as exc:
        return str(exc), None
    if after_damage and record.seq > expected:
        return "", record  # the records in between are the damage already reported
    if record.seq != expected:
        return f"record carries seq {record.seq} where seq {expected} belongs", record
    return "", record


def create_segment(
    fs: FileOps, syncer: Syncer, directory: str, header: SegmentHeader
) -> tuple[str, int, int]:
    """Create a segment holding only its header, atomically, and open it for appending.

    The header is written to a temporary file, made durable, then renamed into place, so a
    segment file either exists with a complete header or not at all.

    Args:
        fs: the file-system seam.
        syncer: fsyncs per the durability setting.
        directory: the journal directory.
        header: the new segment's header.

    Returns:
        ``(path, fd, header_end)``: the segment, a descriptor open for appending, and its length.

    Raises:
        SegmentLeftBehind: the directory fsync after the rename failed and the segment could
            not be taken back: it may exist.
        OSError: any other step failed; the temporary file is removed and no segment exists.
    """
    path = os.path.join(directory, segment_name(header.first_seq))
    temp = path + TEMP_SUFFIX
    frame = encode_frame(encode_segment_header(header))
    fd = fs.open_append(temp, create=True)
    # Every failure below closes the descriptor before it goes on (not only an ``OSError``:
    # whatever the caller makes of the failure, it never holds this segment open), and a
    # failing close does not hide the failure being reported.
    try:
        write_all(fs, fd, frame)
        syncer.sync_file(fd, temp)
        fs.rename(temp, path)
    except BaseException:
        close_quietly(fs, fd)
        remove_quietly(fs, temp)
        raise
    # fsync the directory: the new segment's name is not durable until its directory entry is,
    # and records fsynced into a file whose name a power loss forgets would be lost with it.
    try:
        syncer.sync_dir(directory)
    except OSError as exc:
        close_quietly(fs, fd)
        _take_back(fs, syncer, directory, path, exc)
        raise
    except BaseException:
        close_quietly(fs, fd)
        raise
    return path, fd, len(frame)


class SegmentLeftBehind(OSError):  # noqa: N818 (a state of the disk, like TornTail)
    """A new segment was renamed into place, and neither its name could be made durable nor
    the segment removed again: the previous segment must take no record from its first seq on.
    """


def _take_back(fs: FileOps, syncer: Syncer, directory: str, path: str, cause: OSError) -> None:
    """Remove a segment renamed into place whose directory fsync failed, durably.

    Left there, it would start at the seq the writer then appends to the previous segment, and
    the next start would refuse the journal (two segments holding that seq).

    Raises:
        SegmentLeftBehind: the removal, or its directory fsync, failed too.
    """
    try:
        fs.unlink(path)
        syncer.sync_dir(directory)
    except OSError as exc:
        raise SegmentLeftBehind(
            f"segment {path} was renamed into place, but its directory fsync failed ({cause}) "
            f"and it could not be removed again ({exc})"
        ) from exc
