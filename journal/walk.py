"""The one walk over a journal directory for reading it back: a start, then the records after it.

Every tool that reads a journal directory offline (``qrmd.offline``: the forensic questions,
``verify``, the re-runs, the Katalyst export) rebuilds some state at some record the same
way (DESIGN.md, Journal):

1. **A start**: the empty state when record 1 is still kept, or a checkpoint's state. A
   checkpoint can start the walk when the records after it are all kept (its seq + 1 is at
   least the first kept record's) and, when the walk must stop before some record, when it
   covers no more than that. :func:`find_start` picks the newest such checkpoint (a re-run of
   one record replays the fewest records) or the oldest (the forensic timeline reaches as far
   back as the journal allows); a checkpoint that cannot be read or decoded is stepped over
   to the next, and the empty state ends the search when record 1 is kept.
2. **The records after it**, streamed in seq order (``read_records``), each applied to the
   state before it: :func:`steps` yields the record with the state on either side,
   :func:`replay_to` only the state at the end, in one batch.

The journal stays generic: what a state is, how a checkpoint's payload becomes one and how a
record's events apply to it is a :class:`Replayer`'s — the state codec's per-section registry
in ``policy.state.replay`` (the whole state, or one owner's section alone). Nothing here takes
the writer's lock or writes: a live node's directory, or a copy taken off it, can be read.

The daemon's own recovery does not walk: it opens the journal for writing (``recover`` cuts a
torn tail and refuses damage) and replays with the same replayer functions.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from journal.checkpoints import list_checkpoints, load_checkpoint
from journal.errors import JournalError
from journal.fileops import FileOps, OsFileOps
from journal.forensics import read_records
from journal.records import Record
from journal.recovery import collector_paused

__all__ = [
    "NoStart",
    "Replayer",
    "Span",
    "Start",
    "Step",
    "find_start",
    "replay_to",
    "span",
    "steps",
]

S = TypeVar("S")


class Replayer(Protocol[S]):
    """How a state of type ``S`` is started and carried through records.

    Each method raises its own error for what does not decode or fit (the state codec's
    ``ReplayError``, naming the seq); the walk lets it through.
    """

    def empty(self) -> S:
        """The state before record 1."""
        ...

    def from_checkpoint(self, payload: Any, seq: int) -> S:
        """The state a checkpoint's payload holds, the checkpoint covering records to ``seq``."""
        ...

    def apply(self, state: S, records: Sequence[Record]) -> S:
        """``state`` after ``records`` (consecutive, ascending), all of each or none."""
        ...


class NoStart(JournalError):  # noqa: N818 (what it is: no start, not a failure to start)
    """Records were retired and no readable checkpoint covers them (or none early enough).

    Attributes:
        directory: the journal directory.
        first_seq: the first kept record.
        at_most: the seq the start had to cover no more than, or None.
    """

    def __init__(self, directory: str, first_seq: int, at_most: int | None) -> None:
        bound = "" if at_most is None else f" at or before seq {at_most}"
        super().__init__(
            f"records before seq {first_seq} of {directory} were retired and no readable "
            f"checkpoint{bound} covers them"
        )
        self.directory = directory
        self.first_seq = first_seq
        self.at_most = at_most


@dataclass(frozen=True, slots=True)
class Span:
    """What records a journal keeps: the first and the last readable one (None when none)."""

    first: Record | None
    last: Record | None


@dataclass(frozen=True, slots=True)
class Start(Generic[S]):
    """Where a walk starts.

    Attributes:
        seq: the last record the state covers (0 for the empty state).
        state: the state.
        path: the checkpoint it was read from; None for the empty state.
    """

    seq: int
    state: S
    path: str | None = None


@dataclass(frozen=True, slots=True)
class Step(Generic[S]):
    """One record and the state on either side of it."""

    record: Record
    before: S
    after: S


def span(directory: str, *, whole: bool = True, fs: FileOps | None = None) -> Span:
    """The first kept record and, with ``whole``, the last readable one (reading every
    record, one at a time); without ``whole`` only the first segment is read.

    Raises:
        JournalError: not a journal directory, or damage before the tail (as
            ``read_records``).
    """
    first = last = None
    for record in read_records(directory, fs=fs):
        if first is None:
            first = record
            if not whole:
                break
        last = record
    return Span(first, last if whole else None)


def find_start(
    directory: str,
    replayer: Replayer[S],
    first_seq: int | None,
    *,
    at_most: int | None = None,
    newest: bool = True,
    skip: tuple[type[Exception], ...] = (JournalError,),
    fs: FileOps | None = None,
) -> Start[S]:
    """Where to start rebuilding the state (module docstring, point 1).

    Args:
        directory: the journal directory.
        replayer: how the state is started.
        first_seq: the first kept record (``span(...).first``), or None when the journal
            keeps none. A checkpoint with ``seq + 1 < first_seq`` cannot start a walk.
        at_most: the start must cover no record after this one; None: no bound.
        newest: the newest usable checkpoint (True), or the oldest (False); with False, the
            empty state comes first when record 1 is kept.
        skip: the errors that make a checkpoint unusable, stepped over to the next one; any
            other error of reading or decoding one propagates.
        fs: the file-system seam (default the real one).

    Returns:
        The start.

    Raises:
        NoStart: records were retired and no usable checkpoint covers them within
            ``at_most``.
    """
    fs = fs or OsFileOps()
    whole = first_seq is None or first_seq <= 1
    if whole and not newest:
        return Start(0, replayer.empty())
    candidates = [
        (seq, path)
        for seq, path in list_checkpoints(fs, directory)
        if (first_seq is None or seq + 1 >= first_seq) and (at_most is None or seq <= at_most)
    ]
    for seq, path in reversed(candidates) if newest else candidates:
        try:
            with collector_paused():  # a checkpoint is thousands of entries
                payload = load_checkpoint(fs, path).state
                return Start(seq, replayer.from_checkpoint(payload, seq), path)
        except skip:
            continue
    if whole:
        return Start(0, replayer.empty())
    assert first_seq is not None
    raise NoStart(directory, first_seq, at_most)


def steps(
    directory: str,
    replayer: Replayer[S],
    start: Start[S],
    to_seq: int | None = None,
    *,
    fs: FileOps | None = None,
) -> Iterator[Step[S]]:
    """Every record after ``start`` up to ``to_seq`` (inclusive; None: the newest), with the
    state before and after it, one record in memory at a time.

    Raises:
        JournalError: a record cannot be read (as ``read_records``).
        Exception: the replayer's error for a record that does not decode or fit.
    """
    state = start.state
    for record in read_records(directory, start.seq + 1, to_seq, fs=fs):
        after = replayer.apply(state, (record,))
        yield Step(record, state, after)
        state = after


def replay_to(
    directory: str,
    replayer: Replayer[S],
    start: Start[S],
    to_seq: int | None = None,
    *,
    fs: FileOps | None = None,
) -> tuple[S, int]:
    """The state after record ``to_seq`` (None: the newest readable), and the seq it covers.

    The records are applied in one batch, the collector paused (``collector_paused``, the
    why): the fastest way to one state.

    Raises:
        JournalError: a record cannot be read, or the records do not follow ``start``
            (a gap retention left).
        Exception: the replayer's error for a record that does not decode or fit.
    """
    records: list[Record] = []
    with collector_paused():
        for record in read_records(directory, start.seq + 1, to_seq, fs=fs):
            if not records and record.seq != start.seq + 1:
                raise JournalError(
                    f"records {start.seq + 1}-{record.seq - 1} are gone from {directory} and "
                    f"no checkpoint covers them"
                )
            records.append(record)
        if not records:
            return start.state, start.seq
        return replayer.apply(start.state, records), records[-1].seq
