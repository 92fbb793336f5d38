"""What the StateStore tells operators: its recovery report and its counters (issue 3, item 3).

On start the store says what recovery did — the checkpoint it started from, records and events
replayed, bytes cut from a torn tail, time taken — once in the log and as gauges; while running
it counts commits, refusals, failures and checkpoints. These are plain values: the metrics
endpoint (a later issue) reads them and exports them, so this module imports no metrics library.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RecoveryReport", "StoreMetrics"]


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """What the StateStore found and did when it opened its journal.

    Attributes:
        directory: the journal directory.
        checkpoint_seq: the seq of the checkpoint the state was rebuilt from, or None (empty).
        records_replayed: records applied after the checkpoint.
        events_replayed: events in those records.
        last_seq: the newest record's seq: the snapshot's seq after recovery.
        bytes_truncated: bytes cut from a torn tail (a commit that was never acknowledged).
        broken_path: where those bytes were kept, or None.
        skipped_checkpoints: newer checkpoints that could not be used (damaged), as
            ``"path: reason"``.
        removed_temp_files: leftovers of interrupted checkpoint or segment writes.
        journal_s: time the journal took to read and check its files.
        elapsed_s: total time from opening the journal to the rebuilt state.
    """

    directory: str
    checkpoint_seq: int | None
    records_replayed: int
    events_replayed: int
    last_seq: int
    bytes_truncated: int
    broken_path: str | None
    skipped_checkpoints: tuple[str, ...]
    removed_temp_files: tuple[str, ...]
    journal_s: float
    elapsed_s: float

    def summary(self) -> str:
        """The report as one log line."""
        start = (
            "empty state" if self.checkpoint_seq is None else f"checkpoint {self.checkpoint_seq}"
        )
        text = (
            f"state store recovered {self.directory} to seq {self.last_seq}: {start} + "
            f"{self.records_replayed} records ({self.events_replayed} events) replayed, "
            f"{self.bytes_truncated} bytes truncated"
        )
        if self.broken_path is not None:
            text += f" (kept in {self.broken_path})"
        if self.skipped_checkpoints:
            text += f", {len(self.skipped_checkpoints)} damaged checkpoints skipped"
        return text + f", in {self.elapsed_s:.3f} s (journal {self.journal_s:.3f} s)"


@dataclass(slots=True)
class StoreMetrics:
    """Counters (``*_total``, only grow) and gauges of one StateStore since it was opened.

    Attributes:
        commits_total: commits acknowledged.
        events_committed_total: events in those commits.
        commits_refused_total: commits refused before anything was written (events that do
            not fit the state, or a cause or event that cannot be encoded).
        commit_failures_total: commits refused because the journal could not persist them.
        commits_unavailable_total: commits refused because the store is unavailable.
        commit_seconds_total: time spent in acknowledged commits (journal write and fsync,
            apply, publish), on the store's clock.
        checkpoints_total: checkpoints written.
        checkpoint_failures_total: checkpoints that failed (logged; commits go on).
        last_seq: seq of the published snapshot.
        checkpoint_seq: seq of the newest checkpoint (0: none).
        healthy: 1 while commits are accepted, 0 once the store refuses them all.
        recovery_records_replayed: records replayed at start.
        recovery_events_replayed: events replayed at start.
        recovery_bytes_truncated: torn-tail bytes cut at start.
        recovery_seconds: time recovery took.
    """

    commits_total: int = 0
    events_committed_total: int = 0
    commits_refused_total: int = 0
    commit_failures_total: int = 0
    commits_unavailable_total: int = 0
    commit_seconds_total: float = 0.0
    checkpoints_total: int = 0
    checkpoint_failures_total: int = 0
    last_seq: int = 0
    checkpoint_seq: int = 0
    healthy: int = 1
    recovery_records_replayed: int = 0
    recovery_events_replayed: int = 0
    recovery_bytes_truncated: int = 0
    recovery_seconds: float = 0.0
