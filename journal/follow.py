"""Following a live journal: every record once, in seq order, as the writer appends it.

``JournalFollower`` is what ``qrmd journal show --follow`` reads with. It takes no lock and
never writes; the writer may rotate segments, write checkpoints, let retention delete old
segments, or stop and be replaced by a new process (whose recovery cuts a torn tail) while it
reads. Its rules:

1. Position is the seq. The follower keeps the newest seq it yielded and never yields that seq
   or an older one again; the file and offset of that record are only a shortcut to resume
   from, trusted after the frame there is checked to be the very same bytes.
2. A frame the writer has not finished — cut short, or failing a checksum with nothing intact
   after it, at the end of the newest segment (a torn tail, which a restarting writer cuts) —
   is not a record yet: the pass ends before it and a later pass reads it whole.
3. Nothing is skipped without a word. Seqs the follower will never yield are told to
   ``on_skip``: seqs that retention deleted before they were read (the oldest kept segment
   starts after them and a checkpoint on disk covers them), and a journal cut back or replaced
   under it (the record it yielded last is no longer there). Any other missing seqs are damage:
   a segment that does not start where the previous one ends, or the oldest segment starting
   after seqs no checkpoint covers (deleted by hand), like damage inside a segment, raise
   ``CorruptRecord`` — or, with ``on_damage``, are reported as a ``Gap`` and read past, once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from journal.checkpoints import list_checkpoints
from journal.errors import CorruptRecord, FrameError, PayloadError
from journal.fileops import FileOps, OsFileOps
from journal.forensics import Gap
from journal.framing import FRAME_HEADER_SIZE, decode_frame, find_next_frame
from journal.records import Record, decode_record
from journal.segments import SegmentHeaderError, list_segments, read_segment_header

__all__ = ["JournalFollower", "Skipped"]


@dataclass(frozen=True, slots=True)
class Skipped:
    """Seqs the follower passed over and will never yield (rule 3).

    Attributes:
        first_seq: the oldest of them.
        last_seq: the newest of them.
        reason: what and why, in words, with the seqs and files.
    """

    first_seq: int
    last_seq: int
    reason: str


@dataclass(frozen=True, slots=True)
class _Position:
    """Where the last yielded record's frame is: a shortcut, checked before it is used."""

    path: str
    offset: int
    frame_header: bytes  # magic, length and both checksums: the frame's identity


class JournalFollower:
    """Yields a live journal's new records, pass by pass (module docstring for the rules)."""

    def __init__(
        self,
        directory: str,
        after_seq: int | None,
        *,
        fs: FileOps | None = None,
        on_skip: Callable[[Skipped], None],
        on_damage: Callable[[Gap], None] | None = None,
    ) -> None:
        """Follow ``directory`` from the record after ``after_seq``.

        Args:
            directory: the journal directory.
            after_seq: the newest seq already shown; None for every record the journal keeps
                (the oldest ones retention deleted are not a skip then).
            fs: the file-system seam (default the real one).
            on_skip: told of seqs passed over (rule 3).
            on_damage: told of each damage read past, once; None (the default) raises
                ``CorruptRecord`` instead.
        """
        self.directory = directory
        self._fs = fs or OsFileOps()
        self._last = after_seq
        self._position: _Position | None = None
        self._on_skip = on_skip
        self._on_damage = on_damage
        self._damage_seen: set[tuple[str, int]] = set()
        self._pending: list[Gap] = []
        # The seq the next segment must start at; None after damage at a segment's end, when
        # how many records it lost is unknown (``verify`` does not check it either).
        self._next_segment_seq: int | None = None

    @property
    def last_seq(self) -> int | None:
        """The newest seq yielded or passed over (None before the first)."""
        return self._last

    def poll(self) -> Iterator[Record]:
        """One pass: the records appended since the last one, ascending, each once.

        Raises:
            CorruptRecord: damage before the tail (without ``on_damage``).
        """
        segments = list_segments(self._fs, self.directory)
        if not segments:
            return
        try:
            index, base, data, offset, expected = self._start(segments)
            while True:
                path = segments[index][1]
                newest = index + 1 == len(segments)
                yield from self._frames(path, base, data, offset, expected, newest=newest)
                index += 1
                if index == len(segments):
                    return
                base, data, offset, expected = self._open_segment(segments[index])
        except FileNotFoundError as exc:
            # Retention deleted a segment after it was listed: the next pass lists again, and
            # what was deleted before it was read is told to on_skip then.
            if self._position is not None and self._position.path == exc.filename:
                self._position = None

    def _start(self, segments: list[tuple[int, str]]) -> tuple[int, int, bytes, int, int | None]:
        """``(segment index, base offset, bytes from base, offset in them, expected seq)``."""
        position = self._position
        if position is not None and self._last is not None:
            paths = [path for _, path in segments]
            if position.path in paths:
                data = self._fs.read_from(position.path, position.offset)
                if _same_frame(data, position.frame_header):
                    _, end = decode_frame(data, 0)
                    return paths.index(position.path), position.offset, data, end, self._last + 1
                self._on_skip(
                    Skipped(
                        self._last,
                        self._last,
                        f"seq {self._last}, already shown, is no longer in {position.path}: "
                        f"the journal was cut back (qrmd journal repair) or replaced; records "
                        f"it holds again up to seq {self._last} are not shown (`qrmd journal "
                        f"show {self.directory} --to-seq {self._last}` shows them)",
                    )
                )
            # The segment is gone (retention deleted it once it was read) or was rewritten:
            # find the next seq by the segments' names.
            self._position = None
        want = 1 if self._last is None else self._last + 1
        holding = [index for index, (first, _) in enumerate(segments) if first <= want]
        if holding:
            index = holding[-1]
        else:
            index = 0
            if self._last is not None:
                self._passed_over(want, segments[0])
        self._next_segment_seq = None
        base, data, offset, expected = self._open_segment(segments[index])
        return index, base, data, offset, expected

    def _passed_over(self, want: int, oldest: tuple[int, str]) -> None:
        """The oldest kept segment starts after ``want``: say who took the seqs before it."""
        first, path = oldest
        covering = [
            seq for seq, _ in list_checkpoints(self._fs, self.directory) if seq >= first - 1
        ]
        if covering:
            self._on_skip(
                Skipped(
                    want,
                    first - 1,
                    f"{_seqs(want, first - 1)} deleted by retention before they were read "
                    f"(the checkpoint at seq {covering[0]} covers them); {path} is the oldest "
                    f"segment kept",
                )
            )
            self._last = first - 1
            return
        self._damage(
            Gap(
                path,
                0,
                want,
                first,
                f"the oldest segment starts at seq {first} and no checkpoint covers seqs "
                f"{want}-{first - 1}: they were deleted, not by retention",
            )
        )
        self._flush_pending(first)
        self._last = first - 1

    def _open_segment(self, segment: tuple[int, str]) -> tuple[int, bytes, int, int | None]:
        """Read a whole segment: ``(base 0, its bytes, first record offset, expected seq)``.

        The expected seq is None when the header is unreadable: any seq is taken then.
        """
        named_first, path = segment
        data = self._fs.read_file(path)
        expected = self._next_segment_seq
        try:
            header, header_end = read_segment_header(data)
        except SegmentHeaderError as exc:
            self._damage(Gap(path, 0, expected or named_first, None, str(exc)))
            return 0, b"", 0, None
        first = header.first_seq
        if expected is not None and first != expected:
            self._damage(
                Gap(
                    path,
                    0,
                    expected,
                    first,
                    f"segment starts at seq {first}, the previous one ends at seq {expected - 1}"
                    + (f": seqs {expected}-{first - 1} are missing" if first > expected else ""),
                )
            )
            self._flush_pending(first)
        return 0, data, header_end, first

    def _frames(
        self, path: str, base: int, data: bytes, offset: int, expected: int | None, *, newest: bool
    ) -> Iterator[Record]:
        """The records of one segment's bytes from ``offset`` (``expected`` None: any seq).

        Sets the seq the next segment must start at.
        """
        after_damage = expected is None
        expected = expected or 0
        ends_damaged = after_damage
        size = len(data)
        while offset < size:
            try:
                payload, end = decode_frame(data, offset)
            except FrameError as exc:
                resumes = find_next_frame(data, offset + 1)
                if newest and resumes is None:
                    break  # rule 2: being written (or torn, for the next writer to cut)
                self._damage(Gap(path, base + offset, expected, None, exc.reason))
                if resumes is None:
                    ends_damaged = True
                    break
                offset, after_damage = resumes, True
                continue
            try:
                record = decode_record(payload)
            except PayloadError as exc:
                self._damage(Gap(path, base + offset, expected, None, str(exc)))
                offset, ends_damaged = end, True
                continue
            if record.seq != expected and not (after_damage and record.seq > expected):
                self._damage(
                    Gap(
                        path,
                        base + offset,
                        expected,
                        None,
                        f"record carries seq {record.seq} where seq {expected} belongs",
                    )
                )
                offset, ends_damaged = end, True
                continue
            after_damage = ends_damaged = False
            self._flush_pending(record.seq)
            expected = record.seq + 1
            if self._last is None or record.seq > self._last:
                self._last = record.seq
                header = data[offset : offset + FRAME_HEADER_SIZE]
                self._position = _Position(path, base + offset, header)
                yield record
            offset = end
        self._flush_pending(None)
        self._next_segment_seq = None if ends_damaged else expected

    def _damage(self, gap: Gap) -> None:
        """Raise, or (with ``on_damage``) hold it until the next record's seq is known."""
        if self._on_damage is None:
            raise CorruptRecord(
                gap.path, gap.offset, gap.first_missing_seq, gap.reason, directory=self.directory
            )
        if (gap.path, gap.offset) not in self._damage_seen:
            self._damage_seen.add((gap.path, gap.offset))
            self._pending.append(gap)

    def _flush_pending(self, resumed_at_seq: int | None) -> None:
        if self._on_damage is None:
            return
        for gap in self._pending:
            resumed = gap.resumed_at_seq if gap.resumed_at_seq is not None else resumed_at_seq
            self._on_damage(Gap(gap.path, gap.offset, gap.first_missing_seq, resumed, gap.reason))
        self._pending.clear()


def _seqs(first: int, last: int) -> str:
    return f"seq {first} was" if first == last else f"seqs {first}-{last} were"


def _same_frame(data: bytes, frame_header: bytes) -> bool:
    """Whether ``data`` starts with the intact frame whose header is ``frame_header``."""
    if data[:FRAME_HEADER_SIZE] != frame_header:
        return False
    try:
        decode_frame(data, 0)
    except FrameError:
        return False
    return True
