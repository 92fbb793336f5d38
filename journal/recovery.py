"""Recovery: the newest valid checkpoint plus the records after it, and what to do with damage.

The rule (DESIGN.md, Journal):

1. Checkpoints are tried newest first. One that fails its checks is skipped (and reported), and
   so is one whose following records are no longer on disk; with none usable, replay starts
   from the first record, which must then still exist.
2. Every segment holding a record after the chosen checkpoint is read in order; each must start
   where the previous one ended.
3. A torn tail — the newest segment's last frame cut short or failing its checksum, with no
   intact frame after it — is what a crash mid-write leaves: that record was never acknowledged.
   It is truncated and the cut bytes are kept in ``<segment>.broken``; a read-only open only
   reports it.
4. Damage in history the chosen checkpoint covers — records up to its seq, which recovery
   does not need — is stepped over when it shares a segment with records recovery does need:
   the segment is read on from the next intact frame, every record after the checkpoint must
   then be there in sequence, and the unreadable seq range is reported
   (``Recovery.damaged_history``, logged as a warning by the writer) while start proceeds.
   Only frames the checkpoint provably covers are stepped over: the intact record after the
   damage must carry a seq no newer than the first one recovery needs.
5. Any other damage is corruption before the tail and is never skipped: ``CorruptRecord`` names
   the file, the offset and the sequence number. Damage after the newest valid checkpoint
   therefore still refuses start.
6. A journal written on another machine (node name or topology fingerprint) is refused with
   ``JournalMismatch`` unless opened read-only.

Segments older than the chosen checkpoint's are not read here (they are forensic history;
``verify`` checks them). In the segment holding the first record after the checkpoint, the
records the checkpoint covers are checked by their frames' checksums and their seqs only and
not decoded (``journal.segments.SegmentReader``, ``from_seq``); one that is not in place or
not laid out as this qrmd writes records is decoded and judged by rules 3-5.
"""

from __future__ import annotations

import contextlib
import gc
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from journal.checkpoints import Checkpoint, list_checkpoints, load_checkpoint
from journal.clock import Clock
from journal.errors import CorruptCheckpoint, CorruptRecord, JournalError, JournalMismatch, TornTail
from journal.fileops import TEMP_SUFFIX, FileOps, remove_quietly, write_all
from journal.records import EventsReader, Record
from journal.segments import (
    SegmentHeaderError,
    SegmentScan,
    list_segments,
    read_segment_header,
    scan_segment,
)
from journal.syncer import Syncer

__all__ = [
    "HistoryDamage",
    "Recovery",
    "SkippedCheckpoint",
    "TailPosition",
    "broken_path_for",
    "collector_paused",
    "recover",
    "step_over_history",
]


@dataclass(frozen=True, slots=True)
class SkippedCheckpoint:
    """A checkpoint recovery could not use, and why."""

    path: str
    reason: str


@dataclass(frozen=True, slots=True)
class HistoryDamage:
    """Records a valid checkpoint covers that cannot be read; recovery did not need them (rule 4).

    Attributes:
        path: the segment holding the damage.
        offset: where the damage starts in it.
        first_seq: the oldest unreadable seq.
        last_seq: the newest unreadable seq.
        reason: what is wrong with the frame there.
    """

    path: str
    offset: int
    first_seq: int
    last_seq: int
    reason: str

    def describe(self) -> str:
        """The damage in words, for the warning at start and for ``repair``."""
        seqs = (
            f"seq {self.first_seq}"
            if self.first_seq == self.last_seq
            else f"seqs {self.first_seq}-{self.last_seq}"
        )
        return f"{seqs} unreadable in {self.path} at offset {self.offset} ({self.reason})"


@dataclass(frozen=True, slots=True)
class Recovery:
    """What opening the journal found and did.

    Attributes:
        directory: the journal directory.
        checkpoint_seq: the seq the chosen checkpoint covers, or None (replay from empty).
        checkpoint_state: the chosen checkpoint's state payload, or None.
        checkpoint_path: the chosen checkpoint file, or None.
        records: the records after the checkpoint, in order: apply them to its state (their
            causes empty when recovered with ``causes=False``, their events as an ``events``
            reader kept them when one was given).
        last_seq: the newest record's seq (0 for an empty journal); the next append gets +1.
        truncated_bytes: bytes cut from a torn tail (or that would be cut, when read-only).
        broken_path: where the cut bytes were kept, or None.
        torn_tail: the torn tail found, or None.
        skipped_checkpoints: newer checkpoints that could not be used, and why.
        removed_temp_files: leftovers of interrupted checkpoint or segment writes, removed.
        damaged_history: unreadable records the chosen checkpoint covers, stepped over (rule 4).
        node_name: node name in the journal's newest header (None for a new journal).
        topology_fingerprint: topology fingerprint in that header (None for a new journal).
        segments_read: segment files read.
        bytes_read: bytes of segments read.
        elapsed_s: time recovery took, on the journal's clock.
    """

    directory: str
    checkpoint_seq: int | None
    checkpoint_state: Any
    checkpoint_path: str | None
    records: list[Record]
    last_seq: int
    truncated_bytes: int
    broken_path: str | None
    torn_tail: TornTail | None
    skipped_checkpoints: tuple[SkippedCheckpoint, ...]
    removed_temp_files: tuple[str, ...]
    damaged_history: tuple[HistoryDamage, ...]
    node_name: str | None
    topology_fingerprint: str | None
    segments_read: int
    bytes_read: int
    elapsed_s: float


@dataclass(frozen=True, slots=True)
class TailPosition:
    """Where appending resumes: the newest segment and the end of its last intact record."""

    path: str
    first_seq: int
    header_end: int
    end: int
    next_seq: int


@dataclass(frozen=True, slots=True)
class _Identity:
    node_name: str
    topology_fingerprint: str


def recover(
    fs: FileOps,
    syncer: Syncer,
    clock: Clock,
    directory: str,
    *,
    node_name: str,
    topology_fingerprint: str,
    read_only: bool,
    causes: bool = True,
    events: EventsReader | None = None,
) -> tuple[Recovery, TailPosition | None]:
    """Read the journal in ``directory`` back (module docstring for the rules).

    Args:
        fs: the file-system seam.
        syncer: fsyncs the truncation of a torn tail and its ``.broken`` copy.
        clock: times the recovery.
        directory: the journal directory (created when missing, unless read-only).
        node_name: this node's name.
        topology_fingerprint: this node's topology fingerprint.
        read_only: change nothing on disk, and accept another machine's journal.
        causes: False gives ``Recovery.records`` with empty causes, their bytes checked but
            not decoded (a caller that replays the events only: the StateStore).
        events: with ``causes`` False, the caller's decoding of each record's events
            (``journal.records.EventsReader``), applied as the record is read: the StateStore
            decodes a record's events into its state's own values there, and the msgpack of
            every record is not held until the replay.

    Returns:
        The recovery report and where appending resumes (None when there is no segment yet).

    Raises:
        JournalMismatch: another machine's journal, not read-only.
        CorruptRecord: damage before the tail.
        CorruptCheckpoint: no checkpoint usable and the first records are gone.
        JournalError: read-only open of a missing directory.
        OSError: the directory cannot be read, or a torn tail cannot be cut.
    """
    started = clock.monotonic()
    if not fs.exists(directory):
        if read_only:
            raise JournalError(f"no journal at {directory}: the directory does not exist")
        fs.makedirs(directory)
    segments = list_segments(fs, directory)
    expected = _Identity(node_name, topology_fingerprint)
    found: _Identity | None = None
    # The newest segment is always replayed: read it once, for its header and its records.
    newest = fs.read_file(segments[-1][1]) if segments else b""
    if segments:
        found = _newest_segment_identity(directory, segments[-1][1], segments[-1][0], newest)
        _check_identity(directory, found, expected, read_only)
    checkpoint, skipped = _choose_checkpoint(fs, directory, segments, expected, read_only)
    if checkpoint is not None and found is None:
        found = _Identity(checkpoint.header.node_name, checkpoint.header.topology_fingerprint)
    start_seq = checkpoint.seq + 1 if checkpoint is not None else 1
    replay = _replay(fs, directory, segments, start_seq, newest, causes=causes, events=events)
    last_seq = replay.tail.next_seq - 1 if replay.tail is not None else start_seq - 1
    if checkpoint is not None and checkpoint.seq > last_seq:
        # Checked before anything is cut or removed: a refused open changes nothing on disk.
        raise CorruptCheckpoint(
            checkpoint.path,
            f"it covers seq {checkpoint.seq} but the log ends at seq {last_seq}: acknowledged "
            f"records {last_seq + 1}-{checkpoint.seq} are missing from the segments; run "
            f"`qrmd journal verify {directory}`",
        )
    removed = () if read_only else _remove_temp_files(fs, directory)
    torn_tail, broken = _torn_tail(fs, syncer, directory, replay, read_only=read_only)
    recovery = Recovery(
        directory=directory,
        checkpoint_seq=checkpoint.seq if checkpoint is not None else None,
        checkpoint_state=checkpoint.state if checkpoint is not None else None,
        checkpoint_path=checkpoint.path if checkpoint is not None else None,
        records=replay.records,
        last_seq=last_seq,
        truncated_bytes=torn_tail.cut_bytes if torn_tail is not None else 0,
        broken_path=broken,
        torn_tail=torn_tail,
        skipped_checkpoints=tuple(skipped),
        removed_temp_files=removed,
        damaged_history=tuple(replay.history),
        node_name=found.node_name if found is not None else None,
        topology_fingerprint=found.topology_fingerprint if found is not None else None,
        segments_read=replay.segments_read,
        bytes_read=replay.bytes_read,
        elapsed_s=clock.monotonic() - started,
    )
    tail = replay.tail
    if read_only or tail is None:
        return recovery, None
    return recovery, TailPosition(
        tail.path, tail.header.first_seq, tail.header_end, tail.end, tail.next_seq
    )


@dataclass(slots=True)
class _Replayed:
    records: list[Record]
    tail: SegmentScan | None  # the newest segment read
    tail_data: bytes
    segments_read: int
    bytes_read: int
    history: list[HistoryDamage]


def _replay(
    fs: FileOps,
    directory: str,
    segments: list[tuple[int, str]],
    start_seq: int,
    newest: bytes,
    *,
    causes: bool,
    events: EventsReader | None,
) -> _Replayed:
    """Read every segment holding a record from ``start_seq`` on (rules 2-4); ``newest`` is
    the newest segment's content, already read."""
    needed = [s for i, s in enumerate(segments) if _holds_from(segments, i, start_seq)]
    replay = _Replayed([], None, b"", len(needed), 0, [])
    with collector_paused():
        for index, (named_first, path) in enumerate(needed):
            data = newest if index == len(needed) - 1 else fs.read_file(path)
            replay.bytes_read += len(data)
            scan = _scan(
                data,
                path,
                named_first,
                directory,
                start_seq=start_seq,
                causes=causes,
                events=events,
            )
            if scan.damage and scan.damage[0].expected_seq < start_seq:
                scan = step_over_history(scan, data, start_seq, replay.history)
            _check_follows(replay.tail, scan, directory)
            if scan.damage:
                _refuse_unless_torn_tail(scan, directory, is_newest=index == len(needed) - 1)
            replay.records.extend(r for r in scan.records if r.seq >= start_seq)
            replay.tail, replay.tail_data = scan, data
    return replay


def step_over_history(
    scan: SegmentScan, data: bytes, start_seq: int, history: list[HistoryDamage]
) -> SegmentScan:
    """Read a segment on past damage that only covers records before ``start_seq`` (rule 4).

    Returns a scan holding the records read up to the first damage at or after the first
    record recovery needs, with only that damage (if any) left for rules 3 and 5; the stepped
    over damage is added to ``history``. If some damage cannot be shown to lie before
    ``start_seq`` (nothing intact follows it, or what follows is newer than ``start_seq``),
    the original scan is returned unchanged and rule 5 refuses it.
    """
    full = scan_segment(data, scan.path, resync=True)
    # Where what recovery needs begins: its first record, or damage where one belongs.
    needed_at = min(
        [o for r, o in zip(full.records, full.offsets, strict=True) if r.seq >= start_seq]
        + [d.offset for d in full.damage if d.expected_seq >= start_seq]
        + [full.size]
    )
    later = [d for d in full.damage if d.offset >= needed_at]
    cut = later[0].offset if later else full.size
    found: list[HistoryDamage] = []
    for damage in full.damage:
        if damage.offset >= needed_at:
            break
        following = next(
            (r.seq for r, o in zip(full.records, full.offsets, strict=True) if o > damage.offset),
            None,
        )
        if following is None or following > start_seq:
            return scan  # it may hold records recovery needs: corruption (rule 5)
        last = following - 1
        found.append(
            HistoryDamage(
                scan.path, damage.offset, min(damage.expected_seq, last), last, damage.reason
            )
        )
    kept = [(r, o) for r, o in zip(full.records, full.offsets, strict=True) if o < cut]
    needed = [r.seq for r, _ in kept if r.seq >= start_seq]
    if needed != list(range(start_seq, start_seq + len(needed))):
        return scan
    history.extend(found)
    return SegmentScan(
        path=full.path,
        header=full.header,
        header_end=full.header_end,
        size=full.size,
        records=[r for r, _ in kept],
        offsets=[o for _, o in kept],
        end=cut,
        damage=later[:1],
    )


def _torn_tail(
    fs: FileOps, syncer: Syncer, directory: str, replay: _Replayed, *, read_only: bool
) -> tuple[TornTail | None, str | None]:
    """The torn tail found (rule 3), and where its bytes were kept once cut."""
    tail = replay.tail
    if tail is None or not tail.damage:
        return None, None
    damage = tail.damage[0]
    torn = TornTail(
        tail.path, damage.offset, tail.size - damage.offset, damage.expected_seq, damage.reason
    )
    if read_only:
        return torn, None
    broken = _cut_tail(
        fs, syncer, directory, path=tail.path, data=replay.tail_data, offset=damage.offset
    )
    return torn, broken


def broken_path_for(fs: FileOps, segment_path: str) -> str:
    """A fresh name for what is cut from a file: ``<file>.broken``, then ``<file>.2.broken``…"""
    candidate = segment_path + ".broken"
    number = 2
    while fs.exists(candidate):
        candidate = f"{segment_path}.{number}.broken"
        number += 1
    return candidate


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while records (or the state built from them) are
    decoded; nesting is fine, the outermost restores it.

    Decoding a million records allocates millions of dicts and lists, which triggers full
    collections again and again (recovery of 1M records took 57 s instead of a few), each
    walking every record kept so far. Records hold no reference cycles, so nothing is left
    uncollected by pausing: refcounting frees what is dropped, and the collector, enabled
    again, finds any cycle later.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _check_follows(previous: SegmentScan | None, scan: SegmentScan, directory: str) -> None:
    if previous is not None and scan.header.first_seq != previous.next_seq:
        raise CorruptRecord(
            scan.path,
            0,
            previous.next_seq,
            f"segment starts at seq {scan.header.first_seq}, but the previous segment ends "
            f"at seq {previous.next_seq - 1}",
            directory=directory,
        )


def _holds_from(segments: list[tuple[int, str]], index: int, seq: int) -> bool:
    # A segment holds seqs [its first, next segment's first - 1]; the newest one is open-ended.
    return index + 1 == len(segments) or segments[index + 1][0] > seq


def _scan(
    data: bytes,
    path: str,
    named_first: int,
    directory: str,
    *,
    start_seq: int,
    causes: bool,
    events: EventsReader | None,
) -> SegmentScan:
    try:
        # The records the checkpoint covers are checked by frame and seq only (rule 4: history
        # recovery does not need); damage among them is judged as before.
        scan = scan_segment(data, path, from_seq=start_seq, causes=causes, events=events)
    except SegmentHeaderError as exc:
        # Segments are created by rename with their header already durable, so a damaged
        # header is never a torn write.
        raise CorruptRecord(path, 0, named_first, str(exc), directory=directory) from exc
    if scan.header.first_seq != named_first:
        raise CorruptRecord(
            path,
            0,
            named_first,
            f"header says the segment starts at seq {scan.header.first_seq}, its name says "
            f"{named_first}",
            directory=directory,
        )
    return scan


def _refuse_unless_torn_tail(scan: SegmentScan, directory: str, *, is_newest: bool) -> None:
    """Return for a torn tail (rule 3); raise CorruptRecord for anything else (rule 4)."""
    damage = scan.damage[0]
    if is_newest and damage.could_be_torn_write:
        return
    if not damage.frame_damaged:
        why = damage.reason
    elif damage.resumes_at is not None:
        why = f"{damage.reason}; an intact frame follows at offset {damage.resumes_at}"
    else:
        why = f"{damage.reason}; newer segments follow"
    raise CorruptRecord(scan.path, damage.offset, damage.expected_seq, why, directory=directory)


def _cut_tail(
    fs: FileOps, syncer: Syncer, directory: str, *, path: str, data: bytes, offset: int
) -> str:
    # Keep the cut bytes durable *before* cutting them: an operator may want to look at them.
    broken = broken_path_for(fs, path)
    fd = fs.open_append(broken, create=True)
    try:
        write_all(fs, fd, data[offset:])
        syncer.sync_file(fd, broken)
    finally:
        fs.close(fd)
    fd = fs.open_append(path, create=False)
    try:
        fs.truncate(fd, offset)
        syncer.sync_file(fd, path)
    finally:
        fs.close(fd)
    syncer.sync_dir(directory)  # the .broken file's name must survive too
    return broken


def _newest_segment_identity(directory: str, path: str, named_first: int, data: bytes) -> _Identity:
    try:
        header, _ = read_segment_header(data)
    except SegmentHeaderError as exc:
        raise CorruptRecord(path, 0, named_first, str(exc), directory=directory) from exc
    return _Identity(header.node_name, header.topology_fingerprint)


def _check_identity(directory: str, found: _Identity, expected: _Identity, read_only: bool) -> None:
    if found != expected and not read_only:
        raise JournalMismatch(
            directory,
            found_node=found.node_name,
            found_topology=found.topology_fingerprint,
            expected_node=expected.node_name,
            expected_topology=expected.topology_fingerprint,
        )


def _choose_checkpoint(
    fs: FileOps,
    directory: str,
    segments: list[tuple[int, str]],
    expected: _Identity,
    read_only: bool,
) -> tuple[Checkpoint | None, list[SkippedCheckpoint]]:
    skipped: list[SkippedCheckpoint] = []
    oldest_first_seq = segments[0][0] if segments else None
    for _, path in reversed(list_checkpoints(fs, directory)):
        try:
            checkpoint = load_checkpoint(fs, path)
        except CorruptCheckpoint as exc:
            skipped.append(SkippedCheckpoint(path, exc.reason))
            continue
        header = checkpoint.header
        _check_identity(
            directory, _Identity(header.node_name, header.topology_fingerprint), expected, read_only
        )
        if oldest_first_seq is not None and oldest_first_seq > checkpoint.seq + 1:
            skipped.append(
                SkippedCheckpoint(
                    path,
                    f"records after seq {checkpoint.seq} are no longer in the journal (the "
                    f"oldest segment starts at seq {oldest_first_seq})",
                )
            )
            continue
        return checkpoint, skipped
    if oldest_first_seq is not None and oldest_first_seq > 1:
        reasons = "; ".join(f"{os.path.basename(s.path)}: {s.reason}" for s in skipped) or "none"
        raise CorruptCheckpoint(
            directory,
            f"no usable checkpoint (tried: {reasons}) and replay from empty needs records from "
            f"seq 1, but the oldest segment starts at seq {oldest_first_seq}; the state cannot "
            f"be rebuilt. Run `qrmd journal verify {directory}`",
        )
    return None, skipped


def _remove_temp_files(fs: FileOps, directory: str) -> tuple[str, ...]:
    # A .tmp file is a checkpoint or segment whose atomic write was interrupted: by
    # construction it was never renamed into place, so nothing refers to it.
    removed = []
    for name in sorted(fs.listdir(directory)):
        if name.endswith(TEMP_SUFFIX):
            path = os.path.join(directory, name)
            remove_quietly(fs, path)
            removed.append(path)
    return tuple(removed)
