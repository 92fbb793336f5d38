"""Re-run a journaled CPU pressure decision from its cause (DESIGN.md: "any decision can be
re-run from the journal alone").

The CPU pressure actor journals each decision with the cause ``{"command", "now", "settings",
"inputs", ...}`` (``actors.cpu_pressure``): the command names the decision, ``settings`` the
plugins' settings in force (``PressureSettings.to_json``), ``inputs`` what it read
(``LoadInputs``, ``TopInputs``, ``SuppressionInputs``; nothing for ``ThresholdMet``, which reads
only the section). Given the ``cpu_pressure`` section just before the record (the journal
replayed up to it), :func:`rerun_cause` takes the decision again; equal events show the record
is explained by the code and the inputs it names.

A ``GetEvictPods`` cause that records the reference level v0.5.47 (``reference``,
``policy.cpu.reference.reference_cause``) holds ``NUMASuppressionInputs`` and is re-decided by
the v0.5.47 rule (``policy.cpu.pressure.suppression_numa``); one without it was decided at
v0.5.3.

Only the QoS configuration (how a pod's level is resolved) is the node's, not the cause's: the
caller passes it, as for the Allocator's re-runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from policy.cpu.pressure.inputs import InputError, LoadInputs, SuppressionInputs, TopInputs, number
from policy.cpu.pressure.load import collect_load, threshold_met, top_eviction_pods
from policy.cpu.pressure.settings import PressureSettings, PressureSettingsError
from policy.cpu.pressure.suppression import evict_pods
from policy.cpu.pressure.suppression_numa import NUMASuppressionInputs, evict_pods_by_numa
from policy.cpu.qos import QoSConfig
from policy.cpu.reference import is_v0_5_47, reference_of_cause
from policy.decision import Decision
from policy.state.pressure import PressureHistory
from policy.state.pressure.events import LoadHistoryCleared

__all__ = ["COMMANDS", "rerun_cause"]

#: The commands the actor journals, by the name its causes give them.
COMMANDS: Final = ("Start", "CollectLoad", "ThresholdMet", "GetTopEvictionPods", "GetEvictPods")


def rerun_cause(
    history: PressureHistory, cause: Mapping[str, Any], qos: QoSConfig | None = None
) -> Decision[Any]:
    """The decision a cause records, taken again on ``history`` (the section before it).

    Raises:
        InputError: not a CPU pressure cause, or a field does not decode (named).
        PolicyError: the decision itself refused (as it did when it ran).
    """
    command = cause.get("command")
    if command not in COMMANDS:
        raise InputError(f"cause.command: {command!r} is not one of {list(COMMANDS)}")
    now = number(cause.get("now"), "cause.now")
    if command == "Start":
        return Decision(events=(LoadHistoryCleared("restart"),), reply=None)
    try:
        settings = PressureSettings.from_json(cause.get("settings"), "cause.settings")
    except PressureSettingsError as err:
        raise InputError(str(err)) from None
    inputs = cause.get("inputs", {})
    if command == "CollectLoad":
        return collect_load(history, LoadInputs.from_json(inputs, "cause.inputs"), settings, now)
    if command == "ThresholdMet":
        return threshold_met(history, settings, now)
    if command == "GetTopEvictionPods":
        top = TopInputs.from_json(inputs, "cause.inputs")
        return top_eviction_pods(history, top, settings, now)
    try:
        version, _ = reference_of_cause(cause)
    except ValueError as err:
        raise InputError(f"cause.reference: {err}") from None
    if is_v0_5_47(version):
        by_numa = NUMASuppressionInputs.from_json(inputs, "cause.inputs")
        return evict_pods_by_numa(history, by_numa, settings, now, qos)
    return evict_pods(
        history, SuppressionInputs.from_json(inputs, "cause.inputs"), settings, now, qos
    )
