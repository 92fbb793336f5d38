"""The offline tools' journal walk: record by record with the state before and after each one.

Every tool that reads a journal directory walks it one way: ``journal.walk`` (a start — the
empty state or a checkpoint — and the records after it, streamed) with the state codec's
per-section registry (``policy.state.replay``: ``StateReplayer`` for the whole state,
``SectionReplayer`` for one owner's section), the same decode-and-apply path the StateStore
recovers with, so what the tools show is what the node held. This module adds what the
forensic questions (the state at an instant, what changed between two, why a pod has its
CPUs) need on top: the topology checked against the journal's, the range replay can reach, a
seq found by time, and a progress bar. Replay starts from the empty state, or, when retention
has retired the oldest records, from the oldest checkpoint that covers them (DESIGN.md,
Journal). Nothing here writes or takes the journal's lock: a live node's directory can be
read while the daemon appends to it.

The topology must be the one the journal was written for: its fingerprint is checked against
the segment headers' before anything is replayed. ``--topology journal`` (the default) takes it
from the newest daemon start (``qrmd.store.start_record``) or Katalyst import record that
holds the machine, so a journal copied off a node needs nothing else; a journal without one
falls back to this host's sysfs, and any other SPEC is the user's
(``qrmd.host.topology_source``).
Long replays show a rich progress bar on stderr when it is a terminal.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from journal import JournalError, Record, journal_identity, read_records
from journal.checkpoints import checkpoint_name
from journal.walk import NoStart, Start, find_start, span
from journal.walk import steps as walk_steps
from policy.state.replay import ReplayError, StateReplayer
from policy.state.sections import State
from policy.topology.model import CPUTopology, TopologyError
from qrmd.console import make_console
from qrmd.host.topology_source import DEFAULT_TOPOLOGY_SPEC, load_topology
from qrmd.offline.journal_view import format_time
from qrmd.offline.renderers import cause_kind
from qrmd.store.katalyst_import import IMPORT_COMMAND
from qrmd.store.start_record import START_KIND, topology_of_start

__all__ = [
    "JOURNAL_TOPOLOGY",
    "ForensicsError",
    "JournalWalk",
    "Step",
    "open_walk",
    "resolve_topology",
]

#: The ``--topology`` SPEC that means "the machine the journal's daemon starts recorded".
JOURNAL_TOPOLOGY = "journal"

#: Replays shorter than this many records finish before a bar would be worth drawing.
PROGRESS_MIN_RECORDS = 2000


class ForensicsError(ValueError):
    """A forensic question that cannot be answered; the message says what and why.

    A ``ValueError``, so ``qrmd.cli`` prints it as one line and exits 2.
    """


@dataclass(frozen=True, slots=True)
class Step:
    """One record and the state on either side of it."""

    record: Record
    before: State
    after: State


@dataclass(frozen=True, slots=True)
class JournalWalk:
    """A journal ready to replay: where replay starts, and what it covers.

    Attributes:
        directory: the journal directory.
        topology: the node's topology.
        base_seq: the seq the starting state covers (0 for empty, else a checkpoint's).
        base_state: the state replay starts from.
        first_seq: the oldest record kept, or None when there is none.
        last_seq: the newest readable record, or None.
        first_wall_time: the wall time of ``first_seq``.
        last_wall_time: the wall time of ``last_seq``.
    """

    directory: str
    topology: CPUTopology
    base_seq: int
    base_state: State
    first_seq: int | None
    last_seq: int | None
    first_wall_time: float | None
    last_wall_time: float | None

    def steps(self, to_seq: int | None = None, *, what: str = "replaying") -> Iterator[Step]:
        """Every record after the starting state up to ``to_seq``, with states.

        Raises:
            ForensicsError: a record cannot be read or does not fit the state rebuilt before
                it (names its seq; ``qrmd journal verify`` tells more).
        """
        end = to_seq if to_seq is not None else self.last_seq
        total = 0 if end is None else max(0, end - self.base_seq)
        seq = self.base_seq
        start = Start(self.base_seq, self.base_state)
        with _Progress(total, what) as advance:
            try:
                for step in walk_steps(self.directory, StateReplayer(self.topology), start, to_seq):
                    yield Step(step.record, step.before, step.after)
                    seq = step.record.seq
                    advance()
            except (JournalError, ReplayError) as err:
                raise ForensicsError(
                    f"replay of {self.directory} stopped after seq {seq}: {err}"
                ) from err

    def state_at(self, seq: int) -> State:
        """The state after record ``seq`` (``base_seq`` gives the starting state).

        Raises:
            ForensicsError: ``seq`` is before what the journal keeps, or after its end.
        """
        self.check_seq(seq)
        state = self.base_state
        for step in self.steps(seq):
            state = step.after
        return state

    def check_seq(self, seq: int) -> None:
        """Refuse a seq outside what replay can reach, naming the range it can.

        Raises:
            ForensicsError: the seq is out of range.
        """
        last = self.last_seq if self.last_seq is not None else self.base_seq
        if seq < self.base_seq or seq > last:
            raise ForensicsError(
                f"seq {seq} is outside {self.directory}: replay reaches seq {self.base_seq} "
                f"(the {'empty state' if self.base_seq == 0 else 'oldest usable checkpoint'}) "
                f"through seq {last}"
            )

    def seq_at_time(self, wall_time: float, text: str) -> int:
        """The newest record written at or before ``wall_time`` (``text`` is for the error).

        Raises:
            ForensicsError: the instant is before the first record replay can reach.
        """
        found: int | None = None
        for record in read_records(self.directory, self.base_seq + 1):
            if record.wall_time > wall_time:
                break
            found = record.seq
        if found is None:
            raise ForensicsError(
                f"time {text!r} ({format_time(wall_time)}) is before the first record "
                f"{self.directory} keeps ({self._first_described()})"
            )
        return found

    def _first_described(self) -> str:
        if self.first_seq is None or self.first_wall_time is None:
            return "it has none"
        return f"seq {self.first_seq} at {format_time(self.first_wall_time)}"


def resolve_topology(directory: str, spec: str) -> tuple[CPUTopology, str]:
    """The topology ``spec`` names for the journal in ``directory``, and how to name it.

    Args:
        directory: the journal directory.
        spec: ``journal`` (module docstring) or any ``qrmd.host.topology_source`` SPEC.

    Returns:
        ``(topology, description)``; the description names where it came from.

    Raises:
        TopologyError: the SPEC (or the fallback, sysfs) cannot be read, or a start record's
            machine is invalid.
        ForensicsError: the journal cannot be read.
    """
    if spec != JOURNAL_TOPOLOGY:
        return load_topology(spec), spec
    found: tuple[int, CPUTopology] | None = None
    try:
        if os.path.isdir(directory):
            for record in read_records(directory):
                # A daemon start and a Katalyst import both record the machine.
                if cause_kind(record.cause) in (START_KIND, IMPORT_COMMAND):
                    topology = topology_of_start(record.cause)
                    if topology is not None:
                        found = (record.seq, topology)
    except JournalError:
        pass  # open_walk reports the damage; the starts before it still count
    if found is None:
        why = "no daemon start in it records its machine"
        try:
            host = load_topology(DEFAULT_TOPOLOGY_SPEC)
        except TopologyError as err:
            raise ForensicsError(
                f"--topology {JOURNAL_TOPOLOGY}: {why}, and this host's {DEFAULT_TOPOLOGY_SPEC} "
                f"cannot be read ({err}): pass the node's --topology"
            ) from err
        return host, f"{JOURNAL_TOPOLOGY} ({why}, so this host's {DEFAULT_TOPOLOGY_SPEC})"
    return found[1], f"{JOURNAL_TOPOLOGY} (the machine of the daemon start at seq {found[0]})"


def open_walk(directory: str, topology: CPUTopology, topology_spec: str) -> JournalWalk:
    """Prepare to replay ``directory`` on ``topology``.

    Args:
        directory: the journal directory (a copy is fine).
        topology: the topology the user named.
        topology_spec: how they named it, for the error message.

    Returns:
        The walk.

    Raises:
        ForensicsError: not a directory, no segment, a topology of another machine, or records
            retired with no checkpoint left to start from.
    """
    if not os.path.isdir(directory):
        raise ForensicsError(f"no journal at {directory}: not a directory")
    try:
        identity = journal_identity(directory)
    except JournalError as err:
        raise ForensicsError(str(err)) from err
    if identity is None:
        raise ForensicsError(f"{directory} holds no journal segment: nothing to replay")
    if identity.topology_fingerprint != topology.fingerprint():
        raise ForensicsError(
            f"journal {directory} was written for topology {identity.topology_fingerprint}, "
            f"but --topology {topology_spec} is {topology.fingerprint()}: pass the node's own "
            f"topology (a machine file, `qrmd topology --json` output, or sysfs:ROOT copied "
            f"from the node)"
        )
    try:
        kept = span(directory)
    except JournalError as err:
        raise ForensicsError(f"{err} (run `qrmd journal verify {directory}`)") from err
    first, last = kept.first, kept.last
    try:
        start = find_start(
            directory,
            StateReplayer(topology),
            None if first is None else first.seq,
            newest=False,
            skip=(JournalError, ReplayError),
        )
    except NoStart as err:
        raise ForensicsError(
            f"records before seq {err.first_seq} of {directory} were retired and no valid "
            f"checkpoint covers them (looked for {checkpoint_name(err.first_seq - 1)} or newer): "
            f"the state cannot be rebuilt"
        ) from err
    return JournalWalk(
        directory,
        topology,
        start.seq,
        start.state,
        None if first is None else first.seq,
        None if last is None else last.seq,
        None if first is None else first.wall_time,
        None if last is None else last.wall_time,
    )


class _Progress:
    """A rich progress bar on stderr for long replays on a terminal; nothing otherwise."""

    def __init__(self, total: int, what: str) -> None:
        self._bar: Progress | None = None
        if total >= PROGRESS_MIN_RECORDS and sys.stderr.isatty():
            self._bar = Progress(
                TextColumn(what),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                # stdout is the answer (--json): never draw there
                console=make_console(stderr=True, highlight=True),
                transient=True,
            )
        self._total = total

    def __enter__(self) -> _Advance:
        if self._bar is None:
            return _Advance(None, 0)
        self._bar.start()
        return _Advance(self._bar, self._bar.add_task("records", total=self._total))

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


class _Advance:
    def __init__(self, bar: Progress | None, task: int) -> None:
        self._bar, self._task = bar, task

    def __call__(self) -> None:
        if self._bar is not None:
            self._bar.advance(self._task)  # type: ignore[arg-type]
