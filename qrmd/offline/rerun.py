"""``qrmd journal rerun``: take every journaled decision again with today's policy code.

The safe-rollout check for a new qrmd (DESIGN.md, "any decision can be re-run from the journal
alone"): each record's inputs (its cause, or for a balance round the inputs its round event
holds) go through the policy code of this qrmd, on the state replayed up to the record before
it, and the events it decides now are compared with the events the record holds. A
divergence names the record, what it holds, and what the policy decides now (or the error it
raises now); a record written by an older qrmd re-runs through the cause upgrade of
``policy.cpu.cause``.

Re-runners are registered by owner and cause kind (:data:`RERUNNERS`): the Allocator's kubelet
RPCs, residual removal and sys-advisor decisions (``qrmd.offline.decision_rerun``), the balancer's
rounds and taken steps (``policy.balance.rerun``), the CPU pressure plugins' decisions
(``policy.cpu.pressure.rerun``).
The owner is the state section the record's events belong to (:data:`SECTION_OWNERS`), since
two decision-makers may name a command alike (the balancer's and the CPU pressure plugins'
``GetEvictPods``). A kind without a re-runner is counted as not re-runnable, never guessed at;
a new decision-maker adds its section and kinds here. The Allocator's settings (reserve, QoS
configuration, options) are the caller's to give, the ones the node ran with; each daemon
start record (``qrmd.store.start_record``) holds the node's, so a start whose settings differ from
the given ones is reported by name: divergences after it may be the settings, not the code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from journal import Record
from journal.records import pack, unpack
from policy.balance.errors import BalanceError
from policy.balance.rerun import rerun_record as rerun_balancer_record
from policy.cpu.context import PolicyContext
from policy.cpu.pressure.rerun import COMMANDS as PRESSURE_COMMANDS
from policy.cpu.pressure.rerun import rerun_cause as rerun_pressure_cause
from policy.errors import PolicyError
from policy.state.advisor_section import ADVISOR_SECTION
from policy.state.codec import EVENT_TYPES, encode_event
from policy.state.pressure.events import PRESSURE_SECTION
from policy.state.replay import ReplayError, decode_events
from policy.state.sections import BALANCE_SECTION, CPU_SECTION, State
from qrmd.offline.decision_rerun import RerunError, rerun_record
from qrmd.offline.renderers import cause_kind
from qrmd.offline.walk import Step
from qrmd.store.start_record import START_KIND, policy_settings, settings_fingerprint

__all__ = [
    "RERUNNERS",
    "SECTION_OWNERS",
    "Divergence",
    "RerunSummary",
    "Retaken",
    "owner_of",
    "rerun_steps",
]


@dataclass(frozen=True, slots=True)
class Retaken:
    """A decision taken again: the events it decides now, or why it could not be taken.

    Attributes:
        events: the events decided now, encoded as the journal holds them (None when the
            policy raised or there was nothing to re-run).
        reply: the reply decided now, in words ("" when none).
        error: the error the policy raised now, or why the record cannot be re-run.
        nothing: why there is nothing to re-run (a round whose inputs could not be read).
    """

    events: list[Any] | None
    reply: str = ""
    error: str = ""
    nothing: str = ""


Rerunner = Callable[[Record, State, PolicyContext], Retaken]


def _encoded(events: Iterable[Any]) -> list[Any]:
    # Through msgpack and back, as the journal stores them (tuples come back as lists), so
    # the comparison with a record's events is like for like.
    return list(unpack(pack([encode_event(event) for event in events], "re-run events")))


def _rerun_allocator(record: Record, before: State, settings: PolicyContext) -> Retaken:
    try:
        again = rerun_record(record, before, settings)
    except RerunError as err:
        return Retaken(None, error=str(err))
    if again.decision is None:
        return Retaken(None, error=f"the policy refuses it now: {again.refusal}")
    decision = again.decision
    error = f"the decision now carries the error: {decision.error}" if decision.error else ""
    return Retaken(_encoded(decision.events), reply=repr(decision.reply), error=error)


def _rerun_balancer(record: Record, before: State, settings: PolicyContext) -> Retaken:
    del settings  # a round's inputs, configuration included, are all in its event
    try:
        events = decode_events(record)
        again = rerun_balancer_record(before.balance, record.cause, events, f"record {record.seq}")
    except (ReplayError, BalanceError) as err:
        return Retaken(None, error=f"record {record.seq} cannot be re-run: {err}")
    if again is None:
        return Retaken(None, nothing="the round's inputs could not be read when it ran")
    return Retaken(_encoded(again.events), reply=repr(again.reply))


def _rerun_pressure(record: Record, before: State, settings: PolicyContext) -> Retaken:
    try:
        again = rerun_pressure_cause(before.cpu_pressure, record.cause, settings.qos)
    except PolicyError as err:  # InputError included: a cause that does not decode
        return Retaken(None, error=f"record {record.seq} does not re-run now: {err}")
    return Retaken(_encoded(again.events), reply=repr(again.reply))


ALLOCATOR, BALANCER, PRESSURE = "allocator", "balancer", "cpu_pressure"

#: state section → the decision-maker whose records carry its events.
SECTION_OWNERS: dict[str, str] = {
    CPU_SECTION: ALLOCATOR,
    ADVISOR_SECTION: ALLOCATOR,
    BALANCE_SECTION: BALANCER,
    PRESSURE_SECTION: PRESSURE,
}

#: (owner, cause kind) → how to re-run a record of that kind.
RERUNNERS: dict[tuple[str, str], Rerunner] = {
    **{
        (ALLOCATOR, kind): _rerun_allocator
        for kind in (
            "StartPolicy",
            "Allocate",
            "RemovePod",
            "GetResourcesAllocation",
            "RemoveResidualPods",
            "GetTopologyHints",
            "PreStartContainer",
            # sys-advisor's decisions (policy.cpu.advisor), decided by the Allocator too
            "ListAndWatch",
            "AdvisorSilence",
            "AddContainerRefused",
        )
    },
    **{(BALANCER, kind): _rerun_balancer for kind in ("Tick", "GetAdvices", "GetEvictPods")},
    **{(PRESSURE, kind): _rerun_pressure for kind in PRESSURE_COMMANDS},
}


def owner_of(record: Record) -> str:
    """Who decided ``record``: the owner of its first event's section ("" without events)."""
    for raw in record.events:
        kind = raw.get("kind") if isinstance(raw, dict) else None
        cls = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
        if cls is None:
            return "?"
        return SECTION_OWNERS.get(cls.section, cls.section)
    return ""


def _differing_settings(cause: dict[Any, Any], given: dict[str, Any]) -> list[str]:
    """The names of the settings a daemon start recorded that differ from ``given``."""
    recorded = cause.get("settings")
    if not isinstance(recorded, dict):
        return []
    if cause.get("settings_fingerprint") == settings_fingerprint(given):
        return []
    return sorted(k for k in set(recorded) | set(given) if recorded.get(k) != given.get(k))


@dataclass(frozen=True, slots=True)
class Divergence:
    """A record whose decision comes out differently today."""

    seq: int
    kind: str
    expected: list[Any]
    got: list[Any] | None
    reply: str
    error: str

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values."""
        return {
            "seq": self.seq,
            "kind": self.kind,
            "expected_events": self.expected,
            "got_events": self.got,
            "got_reply": self.reply,
            "error": self.error or None,
        }


@dataclass(slots=True)
class RerunSummary:
    """What a re-run over a range found."""

    rerun: int = 0
    same: int = 0
    divergences: list[Divergence] = field(default_factory=list)
    nothing_to_rerun: dict[int, str] = field(default_factory=dict)
    no_rerunner: dict[str, list[int]] = field(default_factory=dict)
    #: Daemon starts whose settings differ from the ones given: seq → the settings that differ.
    other_settings: dict[int, list[str]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON values."""
        return {
            "other_settings": {str(k): v for k, v in self.other_settings.items()},
            "rerun": self.rerun,
            "same": self.same,
            "divergences": [d.to_json() for d in self.divergences],
            "nothing_to_rerun": {str(k): v for k, v in self.nothing_to_rerun.items()},
            "no_rerunner": self.no_rerunner,
        }


def rerun_steps(
    steps: Iterable[Step],
    settings: PolicyContext,
    summary: RerunSummary,
    rerunners: dict[tuple[str, str], Rerunner] | None = None,
) -> Iterator[Divergence]:
    """Re-run every step's record; yield each divergence as it is found.

    Args:
        steps: the records to re-run, each with the state before it.
        settings: the Allocator's settings, as the node ran with them.
        summary: filled in as the steps go by.
        rerunners: the registry (default :data:`RERUNNERS`).

    Yields:
        Each divergence.

    Raises:
        PolicyError: never for a refusal (that is a divergence); only from a re-runner bug.
    """
    table = RERUNNERS if rerunners is None else rerunners
    given = policy_settings(settings)
    for step in steps:
        record = step.record
        kind = cause_kind(record.cause)
        if kind == START_KIND:
            differing = _differing_settings(record.cause, given)
            if differing:
                summary.other_settings[record.seq] = differing
        rerunner = table.get((owner_of(record), kind))
        if rerunner is None:
            summary.no_rerunner.setdefault(kind, []).append(record.seq)
            continue
        try:
            retaken = rerunner(record, step.before, settings)
        except PolicyError as err:  # a rule that raises where it used to decide
            retaken = Retaken(None, error=f"the policy raises now: {err}")
        if retaken.nothing:
            summary.nothing_to_rerun[record.seq] = retaken.nothing
            continue
        summary.rerun += 1
        # An error alone is no divergence: a refused Allocate commits its clean-up with its
        # error (cpu-policy §7.2), and decides the same events and error again.
        if retaken.events == list(record.events):
            summary.same += 1
            continue
        divergence = Divergence(
            record.seq, kind, list(record.events), retaken.events, retaken.reply, retaken.error
        )
        summary.divergences.append(divergence)
        yield divergence
