"""Re-run every journaled CPU pressure decision from its record (``qrmd eviction rerun``).

The CPU pressure actor journals each decision with its cause (command, time, settings and
inputs, ``actors.cpu_pressure``). Walking the journal in order, this module keeps the
``cpu_pressure`` section as the records left it and, for each record of the actor, takes the
decision again on the section just before it (``policy.cpu.pressure.rerun``) and compares the
events. Equal events show the record is explained by the code and the inputs it names: "why
was pod X evicted at 03:12?" is answered by its inputs, and nothing else went into it.

The walk starts at the journal's first record when it is record 1, else at the newest
checkpoint before ``from_seq`` or before the first kept record (its ``cpu_pressure`` section;
an older checkpoint without one starts empty). Records of other sections pass by: the
pressure section is the actor's alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from journal import OsFileOps, load_checkpoint, read_records
from journal.checkpoints import list_checkpoints
from policy.cpu.pressure.rerun import COMMANDS, rerun_cause
from policy.cpu.qos import QoSConfig
from policy.decision import Event
from policy.errors import PolicyError
from policy.state.codec import decode_event, encode_event
from policy.state.pressure import PRESSURE_SECTION, PressureHistory, apply_pressure_event
from policy.state.pressure.codec import decode_pressure_section

__all__ = ["RerunResult", "rerun_journal"]


@dataclass(frozen=True, slots=True)
class RerunResult:
    """One re-run record.

    Attributes:
        seq: the record's seq.
        wall_time: when it was appended.
        command: the decision (``CollectLoad``, ``GetEvictPods``, …).
        recorded: its ``cpu_pressure`` events, encoded.
        rerun: the re-run's events, encoded; None when the re-run refused.
        error: why the re-run refused (a cause that does not decode, a refusal).
    """

    seq: int
    wall_time: float
    command: str
    recorded: tuple[dict[str, Any], ...]
    rerun: tuple[dict[str, Any], ...] | None
    error: str = ""

    @property
    def same(self) -> bool:
        """The re-run gave exactly the recorded events."""
        return self.rerun == self.recorded

    def to_json(self) -> dict[str, Any]:
        """The result as plain values."""
        return {
            "seq": self.seq,
            "wall_time": self.wall_time,
            "command": self.command,
            "same": self.same,
            "recorded": list(self.recorded),
            "rerun": None if self.rerun is None else list(self.rerun),
            "error": self.error,
        }


def _start(directory: str, from_seq: int | None) -> tuple[int | None, PressureHistory]:
    """Where to read from and the section there.

    From the journal's first kept record when it is record 1 (the empty section) and no
    ``from_seq`` is asked; else the newest checkpoint before ``from_seq`` (or before the first
    kept record); failing that the oldest checkpoint, whose records are all there.
    """
    fs = OsFileOps()
    first = next(iter(read_records(directory)), None)
    if first is None:
        return None, PressureHistory()
    wanted = from_seq if from_seq is not None else first.seq
    if wanted <= 1 or (from_seq is None and first.seq == 1):
        return None, PressureHistory()
    checkpoints = list_checkpoints(fs, directory)
    usable = [(seq, path) for seq, path in checkpoints if seq <= wanted - 1]
    if not usable and first.seq == 1:
        return None, PressureHistory()  # every record is there: replay them all
    chosen = usable[-1] if usable else (checkpoints[0] if checkpoints else None)
    if chosen is None:
        return first.seq, PressureHistory()
    seq, path = chosen
    sections = load_checkpoint(fs, path).state.get("sections", {})
    data = sections.get(PRESSURE_SECTION)
    # The section ignores the topology argument every section decoder takes.
    history = PressureHistory() if data is None else decode_pressure_section(data, None)  # type: ignore[arg-type]
    return seq + 1, history


def rerun_journal(
    directory: str,
    *,
    from_seq: int | None = None,
    to_seq: int | None = None,
    qos: QoSConfig | None = None,
) -> Iterator[RerunResult]:
    """Re-run each CPU pressure record of the journal in ``directory`` (module docstring).

    Args:
        directory: the journal (a copy is fine; nothing is written).
        from_seq: the first record to re-run (inclusive); None: from the start.
        to_seq: the last (inclusive); None: to the newest.
        qos: the node's QoS configuration (default selectors when None).

    Yields:
        One result per CPU pressure record with ``from_seq <= seq <= to_seq``.

    Raises:
        JournalError: not a journal; CorruptRecord, CorruptCheckpoint: damage on the way.
        CodecError: a recorded event does not decode.
    """
    start, history = _start(directory, from_seq)
    for record in read_records(directory, start, to_seq):
        events: list[Event] = [decode_event(raw) for raw in record.events]
        mine = [e for e in events if type(e).section == PRESSURE_SECTION]
        command = record.cause.get("command") if isinstance(record.cause, dict) else None
        if mine and command in COMMANDS and (from_seq is None or record.seq >= from_seq):
            recorded = tuple(encode_event(e) for e in mine)
            try:
                decision = rerun_cause(history, record.cause, qos)
                rerun: tuple[dict[str, Any], ...] | None = tuple(
                    encode_event(e) for e in decision.events
                )
                error = ""
            except PolicyError as err:
                rerun, error = None, str(err)
            yield RerunResult(record.seq, record.wall_time, str(command), recorded, rerun, error)
        for event in mine:
            history = apply_pressure_event(history, event)
