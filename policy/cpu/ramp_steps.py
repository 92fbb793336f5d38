"""Driving the container ramp-up machine from policy decisions (cpu-policy §9.6).

The machine (``machines.ramp_up``) is the authority on which lifecycle transition a decision
takes and which events it commits; the policy answers its guards and builds the events. A
container's machine state is not stored: it follows from its entry (:func:`container_phase`),
since the ``ramp_up`` flag and the QoS level are exactly what the machine's states encode.

A decision asks :func:`fire` for the step, which is looked up in the machine's table
(``machines.table.MachineTable.select`` through ``Lifecycle.step``: the row whose guards hold,
by the rule the ``transitions`` machine follows), then commits the step's events with
:func:`emit_step`, which refuses events other than those the step names: a transition cannot
commit something its diagram does not show.
"""

from __future__ import annotations

from collections.abc import Mapping

from machines import ramp_up
from machines.lifecycle import InvalidTransition, MissingGuardError, Step
from policy.cpu.txn import Txn
from policy.errors import ErrorKind, PolicyError
from policy.state.entries import ContainerEntry
from policy.state.events import Event

__all__ = ["RampUpError", "container_phase", "emit_step", "fire"]


class RampUpError(PolicyError):
    """A lifecycle trigger the container's state does not allow, or events it does not name."""

    kind = ErrorKind.REFUSED


_SYSTEM_CORES = "system_cores"


def container_phase(entry: ContainerEntry, *, system_cores: bool = False) -> str:
    """The ramp-up machine state of a stored container entry.

    shared: ``ramping`` while flagged, else ``pooled``; dedicated: ``dedicated_ramping`` while
    flagged, else ``dedicated``; reclaimed: ``reclaimed``; with ``system_cores`` (the v0.5.47
    level, which stores system_cores containers), system_cores: ``reclaimed`` too.

    Raises:
        RampUpError: the entry's QoS level has no lifecycle (no handler ever stores one).
    """
    if entry.is_shared():
        return ramp_up.RAMPING if entry.ramp_up else ramp_up.POOLED
    if entry.is_dedicated():
        return ramp_up.DEDICATED_RAMPING if entry.ramp_up else ramp_up.DEDICATED
    if entry.is_reclaimed() or (system_cores and entry.qos_level == _SYSTEM_CORES):
        # system_cores (v0.5.47 only) is placed directly and never ramps: reclaimed's lifecycle.
        return ramp_up.RECLAIMED
    raise RampUpError(
        f"pod: {entry.pod_uid}, container: {entry.container_name}: qos level "
        f"{entry.qos_level!r} has no ramp-up lifecycle"
    )


def fire(phase: str, trigger: str, guards: Mapping[str, bool] | None = None) -> Step | None:
    """The step ``trigger`` takes from ``phase`` in the ramp-up table.

    Args:
        phase: the container's machine state (``container_phase``, or ``"new"``).
        trigger: e.g. ``"finish_ramp_up"``.
        guards: the answer to every guard the trigger consults from ``phase``.

    Returns:
        The step, or None when the guards refuse every transition.

    Raises:
        RampUpError: the trigger is illegal in ``phase``, or a guard answer is missing.
    """
    try:
        return ramp_up.lifecycle().step(phase, trigger, guards)
    except (InvalidTransition, MissingGuardError) as err:
        raise RampUpError(str(err)) from err


def emit_step(txn: Txn, step: Step, *events: Event) -> None:
    """Commit ``events`` for ``step``: their classes must be exactly the events it names.

    Raises:
        RampUpError: the events differ from the step's (nothing is emitted).
        StateError: an event does not fit the state (nothing is emitted).
    """
    names = tuple(type(event).__name__ for event in events)
    if names != step.events:
        raise RampUpError(
            f"ramp_up: {step.trigger!r} from {step.source!r} commits {list(step.events)}, "
            f"not {list(names)}"
        )
    txn.emit(*events)
