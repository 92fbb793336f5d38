"""Re-run a journaled Allocator decision from its record alone (DESIGN.md, "Every decision has
one shape"; the future ``qrmd journal rerun``).

A record holds the decision's inputs as its cause (``policy.cpu.cause``) and the events it
committed. Re-running means: rebuild the state just before the record (the newest checkpoint
at or before it, plus the records in between, replayed without policy code,
``policy.state.replay``), decode the cause back into the decision's inputs, call the same pure
function the Allocator called (``policy.cpu.decide``) with the same settings and ``now``,
and compare the events. Equal events show the record is explained by the code and the inputs
it names; different events show the policy changed, or the settings given are not the node's.

Advisor records re-run the same way: a ``ListAndWatch`` record holds the response it applied
or refused, an ``AdvisorSilence`` record the silence and the limit the fallback compared, an
``AddContainerRefused`` record the container whose Allocate the advisor refused
(``policy.cpu.cause``); ``decide`` routes them to ``policy.cpu.advisor``.

The reference level and its options are in each record's cause (``reference``, written at
v0.5.47 only; a cause without it was decided at v0.5.3), and the re-run decides at that level.
The other settings (topology, reserve, QoS configuration, options) are not in the journal: they are
the node's configuration, so the caller passes the ones the node ran with (with
``advisor_enabled`` when it ran with ``--enable-cpu-advisor``: pool sizing depends on it).
Replies are not journaled either (kubelet got them); :class:`Rerun` carries the re-run's reply
for the caller to show or to compare with one it kept.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from journal import FileOps, OsFileOps, Record, read_records
from journal.recovery import collector_paused
from journal.walk import NoStart, find_start, span
from policy.cpu.cause import CauseError, DecisionCause, decode_cause
from policy.cpu.context import PolicyContext
from policy.cpu.decide import decide
from policy.cpu.reference import reference_of_cause
from policy.decision import Decision
from policy.errors import ErrorKind, PolicyError
from policy.state.events import Event
from policy.state.replay import ReplayError, StateReplayer, decode_events
from policy.state.sections import State
from policy.topology.model import CPUTopology

__all__ = ["Rerun", "RerunError", "rerun_in_journal", "rerun_record", "state_before"]


class RerunError(PolicyError):
    """A record cannot be re-run: not found, not the Allocator's, or no state before it.

    Attributes:
        seq: the record's seq.
    """

    kind = ErrorKind.INTERNAL

    def __init__(self, seq: int, message: str) -> None:
        super().__init__(message)
        self.seq = seq


@dataclass(frozen=True, slots=True)
class Rerun:
    """A journaled decision taken again.

    Attributes:
        seq: the record's seq.
        cause: the record's cause, decoded into the decision's inputs.
        recorded: the events the record holds.
        decision: the re-run's decision, or ``None`` when the policy refused (``refusal``).
        refusal: the error the re-run raised; a committed record was never refused, so this
            means the policy or the settings differ from those that wrote it.
    """

    seq: int
    cause: DecisionCause
    recorded: tuple[Event, ...]
    decision: Decision[Any] | None
    refusal: PolicyError | None = None

    @property
    def same_events(self) -> bool:
        """Whether the re-run commits exactly the events the record holds, in order."""
        return self.decision is not None and self.decision.events == self.recorded


def rerun_record(record: Record, before: State, settings: PolicyContext) -> Rerun:
    """Take the decision of ``record`` again on the state before it.

    Args:
        record: an Allocator record (its cause names an Allocator command or an advisor
            decision).
        before: the state just before the record (see :func:`state_before`).
        settings: the settings the node ran with.

    Returns:
        The re-run, with the recorded events to compare.

    Raises:
        RerunError: the cause is not an Allocator cause or does not decode (names the field),
            or the record's events do not decode.
    """
    try:
        cause = decode_cause(record.cause)
        recorded = tuple(decode_events(record))
        # The reference level the record was decided at is its own (a cause without one:
        # v0.5.3), whatever the settings given say.
        version, options = reference_of_cause(record.cause)
    except (CauseError, ReplayError, ValueError) as err:
        raise RerunError(record.seq, f"record {record.seq} cannot be re-run: {err}") from err
    settings = replace(settings, reference_version=version, reference=options)
    try:
        decision = decide(before, cause.inputs, settings, cause.now)
    except PolicyError as err:
        return Rerun(record.seq, cause, recorded, None, err)
    return Rerun(record.seq, cause, recorded, decision)


def state_before(
    directory: str, seq: int, topology: CPUTopology, *, fs: FileOps | None = None
) -> tuple[State, Record]:
    """The state just before record ``seq``, and that record, from a journal directory.

    On the one journal walk (``journal.walk``): starts from the newest checkpoint that covers
    no more than ``seq - 1`` and whose following records are kept (or from the empty state)
    and replays the records after it up to ``seq - 1``.

    Args:
        directory: the journal directory (a copy is fine; nothing is written).
        seq: the record to re-run.
        topology: the node's CPU topology, as the checkpoints were written.
        fs: the file-system seam (default the real one).

    Returns:
        ``(state before seq, record seq)``.

    Raises:
        RerunError: no record ``seq``, or the records between the start and ``seq`` are not
            all there (retention removed them and no checkpoint covers the gap).
        ReplayError: a checkpoint or record on the way does not decode or fit.
        JournalError: the directory is not a journal (as ``journal.read_records``).
    """
    fs = fs or OsFileOps()
    replayer = StateReplayer(topology)
    first = span(directory, whole=False, fs=fs).first
    try:
        # A checkpoint that cannot be read is an error here, not stepped over: a re-run
        # answers for one record, on the state the journal says it was decided on.
        start = find_start(
            directory,
            replayer,
            None if first is None else first.seq,
            at_most=seq - 1,
            skip=(),
            fs=fs,
        )
    except NoStart as err:
        raise RerunError(seq, f"the state before record {seq} cannot be rebuilt: {err}") from err
    records = list(read_records(directory, from_seq=start.seq + 1, to_seq=seq, fs=fs))
    _check_consecutive(records, start.seq + 1, seq)
    with collector_paused():
        state = replayer.apply(start.state, records[:-1])
    return state, records[-1]


def rerun_in_journal(
    directory: str, seq: int, settings: PolicyContext, *, fs: FileOps | None = None
) -> Rerun:
    """Re-run record ``seq`` of the journal in ``directory`` (both steps above).

    Args:
        directory: the journal directory.
        seq: the record to re-run.
        settings: the settings the node ran with (its topology is the checkpoints').
        fs: the file-system seam (default the real one).

    Returns:
        The re-run.

    Raises:
        RerunError, ReplayError, JournalError: see :func:`state_before` and
            :func:`rerun_record`.
    """
    before, record = state_before(directory, seq, settings.topology, fs=fs)
    return rerun_record(record, before, settings)


def _check_consecutive(records: Iterable[Record], first: int, last: int) -> None:
    seqs = [record.seq for record in records]
    if seqs != list(range(first, last + 1)):
        if not seqs or seqs[-1] != last:
            raise RerunError(last, f"the journal holds no record {last}")
        raise RerunError(
            last,
            f"records {first}..{last} are needed to rebuild the state before record {last}, "
            f"the journal holds {seqs[0]}..{seqs[-1]} with gaps or a late start",
        )
