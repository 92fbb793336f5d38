"""Read-only access to a journal directory: iterate its records, verify every byte of it.

Both work on a live journal or on a directory copied off a node, and never modify anything
(the on-call use of DESIGN.md, "Who uses it"). ``verify`` reads *every* segment, including the
forensic history that recovery skips, and every checkpoint, and reports all it finds rather
than stopping at the first problem; ``repair`` (``journal.repair``) acts on its findings.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from journal.checkpoints import list_checkpoints, load_checkpoint
from journal.errors import CorruptCheckpoint, CorruptRecord, JournalError
from journal.fileops import FileOps, OsFileOps
from journal.records import Record
from journal.recovery import HistoryDamage, step_over_history
from journal.segments import (
    SegmentHeaderError,
    SegmentReader,
    SegmentScan,
    list_segments,
    read_segment_header,
    scan_segment,
)

__all__ = [
    "Finding",
    "Gap",
    "JournalIdentity",
    "VerifyReport",
    "journal_identity",
    "read_records",
    "verify",
]


@dataclass(frozen=True, slots=True)
class Gap:
    """Damage that ``read_records(on_damage=...)`` read past.

    Attributes:
        path: the segment file.
        offset: where the damaged bytes start.
        first_missing_seq: the seq the damaged frame should have held.
        resumed_at_seq: the seq of the next record read after it, or None when nothing intact
            follows in that segment.
        reason: what is wrong, in words.
    """

    path: str
    offset: int
    first_missing_seq: int
    resumed_at_seq: int | None
    reason: str


@dataclass(frozen=True, slots=True)
class JournalIdentity:
    """What the oldest readable segment header says wrote the journal."""

    node_name: str
    topology_fingerprint: str


def journal_identity(directory: str, *, fs: FileOps | None = None) -> JournalIdentity | None:
    """The node and topology fingerprint of the oldest segment whose header reads.

    Reads one header per segment at most, never the records (cheap on a large journal).

    Returns:
        The identity, or None when the directory holds no readable segment.

    Raises:
        JournalError: the directory does not exist.
    """
    fs = fs or OsFileOps()
    if not fs.exists(directory):
        raise JournalError(f"no journal at {directory}: the directory does not exist")
    for _, path in list_segments(fs, directory):
        try:
            header, _ = read_segment_header(fs.read_file(path))
        except SegmentHeaderError:
            continue
        return JournalIdentity(header.node_name, header.topology_fingerprint)
    return None


def read_records(
    directory: str,
    from_seq: int | None = None,
    to_seq: int | None = None,
    *,
    fs: FileOps | None = None,
    on_damage: Callable[[Gap], None] | None = None,
) -> Iterator[Record]:
    """Yield the journal's records in order, optionally limited to a seq range.

    A torn tail ends the iteration quietly (its record was never acknowledged); any other
    damage raises when the iteration reaches it — unless ``on_damage`` is given: then the
    iteration steps over it to the next intact record (as ``verify`` does), tells
    ``on_damage`` what was skipped, and goes on. Records read past damage are what the disk
    holds, but recovery would not replay them: that mode is for reading a timeline, never for
    rebuilding state.

    Args:
        directory: the journal directory (a copy is fine).
        from_seq: first seq wanted (inclusive); None for the oldest kept.
        to_seq: last seq wanted (inclusive); None for the newest.
        fs: the file-system seam (default the real one).
        on_damage: called with each gap read past; None (the default) raises instead.

    Yields:
        Records with ``from_seq <= seq <= to_seq``, ascending.

    Raises:
        JournalError: the directory does not exist.
        CorruptRecord: damage before the tail, or segments that do not follow each other.
    """
    fs = fs or OsFileOps()
    if not fs.exists(directory):
        raise JournalError(f"no journal at {directory}: the directory does not exist")
    segments = list_segments(fs, directory)
    low = from_seq if from_seq is not None else 0
    expected: int | None = None
    for index, (named_first, path) in enumerate(segments):
        following = segments[index + 1][0] if index + 1 < len(segments) else None
        if following is not None and following <= low:
            continue  # every record of this segment is older than from_seq
        if to_seq is not None and named_first > to_seq:
            return
        if on_damage is not None:
            try:
                scan = scan_segment(fs.read_file(path), path, resync=True)
            except SegmentHeaderError as exc:
                on_damage(Gap(path, 0, expected or named_first, following, str(exc)))
                expected = following
                continue
            yield from _records_past_damage(scan, low, to_seq, following is None, on_damage)
            expected = scan.next_seq
            continue
        try:
            reader = SegmentReader(fs.read_file(path), path)
        except SegmentHeaderError as exc:
            raise CorruptRecord(path, 0, named_first, str(exc), directory=directory) from exc
        if expected is not None and reader.header.first_seq != expected:
            raise CorruptRecord(
                path,
                0,
                expected,
                f"segment starts at seq {reader.header.first_seq}, expected {expected}",
                directory=directory,
            )
        expected = reader.header.first_seq
        # Records go out as their frames are read: the caller decides what it keeps.
        for record, _ in reader.records():
            expected = record.seq + 1
            if record.seq >= low and (to_seq is None or record.seq <= to_seq):
                yield record
        if reader.damage:
            damage = reader.damage[0]
            if following is None and damage.could_be_torn_write:
                return
            raise CorruptRecord(
                path, damage.offset, damage.expected_seq, damage.reason, directory=directory
            )


def _records_past_damage(
    scan: SegmentScan,
    low: int,
    to_seq: int | None,
    is_newest: bool,
    on_damage: Callable[[Gap], None],
) -> Iterator[Record]:
    """The records of a resynchronised scan, each gap reported where the iteration meets it."""
    gaps = list(scan.damage)
    for index, damage in enumerate(gaps):
        if is_newest and index + 1 == len(gaps) and damage.could_be_torn_write:
            gaps = gaps[:index]  # a torn tail: never acknowledged, not a gap
            break
    for offset, record in zip(scan.offsets, scan.records, strict=True):
        while gaps and gaps[0].offset <= offset:
            damage = gaps.pop(0)
            on_damage(Gap(scan.path, damage.offset, damage.expected_seq, record.seq, damage.reason))
        if record.seq >= low and (to_seq is None or record.seq <= to_seq):
            yield record
    for damage in gaps:
        on_damage(Gap(scan.path, damage.offset, damage.expected_seq, None, damage.reason))


@dataclass(frozen=True, slots=True)
class Finding:
    """One problem ``verify`` found.

    Attributes:
        kind: ``torn_tail``, ``corrupt_record``, ``bad_segment_header``, ``sequence_gap``,
            ``mixed_identity``, ``corrupt_checkpoint``, ``checkpoint_ahead_of_log`` or
            ``no_recovery_start``.
        path: the file concerned.
        offset: byte offset in it, when it applies.
        seq: the sequence number concerned, when it applies.
        message: the problem in words, with the numbers.
        blocks_recovery: True when opening the journal would fail on it (a torn tail does not:
            opening truncates it).
    """

    kind: str
    path: str
    offset: int | None
    seq: int | None
    message: str
    blocks_recovery: bool


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """What ``verify`` found in a journal directory.

    Attributes:
        directory: the journal directory.
        segments: segment files read.
        records: intact records read (including any after damage).
        first_seq: the oldest record kept, or None.
        last_seq: the newest intact record, or None.
        checkpoints: seqs of the checkpoints that passed every check.
        node_name: the node in the first readable segment header, or None.
        topology_fingerprint: its topology fingerprint, or None.
        findings: every problem, in file order.
    """

    directory: str
    segments: int
    records: int
    first_seq: int | None
    last_seq: int | None
    checkpoints: tuple[int, ...]
    node_name: str | None
    topology_fingerprint: str | None
    findings: tuple[Finding, ...]

    @property
    def ok(self) -> bool:
        """True when every checksum passed and the sequence is continuous."""
        return not self.findings


def verify(directory: str, *, fs: FileOps | None = None) -> VerifyReport:
    """Check every checksum, the sequence continuity and every checkpoint; modify nothing.

    Args:
        directory: the journal directory (a copy is fine).
        fs: the file-system seam (default the real one).

    Returns:
        The report; ``report.ok`` when nothing is wrong.

    Raises:
        JournalError: the directory does not exist.
    """
    fs = fs or OsFileOps()
    if not fs.exists(directory):
        raise JournalError(f"no journal at {directory}: the directory does not exist")
    findings: list[Finding] = []
    segments = list_segments(fs, directory)
    identity: tuple[str, str] | None = None
    expected: int | None = None
    first_seq: int | None = None
    last_seq: int | None = None
    records = 0
    for index, (named_first, path) in enumerate(segments):
        is_newest = index + 1 == len(segments)
        try:
            scan = scan_segment(fs.read_file(path), path, resync=True)
        except SegmentHeaderError as exc:
            findings.append(Finding("bad_segment_header", path, 0, named_first, str(exc), True))
            expected = None
            continue
        header = scan.header
        if identity is None:
            identity = (header.node_name, header.topology_fingerprint)
        elif identity != (header.node_name, header.topology_fingerprint):
            findings.append(
                Finding(
                    "mixed_identity",
                    path,
                    0,
                    header.first_seq,
                    f"header names node {header.node_name!r}, topology "
                    f"{header.topology_fingerprint!r}; the first segment names {identity}",
                    True,
                )
            )
        if header.first_seq != named_first:
            findings.append(
                Finding(
                    "sequence_gap",
                    path,
                    0,
                    named_first,
                    f"header says first seq {header.first_seq}, file name says {named_first}",
                    True,
                )
            )
        if expected is not None and header.first_seq != expected:
            findings.append(
                Finding(
                    "sequence_gap",
                    path,
                    0,
                    expected,
                    f"segment starts at seq {header.first_seq}, the previous one ends at seq "
                    f"{expected - 1}: records are missing",
                    True,
                )
            )
        for number, damage in enumerate(scan.damage):
            tail = is_newest and number + 1 == len(scan.damage) and damage.could_be_torn_write
            findings.append(
                Finding(
                    "torn_tail" if tail else "corrupt_record",
                    path,
                    damage.offset,
                    damage.expected_seq,
                    (
                        f"{scan.size - damage.offset} bytes of an unfinished record "
                        f"(seq {damage.expected_seq}): {damage.reason}; opening the journal "
                        f"truncates them, keeping a .broken copy"
                        if tail
                        else f"{damage.reason}"
                        + (
                            f"; intact frames resume at offset {damage.resumes_at}"
                            if damage.resumes_at is not None and damage.frame_damaged
                            else ""
                        )
                    ),
                    not tail,
                )
            )
        if scan.records:
            records += len(scan.records)
            first_seq = scan.records[0].seq if first_seq is None else first_seq
            last_seq = scan.records[-1].seq
        ends_damaged = bool(scan.damage) and (
            not scan.offsets or scan.damage[-1].offset > scan.offsets[-1]
        )
        # After damage at its end, how many records a segment lost is unknown: the damage is
        # the finding, and the next segment's first seq is not checked against it.
        expected = None if ends_damaged else scan.next_seq
    valid_checkpoints = _verify_checkpoints(fs, directory, last_seq, findings)
    findings = _only_needed_segments_block(findings, segments, valid_checkpoints)
    findings = _covered_history_does_not_block(fs, findings, segments, valid_checkpoints)
    oldest = segments[0][0] if segments else None
    if oldest is not None and oldest > 1 and not any(s + 1 >= oldest for s in valid_checkpoints):
        findings.append(
            Finding(
                "no_recovery_start",
                directory,
                None,
                oldest,
                f"no valid checkpoint covers the records before seq {oldest}, which are gone",
                True,
            )
        )
    return VerifyReport(
        directory=directory,
        segments=len(segments),
        records=records,
        first_seq=first_seq,
        last_seq=last_seq,
        checkpoints=tuple(valid_checkpoints),
        node_name=identity[0] if identity else None,
        topology_fingerprint=identity[1] if identity else None,
        findings=tuple(findings),
    )


def _only_needed_segments_block(
    findings: list[Finding], segments: list[tuple[int, str]], valid_checkpoints: list[int]
) -> list[Finding]:
    """Damage in a segment recovery does not read (history before the newest valid
    checkpoint's records) does not block recovery; it is still reported."""
    needed_from = valid_checkpoints[-1] + 1 if valid_checkpoints else 1
    not_needed = {
        path
        for index, (_, path) in enumerate(segments)
        if index + 1 < len(segments) and segments[index + 1][0] <= needed_from
    }
    return [
        dataclasses.replace(f, blocks_recovery=False) if f.path in not_needed else f
        for f in findings
    ]


def _covered_history_does_not_block(
    fs: FileOps,
    findings: list[Finding],
    segments: list[tuple[int, str]],
    valid_checkpoints: list[int],
) -> list[Finding]:
    """Damage the newest valid checkpoint covers, in the segment recovery reads, does not block
    recovery: recovery steps over it (``journal.recovery.step_over_history``)."""
    if not valid_checkpoints or not segments:
        return findings
    needed_from = valid_checkpoints[-1] + 1
    holding = [
        path
        for index, (first, path) in enumerate(segments)
        if first <= needed_from
        and (index + 1 == len(segments) or segments[index + 1][0] > needed_from)
    ]
    if not holding or not any(
        f.path == holding[0] and f.kind == "corrupt_record" for f in findings
    ):
        return findings
    path = holding[0]
    data = fs.read_file(path)
    try:
        scan = scan_segment(data, path)
    except SegmentHeaderError:
        return findings
    history: list[HistoryDamage] = []
    step_over_history(scan, data, needed_from, history)
    covered = {h.offset for h in history}
    return [
        dataclasses.replace(f, blocks_recovery=False)
        if f.path == path and f.kind == "corrupt_record" and f.offset in covered
        else f
        for f in findings
    ]


def _verify_checkpoints(
    fs: FileOps, directory: str, last_seq: int | None, findings: list[Finding]
) -> list[int]:
    valid = []
    checkpoints = list_checkpoints(fs, directory)
    for seq, path in checkpoints:
        try:
            load_checkpoint(fs, path)
        except CorruptCheckpoint as exc:
            # Recovery falls back to an older checkpoint; "no_recovery_start" below reports
            # the case where none is left.
            findings.append(Finding("corrupt_checkpoint", path, None, seq, exc.reason, False))
            continue
        if seq > (last_seq or 0):
            findings.append(
                Finding(
                    "checkpoint_ahead_of_log",
                    path,
                    None,
                    seq,
                    f"{os.path.basename(path)} covers seq {seq} but the log ends at seq "
                    f"{last_seq or 0}",
                    True,
                )
            )
            continue
        valid.append(seq)
    return valid
