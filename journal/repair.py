"""Repair: cut a journal back to its last readable record, saying exactly what that costs.

The rule (DESIGN.md, Journal; STYLE.md, Journal):

- A torn tail (the newest segment's last frame unfinished, nothing intact after it) is cut, the
  cut bytes kept in ``<segment>.broken``. That record was never acknowledged, so nothing is lost
  and no ``force`` is needed — opening the journal does the same.
- Any other damage (a bad frame with intact records after it, a record out of sequence, a
  segment missing or with a bad header) is cut at the first damage in sequence order: the
  records after it cannot be replayed without the ones before. Repair first describes the
  loss — the seq range and count of intact records that would be dropped, the files moved
  aside, the checkpoints that include dropped records — and acts only with ``force=True``.
- Except when the damage lies in history that the newest valid checkpoint covers: recovery
  never needs it. In segments recovery does not read, the segments up to the damaged one are
  set aside (with ``force``); in the segment recovery does read (it also holds records after
  the checkpoint), the damage is stepped over exactly as recovery steps over it
  (``journal.recovery.step_over_history``) and left in place for forensics. Either way the
  state and every record recovery uses are kept: repair never drops an intact record that
  recovery can use, and a cut needed for later damage is made at that later damage.
- Nothing is deleted: cut bytes, segments and checkpoints set aside are renamed or copied to
  ``.broken`` files for later inspection.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from dataclasses import dataclass

from journal.checkpoints import list_checkpoints, load_checkpoint
from journal.clock import SYSTEM_CLOCK
from journal.errors import CorruptCheckpoint, FrameError, JournalError, PayloadError
from journal.fileops import FileOps, OsFileOps, write_all
from journal.framing import decode_frame, find_next_frame
from journal.lock import hold_lock
from journal.records import Record, decode_record
from journal.recovery import HistoryDamage, broken_path_for, step_over_history
from journal.segments import SegmentHeaderError, list_segments, scan_segment
from journal.syncer import Syncer

__all__ = ["RepairReport", "repair"]


@dataclass(frozen=True, slots=True)
class RepairReport:
    """What repair found, what it did or would do, and what that loses.

    Attributes:
        directory: the journal directory.
        damage: the first damage in sequence order, in words ("" when none).
        torn_tail: True when that damage is a torn tail (nothing acknowledged is lost).
        needs_force: True when the repair drops intact records or checkpoints.
        applied: True when the changes were made.
        cut_path: the segment cut (or set aside whole), or None.
        cut_offset: where it is cut, or None.
        kept_last_seq: the newest record the journal keeps.
        lost_first_seq: the oldest intact record dropped, or None.
        lost_last_seq: the newest intact record dropped, or None.
        lost_records: how many intact records are dropped.
        moved_aside: ``(file, .broken copy)`` for every file cut, renamed or set aside.
        description: all of the above in words, for the operator.
    """

    directory: str
    damage: str
    torn_tail: bool
    needs_force: bool
    applied: bool
    cut_path: str | None
    cut_offset: int | None
    kept_last_seq: int
    lost_first_seq: int | None
    lost_last_seq: int | None
    lost_records: int
    moved_aside: tuple[tuple[str, str], ...]
    description: str


@dataclass(frozen=True, slots=True)
class _Cut:
    index: int
    offset: int
    seq: int
    reason: str
    torn: bool


def repair(
    directory: str, *, force: bool = False, dry_run: bool = False, fs: FileOps | None = None
) -> RepairReport:
    """Cut the journal back to its last readable record (module docstring for the rules).

    A run that changes nothing (``dry_run``, damage that needs ``force`` without it, or
    nothing to repair) opens nothing for writing, so it works on a read-only copy; every run
    holds the writer lock (a ``flock`` on a read-only descriptor of the directory), so none
    runs beside a writer.

    Args:
        directory: the journal directory; no process may have it open for writing.
        force: also drop intact records after mid-log damage (never needed for a torn tail).
        dry_run: describe what would be done and change nothing, not even a torn tail.
        fs: the file-system seam (default the real one).

    Returns:
        The report; ``applied`` is False when nothing needed doing, ``force`` was needed, or
        it was a dry run.

    Raises:
        JournalError: the directory does not exist, or a running writer holds its lock.
        OSError: reading or changing the files failed (a partly applied repair is reported by
            the next ``verify``; nothing is deleted).
    """
    fs = fs or OsFileOps()
    if not fs.exists(directory):
        raise JournalError(f"no journal at {directory}: the directory does not exist")
    # A read-only descriptor of the directory, locked: it keeps a running writer out and
    # writes nothing, so a dry run works on a read-only copy.
    lock_fd = hold_lock(fs, directory)
    try:
        report, changes = _repair(fs, directory, force, act=not dry_run)
    finally:
        fs.close(lock_fd)
    if dry_run and changes:
        report = dataclasses.replace(
            report, description=report.description + " Dry run: nothing was changed."
        )
    return report


def _repair(fs: FileOps, directory: str, force: bool, *, act: bool) -> tuple[RepairReport, bool]:
    """The repair, carried out only when ``act``; also whether it changes files."""
    segments = list_segments(fs, directory)
    contents = [fs.read_file(path) for _, path in segments]
    newest = _newest_valid_checkpoint(fs, directory)
    history: list[HistoryDamage] = []
    covered_from = newest + 1 if newest is not None else None
    cut, kept_last = _first_damage(segments, contents, covered_from, history)
    if cut is not None:
        set_aside = _drop_damaged_history(
            fs, directory, segments, contents, cut=cut, force=force, act=act
        )
        if set_aside is not None:
            return set_aside, force
    stale = [(seq, path) for seq, path in list_checkpoints(fs, directory) if seq > kept_last]
    history_note = _describe_history(history, newest)
    if cut is None and not stale:
        return _report(
            directory, kept_last, description=f"{directory}: nothing to repair.{history_note}"
        ), False
    lost: list[Record] = []
    if cut is not None:
        lost = _records_from(contents[cut.index], cut.offset)
        for data in contents[cut.index + 1 :]:
            lost.extend(_records_from(data, 0))
    # Each file has its own .broken name, so the names in one plan cannot collide.
    doomed = [path for _, path in segments[cut.index :]] if cut is not None else []
    doomed.extend(path for _, path in stale)
    plan = [(path, broken_path_for(fs, path)) for path in doomed]
    needs_force = bool(lost) or bool(stale) or (cut is not None and not cut.torn)
    description = _describe(
        directory, segments, cut=cut, kept_last=kept_last, lost=lost, stale=stale, plan=plan
    )
    description += history_note
    applied = False
    changes = force or not needs_force
    if changes and act:
        _apply(fs, directory, segments=segments, contents=contents, cut=cut, plan=plan)
        applied = True
    elif not changes:
        description += (
            f" Nothing was changed: run `qrmd journal repair {directory} --force` to do it."
        )
    report = RepairReport(
        directory=directory,
        damage=cut.reason if cut is not None else "checkpoints ahead of the log",
        torn_tail=cut is not None and cut.torn and not lost,
        needs_force=needs_force,
        applied=applied,
        cut_path=segments[cut.index][1] if cut is not None else None,
        cut_offset=cut.offset if cut is not None else None,
        kept_last_seq=kept_last,
        lost_first_seq=lost[0].seq if lost else None,
        lost_last_seq=lost[-1].seq if lost else None,
        lost_records=len(lost),
        moved_aside=tuple(plan),
        description=description,
    )
    return report, changes


def _drop_damaged_history(
    fs: FileOps,
    directory: str,
    segments: list[tuple[int, str]],
    contents: list[bytes],
    *,
    cut: _Cut,
    force: bool,
    act: bool,
) -> RepairReport | None:
    """Damage only in history the newest valid checkpoint covers: set that history aside.

    Recovery never reads those segments, so cutting the log there would throw away good
    records for nothing; instead the segments up to the damaged one are set aside. Returns
    None when the damage is in a segment recovery needs.
    """
    if cut.index + 1 >= len(segments):
        return None
    next_first = segments[cut.index + 1][0]
    newest = _newest_valid_checkpoint(fs, directory)
    if newest is None or newest + 1 < next_first:
        return None
    lost = [record for data in contents[: cut.index + 1] for record in _records_from(data, 0)]
    plan = [(path, broken_path_for(fs, path)) for _, path in segments[: cut.index + 1]]
    where = "the whole segment" if cut.offset == 0 else f"offset {cut.offset}"
    moved = ", ".join(f"{os.path.basename(src)} -> {os.path.basename(dst)}" for src, dst in plan)
    description = (
        f"Damage in {segments[cut.index][1]} at {where} (seq {cut.seq}): {cut.reason}. "
        f"It lies in history that recovery no longer reads (the checkpoint at seq {newest} "
        f"covers it), so the state and every record from seq {next_first} on are unaffected. "
        f"Repair sets aside the {len(plan)} oldest segments, records before seq {next_first} "
        f"({len(lost)} intact records, kept only for forensics): {moved}."
    )
    if force and act:
        for src, dst in plan:
            fs.rename(src, dst)
        Syncer(fs, SYSTEM_CLOCK, enabled=True).sync_dir(directory)
    elif not force:
        description += (
            f" Nothing was changed: run `qrmd journal repair {directory} --force` to do it."
        )
    return RepairReport(
        directory=directory,
        damage=cut.reason,
        torn_tail=False,
        needs_force=True,
        applied=force and act,
        cut_path=segments[cut.index][1],
        cut_offset=cut.offset,
        kept_last_seq=_last_seq(contents),
        lost_first_seq=lost[0].seq if lost else None,
        lost_last_seq=lost[-1].seq if lost else None,
        lost_records=len(lost),
        moved_aside=tuple(plan),
        description=description,
    )


def _newest_valid_checkpoint(fs: FileOps, directory: str) -> int | None:
    for seq, path in reversed(list_checkpoints(fs, directory)):
        try:
            load_checkpoint(fs, path)
        except CorruptCheckpoint:
            continue
        return seq
    return None


def _last_seq(contents: list[bytes]) -> int:
    for data in reversed(contents):
        records = _records_from(data, 0)
        if records:
            return records[-1].seq
    return 0


def _describe_history(history: list[HistoryDamage], checkpoint_seq: int | None) -> str:
    if not history:
        return ""
    damaged = "; ".join(h.describe() for h in history)
    return (
        f" History the checkpoint at seq {checkpoint_seq} covers is damaged ({damaged}): "
        f"recovery does not need it and starts from that checkpoint, so it is left in place "
        f"for forensics and no intact record is dropped for it."
    )


def _first_damage(
    segments: list[tuple[int, str]],
    contents: list[bytes],
    covered_from: int | None,
    history: list[HistoryDamage],
) -> tuple[_Cut | None, int]:
    """The first damage in sequence order that recovery from the newest valid checkpoint
    cannot step over, and the newest record before it.

    Damage in the segment recovery reads that only covers records before ``covered_from``
    is stepped over as recovery does, and added to ``history``.
    """
    expected: int | None = None
    for index, ((named_first, path), data) in enumerate(zip(segments, contents, strict=True)):
        want = expected if expected is not None else named_first
        try:
            scan = scan_segment(data, path)
        except SegmentHeaderError as exc:
            return _Cut(index, 0, want, str(exc), False), want - 1
        first = scan.header.first_seq
        if first != named_first or first != want:
            reason = f"segment starts at seq {first} (file name: {named_first}), expected {want}"
            return _Cut(index, 0, want, reason, False), want - 1
        if scan.damage and covered_from is not None and _holds(segments, index, covered_from):
            scan = step_over_history(scan, data, covered_from, history)
        if scan.damage:
            damage = scan.damage[0]
            torn = index + 1 == len(segments) and damage.could_be_torn_write
            return _Cut(index, damage.offset, damage.expected_seq, damage.reason, torn), (
                damage.expected_seq - 1
            )
        expected = scan.next_seq
    return None, (expected - 1 if expected is not None else 0)


def _holds(segments: list[tuple[int, str]], index: int, seq: int) -> bool:
    """Whether segment ``index`` is the one holding ``seq`` (recovery's first segment)."""
    later_starts_after = index + 1 == len(segments) or segments[index + 1][0] > seq
    return segments[index][0] <= seq and later_starts_after


def _records_from(data: bytes, offset: int) -> list[Record]:
    """Every intact record frame at or after ``offset``, stepping over damage."""
    found = []
    position: int | None = offset
    while position is not None and position < len(data):
        try:
            payload, end = decode_frame(data, position)
        except FrameError:
            position = find_next_frame(data, position + 1)
            continue
        # A frame that holds no record (a segment header) has nothing to lose.
        with contextlib.suppress(PayloadError):
            found.append(decode_record(payload))
        position = end
    return found


def _describe(
    directory: str,
    segments: list[tuple[int, str]],
    *,
    cut: _Cut | None,
    kept_last: int,
    lost: list[Record],
    stale: list[tuple[int, str]],
    plan: list[tuple[str, str]],
) -> str:
    parts = []
    if cut is not None:
        path = segments[cut.index][1]
        if cut.torn and not lost:
            parts.append(
                f"Torn tail in {path} at offset {cut.offset}: the unfinished record (seq "
                f"{cut.seq}) was never acknowledged; it is cut, its bytes kept in {plan[0][1]}."
            )
        else:
            where = "the whole segment" if cut.offset == 0 else f"offset {cut.offset}"
            parts.append(
                f"Damage in {path} at {where} (seq {cut.seq}): {cut.reason}. The journal is "
                f"cut there and keeps records up to seq {kept_last}."
            )
            if lost:
                parts.append(
                    f"This drops {len(lost)} intact records, seq {lost[0].seq}-{lost[-1].seq}."
                )
    if stale:
        seqs = ", ".join(str(seq) for seq, _ in stale)
        parts.append(
            f"Checkpoints at seq {seqs} include records the journal no longer holds; they are "
            f"set aside."
        )
    moved = ", ".join(f"{os.path.basename(src)} -> {os.path.basename(dst)}" for src, dst in plan)
    parts.append(f"Files set aside in {directory}: {moved}.")
    return " ".join(parts)


def _apply(
    fs: FileOps,
    directory: str,
    *,
    segments: list[tuple[int, str]],
    contents: list[bytes],
    cut: _Cut | None,
    plan: list[tuple[str, str]],
) -> None:
    syncer = Syncer(fs, SYSTEM_CLOCK, enabled=True)
    renames = list(plan)
    if cut is not None and cut.offset > 0:
        path, broken = renames.pop(0)
        data = contents[cut.index]
        fd = fs.open_append(broken, create=True)
        try:
            write_all(fs, fd, data[cut.offset :])
            syncer.sync_file(fd, broken)  # the copy is durable before the cut
        finally:
            fs.close(fd)
        fd = fs.open_append(path, create=False)
        try:
            fs.truncate(fd, cut.offset)
            syncer.sync_file(fd, path)
        finally:
            fs.close(fd)
    for src, dst in renames:
        fs.rename(src, dst)
    # fsync the directory: the renames are not durable until its entries are.
    syncer.sync_dir(directory)


def _report(directory: str, kept_last: int, *, description: str) -> RepairReport:
    return RepairReport(
        directory=directory,
        damage="",
        torn_tail=False,
        needs_force=False,
        applied=False,
        cut_path=None,
        cut_offset=None,
        kept_last_seq=kept_last,
        lost_first_seq=None,
        lost_last_seq=None,
        lost_records=0,
        moved_aside=(),
        description=description,
    )
