"""Re-run every journaled CPU pressure decision from its record (``qrmd eviction rerun``).

The CPU pressure actor journals each decision with its cause (command, time, settings and
inputs, ``actors.cpu_pressure``). Walking the journal in order, this module keeps the
``cpu_pressure`` section as the records left it and, for each record of the actor, takes the
decision again on the section just before it (``policy.cpu.pressure.rerun``) and compares the
events. Equal events show the record is explained by the code and the inputs it names: "why
was pod X evicted at 03:12?" is answered by its inputs, and nothing else went into it.

The journal is read on the one journal walk (``journal.walk``) with the pressure section's
replayer (``policy.state.replay.SectionReplayer``): from the empty section when record 1 is
kept, else from a checkpoint's ``cpu_pressure`` section (an older checkpoint without one
starts empty; ``_start`` says which checkpoint). Records of other sections pass by: the
pressure section is the actor's alone.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from journal.walk import NoStart, Start, find_start, span, steps
from policy.cpu.pressure.rerun import COMMANDS, rerun_cause
from policy.cpu.qos import QoSConfig
from policy.decision import Event
from policy.errors import PolicyError
from policy.state.codec import decode_event, encode_event
from policy.state.pressure import PRESSURE_SECTION, PressureHistory
from policy.state.replay import SectionReplayer

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


def _start(
    directory: str, replayer: SectionReplayer, first_seq: int, from_seq: int | None
) -> Start[object]:
    """Where to read from and the section there (module docstring).

    Re-running from ``from_seq``: the newest checkpoint before it whose following records
    are kept (or the empty section when record 1 is kept and none is). Re-running all, or
    when nothing covers ``from_seq``: the empty section when record 1 is kept, else the oldest
    checkpoint whose following records are kept; failing that the empty section at the first
    kept record, as much as the journal still tells.
    """
    if from_seq is not None and from_seq > first_seq:
        with contextlib.suppress(NoStart):
            return find_start(directory, replayer, first_seq, at_most=from_seq - 1, skip=())
    try:
        return find_start(directory, replayer, first_seq, newest=False, skip=())
    except NoStart:
        return Start(first_seq - 1, replayer.empty())


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
        ReplayError: a recorded event does not decode, or does not fit the section.
    """
    replayer = SectionReplayer(PRESSURE_SECTION)
    first = span(directory, whole=False).first
    if first is None:
        return
    start = _start(directory, replayer, first.seq, from_seq)
    for step in steps(directory, replayer, start, to_seq):
        record, history = step.record, step.before
        events: list[Event] = [decode_event(raw) for raw in record.events]
        mine = [e for e in events if type(e).section == PRESSURE_SECTION]
        command = record.cause.get("command") if isinstance(record.cause, dict) else None
        if mine and command in COMMANDS and (from_seq is None or record.seq >= from_seq):
            assert isinstance(history, PressureHistory)
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
