"""The advisor section of the state: who sizes the pools, and the last calculation result's
outcome (cpu-policy §11.5, §11.8; DESIGN.md "AdvisorLink").

Every sys-advisor response is one decision (``policy.cpu.advisor.decision``) and, unless it
is coalesced, one journal record whose cause is the response itself. The CPU changes of an
applied response are CPU events; this section records what the CPU section cannot:

* ``AdvisorResponseApplied(fingerprint)``: a response was applied (its CPU events are in the
  same record). The fingerprint is the response's content digest.
* ``AdvisorResponseRefused(fingerprint, stage, reason)``: a response was refused at
  ``stage`` (``validate``, ``blocks`` or ``apply``, the three steps of
  ``allocate_by_cpu_advisor``; at v0.5.47 also ``request``, a GetAdvice answer checked against
  its request) for ``reason`` (the reference's message). The CPU state is
  untouched; the record exists so that "what did the advisor say at 03:12 and why was it
  refused?" has an answer in the journal.
* ``AdvisorSizingSuspended(silent_since, unhealthy_after_s)``: no response was applied for
  ``unhealthy_after_s`` since ``silent_since``; pools are sized by requests from now on
  (qrmd's fallback, beyond the reference; Katalyst v0.5.4 added a similar one). The record
  also holds the re-plan's CPU events.
* ``AdvisorSizingResumed()``: the first response applied after a fallback takes over again.
* ``AdvisorOverlapAllowed(allow)``: Katalyst v0.5.47 only, in the record of an applied
  response whose ``allow_shared_cores_overlap_reclaimed_cores`` differs from the stored one
  (``allocateByCPUAdvisor`` keeps it in its state and checkpoint,
  ``policy_advisor_handler.go``:515-521 at tag v0.5.47); the pool engine then lets reclaim
  overlap the share-type pools (``policy.cpu.advisor.overlap``). The section writes the flag
  only while it is set, so a v0.5.3 section reads and writes as it always did.
* ``NUMAHeadroomSet(headroom)``: at v0.5.47, the per-NUMA headroom of the response's
  ``cpu_numa_headroom`` extra entry, kept as the reference keeps it in its CPU checkpoint
  (``SetNUMAHeadroom``, ``policy_advisor_handler.go:1307-1330``,
  ``state/state_checkpoint.go:204-208``). Reclaimed NUMA-binding hints read it
  (``policy.cpu.rnb``); until an advisor sends one it is empty, and the checkpoint of a
  section without it is the one it always was.

Coalescing. sys-advisor answers every few seconds, mostly with the same result. The section
keeps the last response's fingerprint and outcome; a response with the same fingerprint, the
same outcome (and, when refused, the same stage and reason) and no CPU change commits nothing
at all, so an idle node writes no advisor records while its advisor is steady, and replay still
equals live (a coalesced response changes no state).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Final

from policy.decision import Event
from policy.errors import CodecError, StateError

__all__ = [
    "ADVISOR_EVENT_TYPES",
    "ADVISOR_SECTION",
    "APPLIED",
    "REFUSED",
    "SIZED_BY_ADVISOR",
    "SIZED_BY_REQUESTS",
    "AdvisorEvent",
    "AdvisorOverlapAllowed",
    "AdvisorResponseApplied",
    "AdvisorResponseRefused",
    "AdvisorSizingResumed",
    "AdvisorSizingSuspended",
    "AdvisorState",
    "NUMAHeadroomSet",
    "apply_advisor_event",
    "decode_advisor_event",
    "decode_advisor_section",
    "encode_advisor_event",
    "encode_advisor_section",
]

ADVISOR_SECTION: Final = "advisor"

#: Who sizes the pools: sys-advisor's results, or the request-based rules (the fallback).
SIZED_BY_ADVISOR: Final = "advisor"
SIZED_BY_REQUESTS: Final = "requests"

#: Outcomes of the last response.
APPLIED: Final = "applied"
REFUSED: Final = "refused"

#: Stages at which a response can be refused (§11.5 ``allocate_by_cpu_advisor``; ``request``:
#: a v0.5.47 GetAdvice answer checked against its request).
STAGES: Final = ("request", "validate", "blocks", "apply")


@dataclass(frozen=True, slots=True)
class AdvisorState:
    """Who sizes the pools, and the last journaled response's fingerprint and outcome.

    ``last_outcome`` is ``""`` until a response is journaled; ``last_stage`` and
    ``last_reason`` are set for a refused one only.
    """

    sizing: str = SIZED_BY_ADVISOR
    last_fingerprint: str = ""
    last_outcome: str = ""
    last_stage: str = ""
    last_reason: str = ""
    allow_shared_cores_overlap_reclaimed_cores: bool = False
    numa_headroom: tuple[tuple[int, float], ...] = ()

    def headroom_of(self) -> dict[int, float]:
        """The per-NUMA headroom sys-advisor last sent (``GetNUMAHeadroom``), by NUMA."""
        return dict(self.numa_headroom)

    def is_sized_by_requests(self) -> bool:
        """True while the fallback sizes the pools by requests."""
        return self.sizing == SIZED_BY_REQUESTS


class AdvisorEvent(Event):
    """An event of the advisor section."""

    __slots__ = ()

    section: ClassVar[str] = ADVISOR_SECTION


@dataclass(frozen=True, slots=True)
class AdvisorResponseApplied(AdvisorEvent):
    """A response was applied; its CPU events are in the same record."""

    fingerprint: str


@dataclass(frozen=True, slots=True)
class AdvisorResponseRefused(AdvisorEvent):
    """A response was refused at ``stage`` for ``reason``; no CPU state changed."""

    fingerprint: str
    stage: str
    reason: str


@dataclass(frozen=True, slots=True)
class AdvisorSizingSuspended(AdvisorEvent):
    """No response applied since ``silent_since`` for ``unhealthy_after_s``: pools are sized
    by requests from now on."""

    silent_since: float
    unhealthy_after_s: float


@dataclass(frozen=True, slots=True)
class AdvisorSizingResumed(AdvisorEvent):
    """A response was applied after a fallback: sys-advisor sizes the pools again."""


@dataclass(frozen=True, slots=True)
class AdvisorOverlapAllowed(AdvisorEvent):
    """v0.5.47: the advisor now does (or no longer does) let shared cores overlap reclaimed
    cores."""

    allow: bool


@dataclass(frozen=True, slots=True)
class NUMAHeadroomSet(AdvisorEvent):
    """sys-advisor's per-NUMA headroom (CPUs reclaimed pods may use in each NUMA node), as
    ``(numa, cores)`` pairs by NUMA; it replaces the one kept before."""

    headroom: tuple[tuple[int, float], ...]


#: Every advisor-section event type, in the order the codec documents them.
ADVISOR_EVENT_TYPES: Final[tuple[type[AdvisorEvent], ...]] = (
    AdvisorResponseApplied,
    AdvisorResponseRefused,
    AdvisorSizingSuspended,
    AdvisorSizingResumed,
    AdvisorOverlapAllowed,
    NUMAHeadroomSet,
)


def apply_advisor_event(state: AdvisorState, event: Event) -> AdvisorState:
    """The advisor section after one event; ``state`` is unchanged.

    Raises:
        StateError: a response applied while pools are sized by requests (the switch back is
            its own event), a switch to the mode already in force, or an unknown stage.
    """
    match event:
        case AdvisorResponseApplied(fingerprint=fingerprint):
            if state.is_sized_by_requests():
                raise StateError(
                    "AdvisorResponseApplied: pools are sized by requests; "
                    "AdvisorSizingResumed must come first"
                )
            return replace(
                state,
                last_fingerprint=fingerprint,
                last_outcome=APPLIED,
                last_stage="",
                last_reason="",
            )
        case AdvisorResponseRefused(fingerprint=fingerprint, stage=stage, reason=reason):
            if stage not in STAGES:
                raise StateError(f"AdvisorResponseRefused: unknown stage {stage!r:.40}")
            return replace(
                state,
                last_fingerprint=fingerprint,
                last_outcome=REFUSED,
                last_stage=stage,
                last_reason=reason,
            )
        case AdvisorSizingSuspended():
            if state.is_sized_by_requests():
                raise StateError("AdvisorSizingSuspended: pools are already sized by requests")
            return replace(state, sizing=SIZED_BY_REQUESTS)
        case AdvisorSizingResumed():
            if not state.is_sized_by_requests():
                raise StateError("AdvisorSizingResumed: sys-advisor already sizes the pools")
            return replace(state, sizing=SIZED_BY_ADVISOR)
        case AdvisorOverlapAllowed(allow=allow):
            return replace(state, allow_shared_cores_overlap_reclaimed_cores=allow)
        case NUMAHeadroomSet(headroom=headroom):
            numas = [numa for numa, _ in headroom]
            if numas != sorted(set(numas)):
                raise StateError(f"NUMAHeadroomSet: NUMA nodes not sorted and unique: {numas}")
            return replace(state, numa_headroom=headroom)
    raise StateError(f"{type(event).__name__} is not an event of the advisor section")


# -- codec (policy.state.codec registers it) -------------------------------------------------

_SECTION_FIELDS: Final = (
    "sizing",
    "last_fingerprint",
    "last_outcome",
    "last_stage",
    "last_reason",
)
_HEADROOM_FIELD: Final = "numa_headroom"


def encode_advisor_event(event: Event) -> dict[str, Any]:
    """An advisor event's fields as primitives (without its ``kind``)."""
    match event:
        case AdvisorResponseApplied(fingerprint=fingerprint):
            return {"fingerprint": fingerprint}
        case AdvisorResponseRefused(fingerprint=fingerprint, stage=stage, reason=reason):
            return {"fingerprint": fingerprint, "stage": stage, "reason": reason}
        case AdvisorSizingSuspended(silent_since=since, unhealthy_after_s=after):
            return {"silent_since": since, "unhealthy_after_s": after}
        case AdvisorSizingResumed():
            return {}
        case AdvisorOverlapAllowed(allow=allow):
            return {"allow": allow}
        case NUMAHeadroomSet(headroom=headroom):
            return {"headroom": [[numa, cores] for numa, cores in headroom]}
    raise CodecError(f"{type(event).__name__} is not an event of the advisor section")


def decode_advisor_event(cls: type[Event], items: Mapping[str, Any], where: str) -> Event:
    """The advisor event of class ``cls`` from its (already name-checked) fields.

    Raises:
        CodecError: a field of the wrong type; the message names it.
    """
    if cls is AdvisorSizingSuspended:
        return AdvisorSizingSuspended(
            _number(items["silent_since"], f"{where}.silent_since"),
            _number(items["unhealthy_after_s"], f"{where}.unhealthy_after_s"),
        )
    if cls is AdvisorOverlapAllowed:
        return AdvisorOverlapAllowed(_bool(items["allow"], f"{where}.allow"))
    if cls is NUMAHeadroomSet:
        return NUMAHeadroomSet(_headroom(items["headroom"], f"{where}.headroom"))
    values = {name: _text(value, f"{where}.{name}") for name, value in items.items()}
    values.pop("kind", None)
    return cls(**values)


#: Written only while set, so that a v0.5.3 section is what it always was.
_OVERLAP_FIELD: Final = "allow_shared_cores_overlap_reclaimed_cores"


def encode_advisor_section(state: AdvisorState) -> dict[str, Any]:
    """The section as primitives (checkpoints); the overlap flag only while set and the NUMA
    headroom only when there is one, so a node that never had either writes the checkpoint it
    always wrote."""
    out: dict[str, Any] = {name: getattr(state, name) for name in _SECTION_FIELDS}
    if state.allow_shared_cores_overlap_reclaimed_cores:
        out[_OVERLAP_FIELD] = True
    if state.numa_headroom:
        out[_HEADROOM_FIELD] = [[numa, cores] for numa, cores in state.numa_headroom]
    return out


def decode_advisor_section(data: object, topology: object) -> AdvisorState:
    """The section :func:`encode_advisor_section` wrote.

    Raises:
        CodecError: malformed; the message names the field.
    """
    del topology
    where = "sections.advisor"
    if not isinstance(data, dict):
        raise CodecError(f"{where}: expected a map, got {type(data).__name__}")
    if set(data) - {_OVERLAP_FIELD, _HEADROOM_FIELD} != set(_SECTION_FIELDS):
        raise CodecError(
            f"{where}: expected exactly the fields {', '.join(_SECTION_FIELDS)} "
            f"(and {_OVERLAP_FIELD}, {_HEADROOM_FIELD} when set)"
        )
    values = {name: _text(data[name], f"{where}.{name}") for name in _SECTION_FIELDS}
    if values["sizing"] not in (SIZED_BY_ADVISOR, SIZED_BY_REQUESTS):
        raise CodecError(f"{where}.sizing: unknown value {values['sizing']!r:.40}")
    overlap = _bool(data.get(_OVERLAP_FIELD, False), f"{where}.{_OVERLAP_FIELD}")
    headroom = _headroom(data.get(_HEADROOM_FIELD, []), f"{where}.{_HEADROOM_FIELD}")
    return AdvisorState(
        **values,
        allow_shared_cores_overlap_reclaimed_cores=overlap,
        numa_headroom=headroom,
    )


def _bool(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise CodecError(f"{where}: expected a bool, got {type(value).__name__}")
    return value


def _headroom(value: object, where: str) -> tuple[tuple[int, float], ...]:
    if not isinstance(value, list):
        raise CodecError(f"{where}: expected a list, got {type(value).__name__}")
    pairs: list[tuple[int, float]] = []
    for position, pair in enumerate(value):
        if not isinstance(pair, list | tuple) or len(pair) != 2:
            raise CodecError(f"{where}[{position}]: expected a [numa, cores] pair")
        numa = pair[0]
        if isinstance(numa, bool) or not isinstance(numa, int) or numa < 0:
            raise CodecError(f"{where}[{position}]: NUMA {numa!r:.20} is not a NUMA id")
        pairs.append((numa, _number(pair[1], f"{where}[{position}]")))
    numas = [numa for numa, _ in pairs]
    if numas != sorted(set(numas)):
        raise CodecError(f"{where}: NUMA nodes not sorted and unique: {numas}")
    return tuple(pairs)


def _text(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise CodecError(f"{where}: expected a string, got {type(value).__name__}")
    return value


def _number(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CodecError(f"{where}: expected a number, got {type(value).__name__}")
    return float(value)
