"""The journal's single writer: append records write-ahead, rotate segments, write checkpoints.

The rules (DESIGN.md, the commit protocol and Journal):

- ``append`` writes one record as one frame at the end of the newest segment and, with
  durability ``always``, fsyncs it before returning its sequence number: a returned seq is on
  disk. With durability ``none`` it is written (a killed process loses nothing) but not fsynced.
- Group commit: ``append(..., sync=False)`` writes a record without its fsync, and ``sync``
  makes every record written since the last sync durable with one fsync, acknowledging them
  all; until then they are not acknowledged (``last_seq`` does not count them). A group never
  spans segments: a rotation first syncs the records written so far.
- If the write or the fsync fails (or anything else goes wrong mid-append: a bug is cut back
  too, then raised as itself), the segment is truncated back to the end of the last
  acknowledged record, every record of an unsynced group with it (and that cut is fsynced,
  so the failed record cannot reappear after a power loss and be replayed) and
  ``JournalWriteError`` is raised; the next append may succeed.
  If the truncation (or its fsync) fails too, the failed records may be on disk and replayed at
  the next start: their outcome is unknown (``WriteOutcomeUnknown``, a ``JournalFailed``), the
  journal no longer knows its tail, refuses every later append and reports itself unhealthy;
  the next start decides from what the disk holds.
- Before a record that would take the segment past ``segment_max_bytes`` (and the segment already
  holds a record), a new segment named by that record's seq is started.
- ``checkpoint_due`` says when ``checkpoint_every_records`` records or ``checkpoint_every_s``
  seconds (on the injected clock) have passed since the last checkpoint; the owner of the state
  then calls ``write_checkpoint``, after which retention deletes what is no longer needed.
- One process at a time: a ``flock`` on the journal directory itself (``journal.lock``) is
  held while it is open for writing.
- Opening for writing fsyncs the newest segment and the directory: what recovery read (maybe
  only in the page cache, after a crash between a write and its fsync) is durable before
  anything is answered from it.
"""

from __future__ import annotations

import contextlib
import logging
import os
from dataclasses import dataclass, field
from typing import Any

from journal.checkpoints import write_checkpoint_file
from journal.clock import SYSTEM_CLOCK, Clock
from journal.errors import (
    JournalError,
    JournalFailed,
    JournalWriteError,
    UnencodableRecord,
    WriteOutcomeUnknown,
)
from journal.fileops import FileOps, OsFileOps, close_quietly, write_all
from journal.framing import encode_frame
from journal.lock import lock_directory
from journal.records import (
    CheckpointHeader,
    EventsReader,
    SegmentHeader,
    encode_record_fields,
    new_packer,
    pack,
)
from journal.recovery import Recovery, recover
from journal.retention import Retention, apply_retention
from journal.segments import SegmentLeftBehind, create_segment, segment_name
from journal.settings import (
    DEFAULT_CHECKPOINT_EVERY_RECORDS,
    DEFAULT_CHECKPOINT_EVERY_S,
    DEFAULT_DURABILITY,
    DEFAULT_SEGMENT_MAX_BYTES,
    Durability,
    JournalSettings,
    check_settings,
)
from journal.syncer import FsyncStats, Syncer

__all__ = ["Journal", "JournalStats"]

_log = logging.getLogger("journal")


@dataclass(slots=True)
class JournalStats:
    """Counters for metrics: what the journal did since it was opened.

    Attributes:
        fsync: latency of every fsync (records, segments, checkpoints, directories).
        appends: records acknowledged.
        append_failures: appends that raised ``JournalWriteError`` or ``JournalFailed``.
        bytes_appended: frame bytes of the acknowledged records.
        rotations: segments started after the first.
        checkpoints: checkpoints written.
        files_deleted: segments and checkpoints removed by retention.
    """

    fsync: FsyncStats = field(default_factory=FsyncStats)
    appends: int = 0
    append_failures: int = 0
    bytes_appended: int = 0
    rotations: int = 0
    checkpoints: int = 0
    files_deleted: int = 0


class Journal:
    """An open journal directory. Build it with ``Journal.open``.

    One writer per directory (a lock enforces it), and one owner per instance: the journal is
    not thread-safe; the StateStore's core calls it under its lock only.
    """

    def __init__(
        self,
        directory: str,
        settings: JournalSettings,
        *,
        fs: FileOps,
        clock: Clock,
        syncer: Syncer,
        recovery: Recovery,
        lock_fd: int | None,
    ) -> None:
        """Internal: use ``Journal.open``."""
        self.directory = directory
        self._settings = settings
        self._fs = fs
        self._clock = clock
        self._syncer = syncer
        self._lock_fd = lock_fd
        self._read_only = lock_fd is None
        self._fd: int | None = None
        self._path = ""
        self._end = 0  # end of the last record written in the newest segment
        # End of the last acknowledged (synced) record; below ``_end`` while a group is unsynced.
        self._synced_end = 0
        self._unsynced_bytes = 0
        self._header_end = 0
        self._next_seq = recovery.last_seq + 1
        self._unsynced = 0
        self._checkpoint_seq = recovery.checkpoint_seq or 0
        self._checkpoint_mono = clock.monotonic()
        self._failure: str | None = None
        self._closed = False
        self.stats = JournalStats(fsync=syncer.stats)
        # One packer for every record appended, not one per record (the journal has one
        # writer: the StateStore's core, under its lock).
        self._packer = new_packer()

    @classmethod
    def open(
        cls,
        directory: str,
        *,
        node_name: str,
        topology_fingerprint: str,
        durability: Durability = DEFAULT_DURABILITY,
        segment_max_bytes: int = DEFAULT_SEGMENT_MAX_BYTES,
        checkpoint_every_records: int = DEFAULT_CHECKPOINT_EVERY_RECORDS,
        checkpoint_every_s: float = DEFAULT_CHECKPOINT_EVERY_S,
        retention: Retention | None = None,
        fs: FileOps | None = None,
        clock: Clock | None = None,
        slow_fsync_s: float = 1.0,
        read_only: bool = False,
        causes: bool = True,
        events: EventsReader | None = None,
    ) -> tuple[Journal, Recovery]:
        """Open (or create) the journal in ``directory`` and recover what it holds.

        Args:
            directory: the journal directory; created when missing (unless read-only).
            node_name: this node's name, written into every header and checked on open.
            topology_fingerprint: this node's CPU topology fingerprint, likewise.
            durability: ``"always"`` fsyncs each record before ``append`` returns; ``"none"``
                never fsyncs (for tests and benchmarks).
            segment_max_bytes: start a new segment before one would grow past this.
            checkpoint_every_records: ``checkpoint_due`` after this many records.
            checkpoint_every_s: ``checkpoint_due`` after this many seconds (with ≥ 1 record).
            retention: limits on forensic history (default ``Retention()``).
            fs: the file-system seam (default the real one).
            clock: the clock seam (default the system clocks).
            slow_fsync_s: an fsync longer than this is logged as a warning.
            read_only: change nothing on disk, take no lock, accept another machine's journal
                (forensics); ``append`` and ``write_checkpoint`` then raise ``JournalError``.
            causes: False recovers records with empty causes, not decoded (``recover``): for
                an opener that replays the events only.
            events: with ``causes`` False, applied to each recovered record's events as it is
                read (``recover``).

        Returns:
            ``(journal, recovery)``: the open journal and what recovery found and did.

        Raises:
            ValueError: a setting out of range (names the setting and the value).
            JournalMismatch: the journal belongs to another node or topology.
            CorruptRecord: damage before the tail of the log.
            CorruptCheckpoint: no usable checkpoint and the first records are gone.
            JournalError: the directory is locked by another process, or missing when read-only.
            OSError: the directory cannot be read or the first segment cannot be created.
        """
        settings = JournalSettings(
            node_name=node_name,
            topology_fingerprint=topology_fingerprint,
            durability=durability,
            segment_max_bytes=segment_max_bytes,
            checkpoint_every_records=checkpoint_every_records,
            checkpoint_every_s=checkpoint_every_s,
            retention=retention or Retention(),
        )
        check_settings(settings)
        fs = fs or OsFileOps()
        clock = clock or SYSTEM_CLOCK
        syncer = Syncer(fs, clock, enabled=durability == "always", slow_fsync_s=slow_fsync_s)
        created = not read_only and not fs.exists(directory)
        # What this opens is closed again if a later step fails (a header, an fsync, the
        # retention pass): a failed open leaves no descriptor behind, nor the lock, which
        # would keep the caller's own retry (a restarted StateStore) out of the directory.
        with contextlib.ExitStack() as on_failure:
            lock_fd = None if read_only else lock_directory(fs, directory)
            if lock_fd is not None:
                on_failure.callback(close_quietly, fs, lock_fd)
            if created:
                # fsync the parent: a new journal directory is not durable until its entry is.
                syncer.sync_dir(os.path.dirname(os.path.abspath(directory)))
            recovery, position = recover(
                fs,
                syncer,
                clock,
                directory,
                node_name=node_name,
                topology_fingerprint=topology_fingerprint,
                read_only=read_only,
                causes=causes,
                events=events,
            )
            for damage in recovery.damaged_history:
                # Start proceeds (recovery needs only the checkpoint and what follows it), but
                # an operator should know the forensic history is not whole.
                _log.warning(
                    "journal %s: history before the checkpoint at seq %s is damaged: %s; "
                    "recovery does not need it and starts from the checkpoint "
                    "(`qrmd journal verify %s` lists it)",
                    directory,
                    recovery.checkpoint_seq,
                    damage.describe(),
                    directory,
                )
            journal = cls(
                directory,
                settings,
                fs=fs,
                clock=clock,
                syncer=syncer,
                recovery=recovery,
                lock_fd=lock_fd,
            )
            if not read_only:
                if position is None:
                    journal._start_segment(journal._next_seq)
                    assert journal._fd is not None
                    on_failure.callback(close_quietly, fs, journal._fd)
                else:
                    fd = fs.open_append(position.path, create=False)
                    on_failure.callback(close_quietly, fs, fd)
                    journal._fd = fd
                    journal._path = position.path
                    journal._end = journal._synced_end = position.end
                    journal._header_end = position.header_end
                    # fsync what recovery read before anything is answered from it: a
                    # process that crashed between a record's write and its fsync leaves the
                    # record in the page cache, recovery replays it, and without this a power
                    # loss could still take it away after the new process answered from it.
                    syncer.sync_file(fd, position.path)
                    syncer.sync_dir(directory)
                journal.apply_retention()
            on_failure.pop_all()  # opened: the journal's ``close`` owns them now
        return journal, recovery

    @property
    def last_seq(self) -> int:
        """Seq of the newest acknowledged record (0 when the journal is empty)."""
        return self._next_seq - 1 - self.unsynced

    @property
    def unsynced(self) -> int:
        """Records written by ``append(..., sync=False)`` and not yet made durable by ``sync``."""
        return self._unsynced

    @property
    def checkpoint_seq(self) -> int:
        """Seq covered by the newest checkpoint (0 when there is none)."""
        return self._checkpoint_seq

    @property
    def healthy(self) -> bool:
        """False once a failed write could not be undone; then every append is refused."""
        return self._failure is None

    @property
    def failure(self) -> str | None:
        """Why the journal is unhealthy, or None."""
        return self._failure

    @property
    def durability(self) -> Durability:
        """The durability setting it was opened with."""
        return self._settings.durability

    def append(self, cause: dict[Any, Any], events: list[Any], *, sync: bool = True) -> int:
        """Journal one record holding ``cause`` and ``events``, atomically.

        Args:
            cause: the whole input of the decision, a msgpack-able map.
            events: the events it commits, msgpack-able values.
            sync: False to write it as part of a group: not fsynced, not acknowledged, until
                the next ``sync`` (or a synced ``append``) covers it.

        Returns:
            The record's seq; with durability ``always`` and ``sync`` the record, and every
            record of the group before it, is on disk.

        Raises:
            UnencodableRecord: ``cause`` is not a map, ``events`` not a list, or either is not
                msgpack-able; nothing was written.
            JournalWriteError: the write or fsync failed and was undone, with every unsynced
                record of the group before it; the journal still ends at the last acknowledged
                record and the next append may succeed.
            WriteOutcomeUnknown: the write failed and could not be cut back: this record and
                the unsynced ones before it may be on disk (``_roll_back``).
            JournalFailed: the journal was already unable to undo a failed write, or a new
                segment was left behind (nothing of this record was written).
            JournalError: the journal is read-only or closed.
        """
        if self._failure is not None or self._closed or self._read_only:
            self._check_writable()  # raises
        if not isinstance(cause, dict) or not isinstance(events, list):
            raise UnencodableRecord(
                f"a record needs a cause map and an event list, got {type(cause).__name__} "
                f"and {type(events).__name__}"
            )
        seq = self._next_seq
        clock = self._clock
        frame = encode_frame(
            encode_record_fields(
                seq, clock.time(), clock.monotonic(), cause, events, packer=self._packer
            )
        )
        if (
            self._end > self._header_end
            and self._end + len(frame) > self._settings.segment_max_bytes
        ):
            # A group never spans segments: its records so far are made durable first.
            self.sync()
            self._rotate(seq)
        assert self._fd is not None
        try:
            write_all(self._fs, self._fd, frame)
            if sync:
                self._syncer.sync_file(self._fd, self._path)
        except OSError as exc:
            self.stats.append_failures += 1
            acked = self.last_seq
            self._roll_back(seq, exc)
            raise JournalWriteError(
                f"record {seq} was not journaled ({exc}); it was cut from {self._path} with "
                f"the unsynced records after seq {acked}, the journal still ends at seq "
                f"{acked}, and the next append may succeed once the fault clears"
            ) from exc
        except Exception as exc:
            # Not an I/O error (a bug below, a MemoryError): part of the frame may be on disk
            # all the same, and left there the next append would write this seq again after
            # it, which the next start refuses. Cut it back as for an I/O failure, then let
            # the error go on as what it is.
            self.stats.append_failures += 1
            self._roll_back(seq, OSError(f"{type(exc).__name__}: {exc}"))
            raise
        self._end += len(frame)
        self._next_seq = seq + 1
        self._unsynced += 1
        self._unsynced_bytes += len(frame)
        if sync:
            self._acknowledge()
        return seq

    def sync(self) -> int:
        """Make every record written since the last sync durable with one fsync (group commit).

        Returns:
            The seq of the newest acknowledged record (``last_seq``), now on disk with
            durability ``always``. Nothing unsynced: nothing is done.

        Raises:
            JournalWriteError: the fsync failed; every unsynced record was cut back and the
                journal still ends at the last acknowledged record.
            WriteOutcomeUnknown: the fsync failed and the records could not be cut back.
            JournalFailed: the journal was already unable to undo a failed write.
            JournalError: the journal is read-only or closed.
        """
        if not self._unsynced:
            return self.last_seq
        self._check_writable()
        assert self._fd is not None
        first, last = self.last_seq + 1, self._next_seq - 1
        try:
            self._syncer.sync_file(self._fd, self._path)
        except OSError as exc:
            self.stats.append_failures += 1
            self._roll_back(last, exc)
            raise JournalWriteError(
                f"records {first}-{last} were not journaled: their fsync failed ({exc}); they "
                f"were cut from {self._path}, the journal still ends at seq {first - 1}, and "
                f"the next append may succeed once the fault clears"
            ) from exc
        self._acknowledge()
        return last

    def abandon(self, why: str) -> None:
        """Cut every unsynced record back (a group whose writer gave up before its sync).

        Raises:
            WriteOutcomeUnknown: the cut-back failed; the journal refuses every later append.
        """
        if not self._unsynced:
            return
        self._roll_back(self._next_seq - 1, OSError(why))

    def _acknowledge(self) -> None:
        """The unsynced records are durable (per the setting): count them acknowledged."""
        self._synced_end = self._end
        self.stats.appends += self._unsynced
        self.stats.bytes_appended += self._unsynced_bytes
        self._unsynced = 0
        self._unsynced_bytes = 0

    def checkpoint_due(self) -> bool:
        """Whether a checkpoint should be written now.

        Returns:
            True when at least one record is not covered by a checkpoint and either
            ``checkpoint_every_records`` records or ``checkpoint_every_s`` seconds (on the
            journal's clock) have passed since the last checkpoint (or since open).
        """
        # ``last_seq`` spelled out, and the clock read only when the count does not decide:
        # the store asks after every commit.
        pending = self._next_seq - 1 - self._unsynced - self._checkpoint_seq
        if pending <= 0:
            return False
        settings = self._settings
        if pending >= settings.checkpoint_every_records:
            return True
        return self._clock.monotonic() - self._checkpoint_mono >= settings.checkpoint_every_s

    def write_checkpoint(self, seq: int, payload: Any) -> str:
        """Write a checkpoint: the full state after applying every record up to ``seq``.

        Args:
            seq: the last record the state includes; an acknowledged seq, not older than the
                newest checkpoint.
            payload: the state, msgpack-able (the state codec's output).

        Returns:
            The checkpoint file's path.

        Raises:
            ValueError: ``seq`` is not acknowledged yet or older than the newest checkpoint.
            UnencodableRecord: the payload is not msgpack-able; nothing was written.
            JournalWriteError: the file could not be written; the older checkpoints are intact.
            JournalFailed: the journal is unhealthy.
            JournalError: the journal is read-only or closed.
        """
        self._check_writable()
        if not self._checkpoint_seq <= seq <= self.last_seq:
            raise ValueError(
                f"checkpoint seq {seq} must lie between the newest checkpoint "
                f"({self._checkpoint_seq}) and the newest record ({self.last_seq})"
            )
        state = pack(payload, f"checkpoint payload at seq {seq}")
        settings = self._settings
        header = CheckpointHeader(
            settings.node_name, settings.topology_fingerprint, seq, self._clock.time(), len(state)
        )
        try:
            path = write_checkpoint_file(self._fs, self._syncer, self.directory, header, state)
        except OSError as exc:
            raise JournalWriteError(
                f"checkpoint at seq {seq} was not written ({exc}); the older checkpoints and "
                f"every record are intact"
            ) from exc
        self._checkpoint_seq = seq
        self._checkpoint_mono = self._clock.monotonic()
        self.stats.checkpoints += 1
        self.apply_retention()
        return path

    def apply_retention(self) -> list[str]:
        """Delete old segments and checkpoints beyond the retention limits (``journal.retention``).

        Returns:
            The paths deleted. A file that cannot be deleted is logged and kept.
        """
        if self._read_only or self._closed:
            return []
        deleted = apply_retention(
            self._fs, self.directory, self._settings.retention, self._clock.time()
        )
        self.stats.files_deleted += len(deleted)
        return deleted

    def close(self) -> None:
        """Close the newest segment and release the lock; later calls do nothing.

        Raises:
            OSError: a close failed; every descriptor was closed (released) all the same.
        """
        if self._closed:
            return
        self._closed = True
        fd, lock_fd = self._fd, self._lock_fd
        self._fd = self._lock_fd = None
        # Both are closed whatever the segment's close says: a lock kept after a failed close
        # would keep this process's next open (a restarted StateStore) out of the directory.
        with contextlib.ExitStack() as closing:
            if lock_fd is not None:
                closing.callback(self._fs.close, lock_fd)
            if fd is not None:
                closing.callback(self._fs.close, fd)  # first: callbacks run last-in first-out

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _check_writable(self) -> None:
        if self._read_only:
            raise JournalError(f"journal {self.directory} was opened read-only")
        if self._closed:
            raise JournalError(f"journal {self.directory} is closed")
        if self._failure is not None:
            raise JournalFailed(
                f"journal {self.directory} refuses appends: {self._failure}. Restart qrmd: "
                f"recovery will decide from what the disk holds"
            )

    def _roll_back(self, seq: int, cause: OSError) -> None:
        """Cut the segment back to the last acknowledged record (an unsynced group with it).

        Raises:
            WriteOutcomeUnknown: the cut (or its fsync) failed: the records from the last
                acknowledged one's successor to ``seq`` may be on disk; the journal refuses
                every later append.
        """
        assert self._fd is not None
        first = self._next_seq - self._unsynced  # the oldest record not acknowledged
        self._end = self._synced_end
        self._next_seq -= self._unsynced
        self._unsynced = 0
        self._unsynced_bytes = 0
        try:
            self._fs.truncate(self._fd, self._end)
            # fsync the cut: otherwise a power loss could bring the failed record back, and
            # recovery would replay a commit that was answered with an error.
            self._syncer.sync_file(self._fd, self._path)
        except OSError as exc:
            # Whether the failed bytes stay is now out of our hands: a complete frame left
            # there (or brought back by a power loss) is replayed at the next start. The
            # journal cannot say where it ends, so it must not append after it, and whoever
            # wrote these records must hear "unknown", never "not written".
            records, them = (
                (f"record {seq}", "it") if first == seq else (f"records {first}-{seq}", "them")
            )
            self._failure = (
                f"{records} failed ({cause}) and could not be cut from {self._path} "
                f"at offset {self._end} ({exc}): the outcome is unknown, the next start "
                f"replays what of {them} is complete on disk"
            )
            _log.error("journal unhealthy, its tail is unknown: %s", self._failure)
            raise WriteOutcomeUnknown(
                f"journal {self.directory} is unhealthy: {self._failure}; it refuses every "
                f"further append. Restart qrmd: recovery will decide from what the disk holds",
                first_seq=first,
                last_seq=seq,
            ) from exc

    def _rotate(self, seq: int) -> None:
        old_fd = self._fd
        try:
            self._start_segment(seq)
        except SegmentLeftBehind as exc:
            # The new segment may be on disk starting at ``seq``: appending ``seq`` to the old
            # one would make the next start refuse the journal. Refuse every append instead;
            # the next start finds the empty segment after the last record, which is fine.
            self.stats.append_failures += 1
            self._failure = f"record {seq} was not journaled: {exc}"
            _log.error("journal unhealthy: %s", self._failure)
            raise JournalFailed(
                f"journal {self.directory} is unhealthy: {self._failure}; it refuses every "
                f"further append. Restart qrmd: recovery will decide from what the disk holds"
            ) from exc
        except OSError as exc:
            self.stats.append_failures += 1
            raise JournalWriteError(
                f"record {seq} was not journaled: segment {segment_name(seq)} could not be "
                f"started ({exc}); the journal still ends at seq {seq - 1}"
            ) from exc
        if old_fd is not None:
            try:
                self._fs.close(old_fd)
            except OSError as exc:
                # Its records were already acknowledged (and fsynced, per the setting).
                _log.warning("closing the previous segment failed: %s", exc)
        self.stats.rotations += 1

    def _start_segment(self, first_seq: int) -> None:
        settings = self._settings
        header = SegmentHeader(
            settings.node_name, settings.topology_fingerprint, first_seq, self._clock.time()
        )
        path, fd, header_end = create_segment(self._fs, self._syncer, self.directory, header)
        self._fd, self._path, self._end, self._header_end = fd, path, header_end, header_end
        self._synced_end = header_end
