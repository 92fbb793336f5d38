"""Take katalyst-agent's ``cpu_plugin_state`` into a qrmd journal, once (spec cpu-policy §13;
the mapping is ``policy.state.katalyst_checkpoint``; docs/takeover.md).

One function does the import for both ``qrmd journal import-katalyst`` and ``qrmd run
--import-katalyst-if-present`` (``qrmd.store.katalyst_takeover``), so the two refuse the same
things:

1. a file whose checksum or policy name does not match (unless ``skip_corruption``, the
   reference's ``skip-cpu-state-corruption``), or whose CPUs this machine does not have;
2. a directory that holds files but no journal: importing would lock it and make it owner-only
   (``journal.lock``), so it is refused before anything on disk changes;
3. a journal held by a running qrmd (its writer lock), or one that holds containers already;
   pools written by a ``qrmd run`` start-up alone are replaced (that start had no state).

The import is *one* record whose cause holds the file's text (``qrmd journal show`` lists it as
``import-katalyst``) and the machine it was checked against, as a daemon start records it
(``qrmd.store.start_record``), so the forensic commands find the topology without ``--topology``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Final

from journal import Journal, JournalError, OsFileOps
from journal.checkpoints import list_checkpoints
from journal.recovery import collector_paused
from journal.segments import list_segments
from policy.errors import StateError
from policy.state.codec import encode_event
from policy.state.events import CPUEvent, PoolRemoved
from policy.state.katalyst_checkpoint import CheckpointCorruptedError, ImportPlan, plan_import
from policy.state.katalyst_decode import decode_document
from policy.state.replay import ReplayError, replay_records, state_from_checkpoint
from policy.state.sections import State, apply_all
from policy.topology.model import CPUTopology
from qrmd.store.start_record import machine_of

__all__ = [
    "IMPORT_COMMAND",
    "STATE_FILE",
    "ImportResult",
    "KatalystCheckpointError",
    "holds_journal",
    "import_checkpoint",
]

#: The reference's file name in its ``qrm-state-dir`` (§13.1).
STATE_FILE: Final = "cpu_plugin_state"
#: The cause's ``command`` of an import record.
IMPORT_COMMAND: Final = "import-katalyst"
#: What a journal directory may hold besides segments and checkpoints and still count as empty:
#: an earlier version's lock file (``journal.lock``), left alone by the journal.
_HARMLESS: Final = frozenset({"journal.lock"})


class KatalystCheckpointError(ValueError):
    """A failure reported as one line (``qrmd.cli`` prints every ``ValueError`` so)."""


@dataclass(frozen=True, slots=True)
class ImportResult:
    """What an import journaled.

    Attributes:
        seq: the import record's seq.
        containers: the containers taken over.
        pools: the pools' names.
        notes: differences the reference would have rewritten silently (``ImportPlan.notes``).
        layout: the katalyst release layout the file was read as, and how it was told
            (``katalyst v0.5.34–v0.5.47 (its checksum verifies)``).
    """

    seq: int
    containers: int
    pools: tuple[str, ...]
    notes: tuple[str, ...]
    layout: str = ""


def holds_journal(directory: str) -> bool:
    """Whether ``directory`` holds a journal segment or checkpoint (a missing one holds none)."""
    if not os.path.isdir(directory):
        return False
    fs = OsFileOps()
    return bool(list_segments(fs, directory) or list_checkpoints(fs, directory))


def _not_a_directory(path: str) -> str | None:
    """The first component of ``path`` that exists but is not a directory, if any."""
    current = os.path.abspath(path)
    while not os.path.lexists(current):
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent
    return None if os.path.isdir(current) else current


def _refuse_foreign_directory(directory: str) -> None:
    """Rule 2: files but no journal. A path through a file is refused too."""
    blocking = _not_a_directory(directory)
    if blocking is not None:
        raise KatalystCheckpointError(
            f"{blocking} is a file, not a directory, so the state directory {directory} "
            f"cannot be there: pass qrmd run's --state-dir (a missing one is created)"
        )
    if not os.path.isdir(directory) or holds_journal(directory):
        return
    others = sorted(set(os.listdir(directory)) - _HARMLESS)
    if others:
        raise KatalystCheckpointError(
            f"{directory} holds {len(others)} files but no qrmd journal (e.g. {others[0]}): "
            f"import only into a new or empty directory, or qrmd run's --state-dir; nothing "
            f"was changed"
        )


def _read_file(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as err:
        raise KatalystCheckpointError(f"cannot read {path}: {err.strerror}") from None


def _plan(path: str, data: bytes, topology: CPUTopology, skip: bool) -> ImportPlan:
    try:
        return plan_import(decode_document(data), topology, skip_corruption=skip)
    except CheckpointCorruptedError as err:
        raise KatalystCheckpointError(
            f"could not restore state from checkpoint: {err}; {path} was not imported (pass "
            f"--skip-corruption to import it anyway, as --skip-cpu-state-corruption would)"
        ) from None
    except StateError as err:
        raise KatalystCheckpointError(
            f"could not restore state from checkpoint: {err}; {path} was not imported"
        ) from None


def _takeover_events(state: State, plan: ImportPlan) -> list[CPUEvent]:
    """Pools left by a start-up are replaced by the file's; containers make the journal taken.

    Raises:
        KatalystCheckpointError: the journal holds container entries already.
    """
    cpu = state.cpu
    held = [f"{pod}/{name}" for pod, name in (e.key for e in cpu.entries())]
    if held:
        raise KatalystCheckpointError(
            f"the journal already holds CPU state ({len(held)} containers, e.g. {held[0]}); "
            f"import only into a new state directory, or one only qrmd run's start-up wrote"
        )
    removed = [PoolRemoved(name) for name in sorted(cpu.pools) if name not in plan.pools]
    return [*removed, *plan.events]


def import_checkpoint(
    directory: str,
    file: str,
    topology: CPUTopology,
    node_name: str,
    *,
    skip_corruption: bool = False,
) -> ImportResult:
    """Journal ``file`` into the journal in ``directory`` as one record (module docstring).

    Args:
        directory: the qrmd state directory; created (0700) when missing.
        file: katalyst-agent's ``cpu_plugin_state``.
        topology: this machine; the file's CPUs and NUMA nodes are checked against it.
        node_name: the node name ``qrmd run`` will open the journal with.
        skip_corruption: import a file whose checksum or policy name does not match.

    Returns:
        What was journaled.

    Raises:
        KatalystCheckpointError: one of the module docstring's refusals; nothing was written.
    """
    data = _read_file(file)
    plan = _plan(file, data, topology, skip_corruption)
    _refuse_foreign_directory(directory)
    try:
        journal, recovery = Journal.open(
            directory, node_name=node_name, topology_fingerprint=topology.fingerprint()
        )
    except JournalError as err:
        raise KatalystCheckpointError(str(err)) from None
    with journal:
        try:
            with collector_paused():  # a long journal (journal.recovery.collector_paused)
                state = state_from_checkpoint(
                    recovery.checkpoint_state,
                    recovery.checkpoint_seq,
                    topology,
                    recovery.checkpoint_path,
                )
                state, _, _ = replay_records(state, recovery.records)
        except ReplayError as err:
            raise KatalystCheckpointError(str(err)) from None
        events = _takeover_events(state, plan)
        try:
            apply_all(state, events)  # the journal only ever holds events that apply
        except StateError as err:
            raise KatalystCheckpointError(f"the imported entries do not apply: {err}") from None
        cause: dict[str, Any] = {
            "command": IMPORT_COMMAND,
            "file": os.path.abspath(file),
            "skip_corruption": skip_corruption,
            "checkpoint": data.decode("utf-8", errors="replace"),
            "notes": list(plan.notes),
        }
        machine = machine_of(topology)
        if machine is not None:
            cause["machine"] = machine
        seq = journal.append(cause, [encode_event(event) for event in events])
    how = "its checksum verifies" if plan.layout_verified else "told by its fields"
    layout = f"katalyst {plan.layout.name} ({how})"
    return ImportResult(seq, plan.containers, tuple(plan.pools), tuple(plan.notes), layout)
