"""What the StateStore found and did when it opened its journal (DESIGN.md, Journal).

On start the store says what recovery did — the checkpoint it started from, records and events
replayed, bytes cut from a torn tail, time taken — once in the log, and in every status it
publishes afterwards (``actors.store_status``), so the metrics endpoint exports it as gauges.
A plain value: this module imports no metrics library.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RecoveryReport"]


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
