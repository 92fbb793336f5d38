"""The StateStore: the one owner of the authoritative state and of the journal (DESIGN.md).

The commit protocol (DESIGN.md, "The commit protocol"), in order:

1. Apply the events to a *candidate* state. Events that do not fit (``StateError``) are refused
   before anything is written: a record that cannot be replayed must never reach the journal.
2. Encode the events and append one record (cause + events); with durability ``always`` the
   journal fsyncs it before returning. Write-ahead: nothing is published that is not on disk.
3. Publish the candidate as the new ``Snapshot(state, seq)``, tell subscribers, answer with it.
4. When a checkpoint is due, write the encoded state; a failed checkpoint is logged and
   counted, never a failed commit (the records are durable; recovery replays them).

A checkpoint is due after ``checkpoint_every_records`` records or ``checkpoint_every_s``
seconds on the store's clock, whichever comes first, once a record is not covered by one
(DESIGN.md, Journal). The store checks after each commit and on each ``CheckpointIfDue`` a
ticker tells it, so a node that stops committing still writes its time-due checkpoint; a tick
with nothing new writes nothing, and a tick never fails the actor.

A failed append (``JournalWriteError``) was cut back by the journal: the commit is refused
with ``CommitRefused`` and state is unchanged, and the next commit may succeed. Until a write
succeeds again the store is unhealthy, with the reason; on an idle node the checkpoint tick
makes a probe write so health comes back without waiting for kubelet
(``actors.store_refusals``).

If the journal could not cut the failed write back (``WriteOutcomeUnknown``), the record may
be on disk, and the next start would replay it: that commit is answered
``CommitOutcomeUnknown``, never a refusal, which would promise that nothing was persisted (an
unsynced group's records likewise). The store no longer knows its journal's tail, so it
refuses every later commit with ``StoreUnavailable`` (nothing of those is written), reports
itself unhealthy with the reason, logs it and counts the records in
``commits_outcome_unknown_total``, until a restart recovers from what the disk holds
(DESIGN.md, the commit protocol step 3).

On open the store recovers: the newest valid checkpoint plus every later record
(``policy.state.replay``), and reports what it did in the log and in its status.

The store's health and figures are published, never read off it: each change (a commit, a
refusal, a checkpoint, a failure) makes a new frozen ``StoreStatus`` that status subscribers
are told and ``GetStatus`` answers (``actors.store_status``). Nothing outside the actor's
thread touches the core, but for the writer that commits in its own turn: ``CommitInTurn``
hands it an ``InTurnCommitter``, whose commit is the one above run in the writer's thread under
the core's lock (the Allocator's commits: one hop per kubelet call instead of two, the
StateStore's actor kept for checkpoints, readers and the other writers).

The store is generic over state sections: it only calls ``apply_all``, ``encode_event``,
``encode_state`` and the decoders, so a new section (the memory balancer's rounds) needs no
change here. ``StateStoreCore`` is the behaviour, driven directly by unit tests;
``StateStoreActor`` is the thin pykka shell (STYLE.md, Actors).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from actors.log_text import utc
from actors.ports.clock import SYSTEM_CLOCK, Clock
from actors.store_messages import (
    CheckpointIfDue,
    Commit,
    CommitInTurn,
    CommitOutcomeUnknown,
    CommitRefused,
    GetSnapshot,
    GetStatus,
    Snapshot,
    StoreUnavailable,
)
from actors.store_refusals import CommitRefusals, probe_write
from actors.store_report import RecoveryReport
from actors.store_status import JournalFigures, StoreHealth, StoreStatus
from actors.store_subscribers import Subscribers
from actors.threads import MailboxActor
from journal import (
    DEFAULT_CHECKPOINT_EVERY_RECORDS,
    DEFAULT_CHECKPOINT_EVERY_S,
    DEFAULT_DURABILITY,
    DEFAULT_SEGMENT_MAX_BYTES,
    Durability,
    FileOps,
    Journal,
    JournalError,
    JournalWriteError,
    OsFileOps,
    Retention,
    UnencodableRecord,
    WriteOutcomeUnknown,
)
from journal.recovery import collector_paused
from policy.errors import StateError
from policy.state.checkpoint_form import DEFAULT_CHECKPOINT_FORM, CheckpointForm
from policy.state.codec import encode_event, encode_state
from policy.state.events import Event
from policy.state.replay import read_events, replay_records, state_from_checkpoint
from policy.state.sections import apply_all
from policy.topology.model import CPUTopology

__all__ = [
    "InTurnCommitter",
    "StateStoreActor",
    "StateStoreCore",
    "StatusSubscriber",
    "StoreConfig",
    "Subscriber",
]

_log = logging.getLogger("actors.state_store")

#: Told every new snapshot. It must not block (an actor ref's ``tell`` is the usual one).
Subscriber = Callable[[Snapshot], None]
#: Told every new status, from the actor's thread. It must not block; keeping the value is
#: safe, since a status never changes.
StatusSubscriber = Callable[[StoreStatus], None]


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """Where the journal lives and how it is written (the journal's settings, DESIGN.md).

    Attributes:
        directory: the journal directory.
        node_name: this node's name, written into every journal header and checked on open.
        durability: ``"always"`` (fsync before acknowledging; the default) or ``"none"``.
        segment_max_bytes: start a new segment before one would grow past this.
        checkpoint_every_records: write a checkpoint after this many records...
        checkpoint_every_s: ...or this many seconds since the last one, whichever first
            (checked on each commit and on each ``CheckpointIfDue`` tick).
        retention: limits on forensic history (default ``journal.Retention()``).
        checkpoint_form: how checkpoints write the CPU section's containers: ``columns``, or
            ``entries`` for a rollback to a release before the columns
            (``policy.state.checkpoint_form``).
    """

    directory: str
    node_name: str
    durability: Durability = DEFAULT_DURABILITY
    segment_max_bytes: int = DEFAULT_SEGMENT_MAX_BYTES
    checkpoint_every_records: int = DEFAULT_CHECKPOINT_EVERY_RECORDS
    checkpoint_every_s: float = DEFAULT_CHECKPOINT_EVERY_S
    retention: Retention | None = None
    checkpoint_form: CheckpointForm = DEFAULT_CHECKPOINT_FORM


class StateStoreCore:
    """The state, its journal and the commit protocol. Build it with ``StateStoreCore.open``.

    Its writes (``commit``, ``checkpoint_if_due``, ``checkpoint``, ``close``) hold one lock, so
    besides the actor's thread a writer may commit from its own (``InTurnCommitter``): the
    journal still has one writer at a time and records keep one total order. The lock is only
    ever held for one of these calls, which call no one but subscribers that must not block,
    so it cannot be part of a cycle of waits.
    """

    def __init__(
        self,
        journal: Journal,
        snapshot: Snapshot,
        recovery: RecoveryReport,
        *,
        clock: Clock,
        fs: FileOps,
        checkpoint_form: CheckpointForm = DEFAULT_CHECKPOINT_FORM,
    ) -> None:
        """Internal: use ``StateStoreCore.open``."""
        self._journal = journal
        self._checkpoint_form = checkpoint_form
        self._fs = fs
        # Re-entrant: a commit writes its due checkpoint under the lock it holds.
        self._lock = threading.RLock()
        # A group's records written and not yet synced (group commit): the state after them,
        # and what the status will count once they are acknowledged. Never published.
        self._pending: Snapshot | None = None
        self._pending_records: list[tuple[int, int]] = []  # (seq, events) of each record
        self._pending_states: list[Snapshot] = []  # the state after each of them
        self._pending_started = 0.0
        self._refusals = CommitRefusals()
        self._snapshot = snapshot
        self._clock = clock
        self._failure: str | None = None
        self._closed = False
        self._snapshot_subscribers = Subscribers[Snapshot]("snapshot", lambda s: s.seq)
        self._status_subscribers = Subscribers[StoreStatus]("status", lambda s: s.last_seq)
        self._status = StoreStatus.recovered(recovery, journal.checkpoint_seq).with_journal(
            JournalFigures.of(journal.stats)
        )
        self.recovery = recovery

    @classmethod
    def open(
        cls,
        config: StoreConfig,
        topology: CPUTopology,
        *,
        fs: FileOps | None = None,
        clock: Clock | None = None,
    ) -> StateStoreCore:
        """Open the journal, rebuild the state it holds and report what recovery did.

        Args:
            config: the journal directory and settings.
            topology: this node's topology; the journal must have been written for it.
            fs: the file-system seam (default the real one).
            clock: the clock port (default the system clocks); the journal uses it too.

        Returns:
            The store, its snapshot the recovered state.

        Raises:
            ValueError: a setting out of range.
            JournalError: the journal cannot be opened (another node's or topology's, damaged
                before its tail, locked by another process); the message names the file.
            ReplayError: a checkpoint or record does not decode or fit; names its seq.
            OSError: the directory cannot be read or created.
        """
        clock = clock or SYSTEM_CLOCK
        fs = fs or OsFileOps()
        started = clock.monotonic()
        # One pause over reading and replaying (journal.recovery.collector_paused): the
        # collector resumes with one collection of what the pause allocated and kept, so the
        # records and the checkpoint's payload, garbage once replayed, are dropped first.
        with collector_paused():
            journal, found = Journal.open(
                config.directory,
                node_name=config.node_name,
                topology_fingerprint=topology.fingerprint(),
                durability=config.durability,
                segment_max_bytes=config.segment_max_bytes,
                checkpoint_every_records=config.checkpoint_every_records,
                checkpoint_every_s=config.checkpoint_every_s,
                retention=config.retention,
                fs=fs,
                clock=clock,
                causes=False,  # replay needs the events only
                events=read_events,  # decoded as read, not held as msgpack until the replay
            )
            try:
                state = state_from_checkpoint(
                    found.checkpoint_state, found.checkpoint_seq, topology, found.checkpoint_path
                )
                state, replayed, events = replay_records(state, found.records)
            except BaseException:
                # Release the journal's segment and lock (the Supervisor's next attempt must
                # find the directory free), without hiding why the replay failed.
                with contextlib.suppress(OSError):
                    journal.close()
                raise
            report = RecoveryReport(
                directory=config.directory,
                checkpoint_seq=found.checkpoint_seq,
                records_replayed=replayed,
                events_replayed=events,
                last_seq=found.last_seq,
                bytes_truncated=found.truncated_bytes,
                broken_path=found.broken_path,
                skipped_checkpoints=tuple(
                    f"{s.path}: {s.reason}" for s in found.skipped_checkpoints
                ),
                removed_temp_files=found.removed_temp_files,
                journal_s=found.elapsed_s,
                elapsed_s=clock.monotonic() - started,
            )
            del found
        _log.log(logging.WARNING if report.bytes_truncated else logging.INFO, report.summary())
        for skipped in report.skipped_checkpoints:
            _log.warning("state store skipped a damaged checkpoint: %s", skipped)
        return cls(
            journal,
            Snapshot(state, report.last_seq),
            report,
            clock=clock,
            fs=fs,
            checkpoint_form=config.checkpoint_form,
        )

    @property
    def snapshot(self) -> Snapshot:
        """The latest published snapshot: the durable state and the seq it includes."""
        return self._snapshot

    @property
    def accepts_commits(self) -> bool:
        """False once the store refuses every commit (closed, or the journal could not undo a
        failed write). Whether it is healthy, and why not, is its ``status.health``."""
        return self._failure is None and not self._closed

    @property
    def status(self) -> StoreStatus:
        """The current health and figures, a frozen value (the last one published)."""
        return self._status

    def subscribe_status(self, subscriber: StatusSubscriber) -> None:
        """Tell ``subscriber`` every status published from now on, and the current one now.

        Args:
            subscriber: called with each new status; it must not block. An exception it
                raises is logged and changes nothing.
        """
        self._status_subscribers.add(subscriber, current=self._status)

    def subscribe(self, subscriber: Subscriber) -> None:
        """Tell ``subscriber`` every snapshot published from now on.

        Args:
            subscriber: called with each new snapshot after the commit is durable; it must not
                block. An exception it raises is logged and does not affect the commit.
        """
        self._snapshot_subscribers.add(subscriber)

    def commit(self, events: Sequence[Event], cause: Mapping[str, Any]) -> Snapshot:
        """Journal ``events`` with their ``cause``, then apply and publish them (module rules).

        Args:
            events: the decision's events, applied in order, all or none.
            cause: the decision's whole input, a msgpack-able map.

        Returns:
            The new snapshot; its seq is the record's, which is on disk per the durability.

        Raises:
            CommitRefused: the events do not fit the state, the record cannot be encoded, or
                the journal could not write it (and cut it back); state is unchanged.
            StoreUnavailable: the store refuses every commit (failed cut-back, or closed);
                nothing was written.
            CommitOutcomeUnknown: the write failed and could not be cut back: the record may
                be on disk and replayed at the next start; the published state is unchanged
                and the store refuses every later commit.
        """
        with self._lock:
            return self._commit(events, cause)

    def _commit(self, events: Sequence[Event], cause: Mapping[str, Any]) -> Snapshot:
        if self._pending is not None:
            # A commit while a group is unsynced joins it and syncs it all: one order.
            self._write(events, cause)
            return self._sync()
        if self._failure is not None or self._closed:  # not ``accepts_commits``
            self._set_status(self._status.with_unavailable())
            reason = self._failure or "the state store is closed"
            raise StoreUnavailable(f"commit refused: {reason}")
        started = self._clock.monotonic()
        try:
            candidate = apply_all(self._snapshot.state, events)
            encoded = [encode_event(event) for event in events]
        except StateError as err:
            self._set_status(self._status.with_refusal())
            raise CommitRefused(f"commit refused, nothing was written: {err}") from err
        seq = self._append(dict(cause), encoded)
        snapshot = Snapshot(candidate, seq)
        self._snapshot = snapshot
        elapsed = self._clock.monotonic() - started
        figures = JournalFigures.of(self._journal.stats)
        status = self._status.with_commit(seq, len(encoded), elapsed, figures)
        if self._refusals.refusing:
            status = self._written(status, f"record {seq}")
        self._publish_status(status)
        self._snapshot_subscribers.tell(snapshot)
        # ``checkpoint_if_due`` in line, as it goes after a successful write (no refusal
        # episode left to probe): one call where the general check makes five, per commit.
        if self._failure is None and not self._closed and self._journal.checkpoint_due():
            self._checkpoint()
        return snapshot

    @contextmanager
    def group(self) -> Iterator[None]:
        """Hold the store for a group commit (the caller's thread, one turn): ``write`` each
        record, then ``sync`` once; replies wait for that sync (DESIGN.md, the commit protocol).

        Leaving the block with records still unsynced (the caller raised) cuts them back, as a
        failed sync does, so nothing unacknowledged stays in the journal.
        """
        with self._lock:
            try:
                yield
            finally:
                if self._pending is not None:
                    self._abandon("the group ended without its sync")

    def write(self, events: Sequence[Event], cause: Mapping[str, Any]) -> Snapshot:
        """Journal ``events`` as the group's next record, without its fsync (inside ``group``).

        Returns:
            The state after the group's records so far: the next decision's, never published
            nor answered before ``sync`` covers it.

        Raises:
            CommitRefused: the events do not fit or the record cannot be encoded (nothing
                written; the group goes on), or the write failed: then the journal cut back
                every unsynced record of the group, and the group is over (``pending`` None).
            StoreUnavailable: the store refuses every commit.
            CommitOutcomeUnknown: the write failed and the group could not be cut back: its
                records may be on disk; the group is over and the store refuses every commit.
        """
        with self._lock:
            return self._write(events, cause)

    def sync(self) -> Snapshot:
        """Make the group's records durable with one fsync, then publish and answer the state.

        Returns:
            The new published snapshot (the last one when the group wrote nothing).

        Raises:
            CommitRefused: the fsync failed; the journal cut back every record of the group
                and the published state is unchanged.
            StoreUnavailable: the store refuses every commit.
            CommitOutcomeUnknown: the fsync failed and the group could not be cut back: its
                records may be on disk; the published state is unchanged and the store
                refuses every commit.
        """
        with self._lock:
            return self._sync()

    @property
    def pending(self) -> Snapshot | None:
        """The state after a group's unsynced records, or None outside a group's writes."""
        return self._pending

    def _write(self, events: Sequence[Event], cause: Mapping[str, Any]) -> Snapshot:
        if not self.accepts_commits:
            self._set_status(self._status.with_unavailable())
            reason = self._failure or "the state store is closed"
            raise StoreUnavailable(f"commit refused: {reason}")
        base = self._pending or self._snapshot
        if self._pending is None:
            self._pending_started = self._clock.monotonic()
            self._pending_records = []
            self._pending_states = []
        try:
            candidate = apply_all(base.state, events)
            encoded = [encode_event(event) for event in events]
        except StateError as err:
            self._set_status(self._status.with_refusal())
            raise CommitRefused(f"commit refused, nothing was written: {err}") from err
        try:
            seq = self._append(dict(cause), encoded, sync=False)
        except (CommitRefused, CommitOutcomeUnknown):
            # The journal cut the unsynced group back (or wrote nothing of it, or could not
            # cut it back): either way the group is over...
            self._pending = None
            # ...but a group never spans segments: a record that needed a new one had the
            # group's records so far synced before the rotation, and they stay on disk.
            self._publish_synced(self._journal.last_seq)
            raise
        self._pending = Snapshot(candidate, seq)
        self._pending_records.append((seq, len(encoded)))
        self._pending_states.append(self._pending)
        return self._pending

    def _sync(self) -> Snapshot:
        pending = self._pending
        if pending is None:
            return self._snapshot
        try:
            self._journal.sync()
        except JournalWriteError as err:
            self._pending = None
            health = self._refusals.refused(str(err), self._clock.time())
            self._set_status(self._status.with_commit_failure().with_health(health))
            # The records synced before a rotation in the group stay (``_write``).
            self._publish_synced(self._journal.last_seq)
            raise CommitRefused(f"group commit refused, state unchanged: {err}") from err
        except WriteOutcomeUnknown as err:
            self._pending = None
            self._publish_synced(self._journal.last_seq)
            raise self._outcome_unknown(err) from err
        except JournalError as err:  # JournalFailed before anything was synced; or closed
            self._pending = None
            self._fail(str(err))
            self._publish_synced(self._journal.last_seq)
            raise StoreUnavailable(f"commit refused: {err}") from err
        self._pending = None
        self._snapshot = pending
        elapsed = self._clock.monotonic() - self._pending_started
        status = self._status
        figures = JournalFigures.of(self._journal.stats)
        # One commit counted per record, as alone; the group's time once.
        for seq, events in self._pending_records:
            seconds = elapsed if seq == pending.seq else 0.0
            status = status.with_commit(seq, events, seconds, figures)
        if self._refusals.refusing:
            status = self._written(status, f"records up to {pending.seq}")
        self._publish_status(status)
        self._snapshot_subscribers.tell(pending)
        self.checkpoint_if_due()
        return pending

    def _publish_synced(self, acknowledged: int) -> None:
        """Publish the group's records the journal acknowledged up to ``acknowledged``: a group
        never spans segments, so the records written before a rotation were synced by it, and
        they stay on disk however the group ends (a later write or its sync failing, or
        abandoned). The published state is always the one the next start replays."""
        synced = [s for s in self._pending_states if self._snapshot.seq < s.seq <= acknowledged]
        if not synced:
            return
        snapshot = synced[-1]
        self._snapshot = snapshot
        status = self._status
        for seq, events in self._pending_records:
            if seq <= snapshot.seq:
                status = status.with_commit(seq, events, 0.0)
        self._set_status(status)
        self._snapshot_subscribers.tell(snapshot)

    def _abandon(self, why: str) -> None:
        """Cut an unsynced group back: as a failed sync, with ``why`` as the fault."""
        self._pending = None
        try:
            self._journal.abandon(why)
        except WriteOutcomeUnknown as err:
            self._outcome_unknown(err)  # the group's callers were answered by what ended it
        except JournalError as err:
            self._fail(str(err))
        self._publish_synced(self._journal.last_seq)

    def checkpoint_if_due(self) -> str | None:
        """Write a checkpoint if the journal says one is due (module rules); never raises.

        Returns:
            The checkpoint's path, or None when nothing was written: none due (too few
            records and too little time, or no record since the last checkpoint), the store
            closed or unhealthy, or a failure (logged, counted in the status's
            ``checkpoint_failures_total``).
        """
        with self._lock:
            if not self.accepts_commits:
                return None
            if self._refusals.refusing:
                self._probe()
            if not self._journal.checkpoint_due():
                return None
            return self.checkpoint()

    def checkpoint(self) -> str | None:
        """Write a checkpoint of the published state now, if a record is not covered yet.

        Returns:
            The checkpoint's path, or None when nothing was written (nothing new, or a
            failure, which is logged and counted in the status's ``checkpoint_failures_total``).
        """
        with self._lock:
            return self._checkpoint()

    def _checkpoint(self) -> str | None:
        snapshot = self._snapshot
        if self._closed or snapshot.seq <= self._journal.checkpoint_seq:
            return None
        try:
            path = self._journal.write_checkpoint(
                snapshot.seq, encode_state(snapshot.state, self._checkpoint_form)
            )
        except (JournalError, StateError) as err:
            # The records are durable; recovery replays them from the older checkpoint.
            self._set_status(self._status.with_checkpoint_failure())
            _log.warning("checkpoint at seq %d failed, commits go on: %s", snapshot.seq, err)
            return None
        except Exception:
            # Not an I/O failure: a bug. Still never a failed commit nor a dead store.
            self._set_status(self._status.with_checkpoint_failure())
            _log.exception("bug: checkpoint at seq %d failed, commits go on", snapshot.seq)
            return None
        status = self._status.with_checkpoint(snapshot.seq)
        self._set_status(self._written(status, f"the checkpoint at seq {snapshot.seq}"))
        return path

    def close(self, *, checkpoint: bool = True) -> None:
        """Stop accepting commits and close the journal; later calls do nothing.

        Args:
            checkpoint: first write a checkpoint of the newest state (shortens the next
                recovery), if the store is healthy.
        """
        with self._lock:
            if self._closed:
                return
            if checkpoint and self._failure is None:
                self.checkpoint()
            self._closed = True
            self._journal.close()

    def _append(self, cause: dict[str, Any], encoded: list[Any], *, sync: bool = True) -> int:
        try:
            return self._journal.append(cause, encoded, sync=sync)
        except UnencodableRecord as err:
            self._set_status(self._status.with_refusal())
            raise CommitRefused(f"commit refused, nothing was written: {err}") from err
        except JournalWriteError as err:
            health = self._refusals.refused(str(err), self._clock.time())
            self._set_status(self._status.with_commit_failure().with_health(health))
            raise CommitRefused(f"commit refused, state unchanged: {err}") from err
        except WriteOutcomeUnknown as err:
            raise self._outcome_unknown(err) from err
        except JournalError as err:  # JournalFailed, nothing of this written; or closed
            self._fail(str(err))
            raise StoreUnavailable(f"commit refused, nothing was written: {err}") from err

    def _fail(self, reason: str) -> None:
        self._failure = reason
        health = StoreHealth(f"state store refuses commits: {reason}")
        self._set_status(self._status.with_commit_failure().with_health(health))
        _log.error("state store unhealthy, refusing every commit: %s", reason)

    def _outcome_unknown(self, err: WriteOutcomeUnknown) -> CommitOutcomeUnknown:
        """The journal could not cut a failed write back (module rules): refuse every later
        commit, say why in the health, the log and the count, and return the answer owed to
        the commits concerned, which must not hear "nothing was persisted"."""
        records = err.last_seq - err.first_seq + 1
        self._failure = f"the journal's tail is unknown: {err}"
        health = StoreHealth(f"state store refuses commits: {self._failure}")
        self._set_status(self._status.with_outcome_unknown(records).with_health(health))
        _log.error(
            "state store unhealthy, refusing every commit until qrmd is restarted: %s",
            self._failure,
        )
        return CommitOutcomeUnknown(
            f"commit outcome unknown (the record may be replayed at the next start): {err}"
        )

    def _written(self, status: StoreStatus, what: str) -> StoreStatus:
        """``status`` after a successful write: healthy again if commits were being refused."""
        if self._refusals.written(what) and self._failure is None:
            return status.with_health(StoreHealth())
        return status

    def _probe(self) -> None:
        """While commits are refused, try a write that needs no commit (the idle node's way
        back to health); a failure changes nothing."""
        try:
            probe_write(self._fs, self._journal.directory)
        except OSError as err:
            _log.debug("state store: the probe write failed, still refusing commits: %s", err)
            return
        self._set_status(self._written(self._status, "the probe write"))

    def _set_status(self, status: StoreStatus) -> None:
        """Make ``status`` current, the journal's figures copied in as they are now, and
        tell the status subscribers (module rules: a new value for every change)."""
        self._publish_status(status.with_journal(JournalFigures.of(self._journal.stats)))

    def _publish_status(self, status: StoreStatus) -> None:
        """Make ``status``, whose journal figures are the journal's now, current and tell the
        status subscribers (a commit builds it with them in one value, ``with_commit``)."""
        self._status = status
        self._status_subscribers.tell(status)


class InTurnCommitter:
    """A ``GroupCommitter`` (``actors.ports.commit``) that commits in the caller's own turn.

    ``commit`` calls the store's core directly under its lock: the record is appended and
    fsynced (with durability ``always``), applied and published before it returns, exactly as
    the store's own ``Commit`` does, without the hop to the store's thread and back. Only the
    writer that holds it calls it (one per writer, as ``AdoptedSnapshot`` is). It is bound to
    one opened core: once that store stops (or fails) the core is closed and every commit is
    refused with ``StoreUnavailable``, as a restarted store's writers are restarted with it.

    Args:
        core: the store's open core (``CommitInTurn`` asks the store's actor for this).
    """

    def __init__(self, core: StateStoreCore) -> None:
        self._core = core
        self._grouping = False
        self._broken = False

    def commit(self, events: tuple[Event, ...], cause: Mapping[str, Any]) -> Snapshot:
        """Commit in this thread; see ``Committer.commit``. Inside ``group()`` the record is
        written, not synced, and the state after it answered (``GroupCommitter``).

        Raises:
            CommitRefused: nothing was persisted (``StoreUnavailable`` once the store stopped).
            CommitOutcomeUnknown: the write failed and could not be cut back (``commit``).
        """
        if not self._grouping:
            return self._core.commit(events, cause)
        had_records = self._core.pending is not None
        try:
            return self._core.write(events, cause)
        except CommitRefused:
            # A refusal before writing keeps the group; a failed write cut it all back.
            if had_records and self._core.pending is None:
                self._broken = True
            raise
        except CommitOutcomeUnknown:
            # The group's earlier records could not be cut back: they may be on disk or not,
            # and no answer decided on them may be given as durable.
            if had_records:
                self._broken = True
            raise

    @contextmanager
    def group(self) -> Iterator[None]:
        """One group commit in this thread (``GroupCommitter``; ``StateStoreCore.group``)."""
        with self._core.group():
            self._grouping, self._broken = True, False
            try:
                yield
            finally:
                self._grouping = False

    def sync(self) -> Snapshot:
        """Make the group durable (``StateStoreCore.sync``).

        Raises:
            CommitRefused: the fsync failed; nothing of the group is on disk.
            CommitOutcomeUnknown: the fsync failed and the group could not be cut back.
        """
        return self._core.sync()

    @property
    def broken(self) -> bool:
        """Whether a failed write cut the current group's earlier records back (or could not,
        leaving their outcome unknown)."""
        return self._broken

    def latest(self) -> Snapshot:
        """The core's latest published snapshot; see ``Committer.latest``."""
        return self._core.snapshot


class StateStoreActor(MailboxActor):
    """The pykka shell around ``StateStoreCore``: opens it on start, closes it on stop.

    Messages (``actors.store_messages``), to be ``ask``-ed:

    - ``Commit(events, cause)`` → the new ``Snapshot``; raises ``CommitRefused``,
      ``StoreUnavailable`` or ``CommitOutcomeUnknown`` in the asker (pykka hands an exception
      to whoever asked).
    - ``GetSnapshot()`` → the latest ``Snapshot``.
    - ``GetStatus()`` → the current ``StoreStatus`` (health and figures, a frozen value).
    - ``CheckpointIfDue(now)`` → the checkpoint's path or None; safe to ``tell`` (a ticker
      does), it never raises.
    - ``CommitInTurn()`` → an ``InTurnCommitter`` on the open core, for a writer that commits
      in its own turn (one hop per decision instead of two).

    Anything else raises ``TypeError``. Opening happens in ``on_start`` so that a restarted
    actor reloads from disk (DESIGN.md, Supervisor); if it fails, the actor stops and the
    error is logged by pykka.
    """

    def __init__(
        self,
        opener: Callable[[], StateStoreCore],
        subscribers: Sequence[Subscriber] = (),
        status_subscribers: Sequence[StatusSubscriber] = (),
    ) -> None:
        """Args:
        opener: builds the core, e.g. ``lambda: StateStoreCore.open(config, topology)``.
        subscribers: told each new snapshot (``tell`` only; they must not block).
        status_subscribers: told the opened store's status, then each new one (they must
            not block; keeping the frozen value is how another thread reads it).
        """
        super().__init__()
        self._opener = opener
        self._subscribers = tuple(subscribers)
        self._status_subscribers = tuple(status_subscribers)
        self._core: StateStoreCore | None = None

    @property
    def core(self) -> StateStoreCore:
        """The open core (only from the actor's own thread, or after it stopped)."""
        if self._core is None:
            raise StoreUnavailable("the state store is not open")
        return self._core

    def on_start(self) -> None:
        self._core = self._opener()
        for subscriber in self._subscribers:
            self._core.subscribe(subscriber)
        for status_subscriber in self._status_subscribers:
            self._core.subscribe_status(status_subscriber)

    def on_receive(self, message: Any) -> Any:
        match message:
            case Commit(events=events, cause=cause):
                return self.core.commit(events, cause)
            case GetSnapshot():
                return self.core.snapshot
            case GetStatus():
                return self.core.status
            case CommitInTurn():
                return InTurnCommitter(self.core)
            case CheckpointIfDue(now=now):
                path = self.core.checkpoint_if_due()
                if path is not None:
                    _log.debug("checkpoint %s written on the tick sent at %s", path, utc(now))
                return path
        raise TypeError(f"the state store does not handle {type(message).__name__}")

    def on_stop(self) -> None:
        if self._core is not None:
            self._core.close()

    def on_failure(self, *exc_info: object) -> None:
        if self._core is not None:
            self._core.close(checkpoint=False)
