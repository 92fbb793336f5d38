"""The cause of an Allocator commit: the inputs of its decision, as plain msgpack values.

A journal record keeps the whole input of its decision (journal package docstring) so that
forensics can say "because of which request" and re-run it through the policy
(``qrmd.offline.decision_rerun``): the call's name, the call's fields, what the pod source said and
the wall time the decision used. Example (cause version 3):

    {"rpc": "Allocate", "cause_version": 3, "now": 1715180645.0,
     "request": {"pod_uid": "pod-a", ..., "container_type": "MAIN",
                 "resource_requests": {"cpu": 2.0},
                 "hint": {"nodes": [0, 1], "preferred": true}, "annotations": {...}},
     "pod": {"phase": "unknown", "listing_age_s": null}}

Plain means: ``None``, bool, int, float, str, lists and string-keyed maps. Enums become their
names (readable in a dump, stable if values are renumbered), sets become sorted lists.

A residual removal (cpu-policy §12.4 step 4) holds the residual checker's evidence: the pods
due (``pod_uids``), the ``listing`` that last missed them (fingerprint, size, fetch time), every
missing pod's ``sightings`` (first and last sighting, count) and the candidates sys-advisor
refused (``advisor_refused``):

    {"rpc": "RemoveResidualPods", "cause_version": 3, "now": 1715180945.0,
     "pod_uids": ["pod-b"],
     "listing": {"fingerprint": "9f2c4e1a0b7d3c55", "pods": 41, "fetched_at": 1715180944.2},
     "sightings": {"pod-b": {"first_at": 1715180674.1, "last_at": 1715180944.2, "count": 10}},
     "advisor_refused": []}

Advisor decisions (cpu-policy §11.5, §7.2; DESIGN.md "AdvisorLink") have causes of the same
shape: ``ListAndWatch`` holds the response (``AdvisorResponse.to_json``), ``AdvisorSilence``
the fallback's ``silent_since`` and the ``unhealthy_after_s`` it was compared with, and
``AddContainerRefused`` the container whose Allocate the advisor refused, with the reason.

The reply. A committed kubelet call's cause also holds what kubelet was answered, under
``reply`` (:func:`reply_of`), so ``qrmd journal explain`` shows the answer itself rather than
a guess from a later state. It is not an input: re-runs ignore it, and a cause without it (a
journal written before it was kept) reads as before, its reply unknown. Compact by kind:

* Allocate: ``{"allocation": {"allocation_result": "1,3-15", "allocated_quantity": 14.0}}``
  — the ``cpu`` allocation sent (the hint it echoes is the request's, already in the cause);
  ``{"allocation": null}`` for an answer without one; ``{"error": "..."}`` when the call
  failed after committing (§7.2's finaliser).
* GetResourcesAllocation: ``{"listed_after_events": 2}`` — the listing covers every
  container, so instead of thousands of cpusets it names the state listed: the state before
  the record with its first 2 events (the lifecycle steps) applied, before the pool
  adjustment's (cpu-policy §10.1, §15.6). ``policy.cpu.listing_parts.pod_allocations`` of
  that state is the listing's part for a pod, by the code that made it live.

Versions. Version 1 (qrmd up to ``ac84ea9``) had no ``cause_version`` key and no ``pod``: the
decision read the pod phase from a live callable, which always answered "unknown". Version 2
adds ``cause_version`` and Allocate's ``pod``. Version 3 gives a residual removal its evidence
(version 2 named only the candidates, ``pod_uids``; the Allocator kept a count of its own).
:func:`upgrade_cause` turns an older cause into version 3 with what the old decision used: a
version-1 Allocate's pod phase becomes "unknown" with no age, and an older residual removal's
candidates become the due pods of evidence with no listing and no sightings (the old decision
removed exactly its candidates still in the state, as the new one does with such evidence);
:func:`decode_cause` upgrades first, so old journals re-run too.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import operator
from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass
from typing import Any, Final

from policy.cpu.advisor.refusal import AddContainerRefused
from policy.cpu.advisor.response import AdvisorResponse
from policy.cpu.allocation_listing import ResourcesAllocation
from policy.cpu.commands import (
    Allocate,
    AllocateInputs,
    GetResourcePluginOptions,
    GetResourcesAllocation,
    GetTopologyAwareAllocatableResources,
    GetTopologyAwareResources,
    GetTopologyHints,
    PodPhase,
    PreStartContainer,
    RemovePod,
    StartPolicy,
)
from policy.cpu.replies import AllocationReply
from policy.cpu.request import ContainerType, ResourceRequest, TopologyHint
from policy.cpu.residual_check import ListingSummary, ResidualEvidence, Sighting
from policy.cpu.residual_removal import ResidualPods
from policy.decision import Decision
from policy.errors import ErrorKind, PolicyError

__all__ = [
    "CAUSE_VERSION",
    "REPLY_KEY",
    "AdvisorSilence",
    "CauseError",
    "DecisionCause",
    "DecisionInputs",
    "ResidualPods",
    "cause_of",
    "decode_cause",
    "plain",
    "reply_of",
    "upgrade_cause",
]

#: The version :func:`cause_of` writes.
CAUSE_VERSION: Final = 3

_VERSION_KEY: Final = "cause_version"

#: The key of the answer kubelet got (module docstring, "The reply").
REPLY_KEY: Final = "reply"


@dataclass(frozen=True, slots=True)
class AdvisorSilence:
    """The inputs of the request-based fallback (``fall_back_when_silent``): since when no
    response was applied, and the ``--cpu-advisor-unhealthy-after`` it is compared with (a
    setting, journaled so a re-run does not depend on the flag the node runs with later)."""

    silent_since: float
    unhealthy_after_s: float


#: What a decided command's inputs can be (the ``inputs`` of its façade function).
DecisionInputs = (
    AllocateInputs
    | GetTopologyHints
    | RemovePod
    | GetResourcesAllocation
    | GetTopologyAwareResources
    | GetTopologyAwareAllocatableResources
    | GetResourcePluginOptions
    | PreStartContainer
    | StartPolicy
    | ResidualPods
    | AdvisorResponse
    | AdvisorSilence
    | AddContainerRefused
)


class CauseError(PolicyError):
    """A journaled cause that is not an Allocator cause of a known version and shape.

    The message names the record's RPC and the field at fault.
    """

    kind = ErrorKind.INTERNAL


@dataclass(frozen=True, slots=True)
class DecisionCause:
    """A decoded cause: the decision's inputs and the time it was taken at.

    Attributes:
        rpc: the command's name (``Allocate``).
        now: the wall time the policy was given, seconds since the epoch.
        inputs: the inputs the façade function was called with.
        version: the cause version the record was written with (before any upgrade).
    """

    rpc: str
    now: float
    inputs: DecisionInputs
    version: int


def cause_of(inputs: object, now: float, reply: dict[str, Any] | None = None) -> dict[str, Any]:
    """The journal cause of a decision taken on ``inputs`` at ``now`` (current version).

    Args:
        inputs: the decision's inputs: ``AllocateInputs``, ``ResidualPods``, or a command
            that is its own inputs (a frozen dataclass: ``RemovePod``, ``StartPolicy``, ...).
        now: the wall time, in seconds since the epoch, the policy was given.
        reply: what kubelet was answered (:func:`reply_of`), kept under ``reply``; None
            keeps nothing.

    Returns:
        ``{"rpc": <command name>, "cause_version": 3, "now": now, <field>: <plain>, ...}``;
        Allocate's fields are ``request`` and ``pod``, a residual removal's its evidence
        (``pod_uids``, ``listing``, ``sightings``) and ``advisor_refused``.

    Raises:
        TypeError: ``inputs`` is not a dataclass, or holds a value with no plain form.
    """
    if type(inputs) is AllocateInputs:
        # Every Allocate commits one: its request is written field by field (_request_plain),
        # the same map the general walk below gives, in the same order.
        cause: dict[str, Any] = {
            "rpc": type(inputs.call).__name__,
            _VERSION_KEY: CAUSE_VERSION,
            "now": now,
            "request": _request_plain(inputs.call.request),
            "pod": plain(inputs.pod),
        }
        if reply is not None:
            cause[REPLY_KEY] = reply
        return cause
    if isinstance(inputs, AdvisorResponse | AdvisorSilence):
        return _advisor_cause(inputs, now)
    if isinstance(inputs, AllocateInputs):
        rpc = type(inputs.call).__name__
        fields: dict[str, Any] = {
            "request": plain(inputs.call.request),
            "pod": plain(inputs.pod),
        }
    elif isinstance(inputs, ResidualPods):
        rpc, fields = "RemoveResidualPods", _residual_fields(inputs)
    elif (names := _field_names(type(inputs))) is not None and not isinstance(inputs, type):
        rpc = type(inputs).__name__
        fields = {name: plain(getattr(inputs, name)) for name in names}
    else:
        raise TypeError(f"no cause for inputs of type {type(inputs).__name__}")
    if reply is not None:
        fields[REPLY_KEY] = reply
    return {"rpc": rpc, _VERSION_KEY: CAUSE_VERSION, "now": now, **fields}


def _advisor_cause(inputs: AdvisorResponse | AdvisorSilence, now: float) -> dict[str, Any]:
    """The cause of an advisor decision, in the words of the advisor's decision module."""
    # Only a node with sys-advisor decides on its answers: a restart pays for every module.
    from policy.cpu.advisor import decision  # noqa: PLC0415 (with the first advisor decision)

    if isinstance(inputs, AdvisorResponse):
        return {**decision.response_cause(inputs, now), _VERSION_KEY: CAUSE_VERSION}
    return {
        **decision.silence_cause(decision.SilenceCheck(inputs.silent_since), now),
        _VERSION_KEY: CAUSE_VERSION,
        "unhealthy_after_s": inputs.unhealthy_after_s,
    }


def reply_of(inputs: object, decision: Decision[Any]) -> dict[str, Any] | None:
    """What kubelet was answered by the decision on ``inputs``, as a record keeps it.

    Args:
        inputs: the decision's inputs.
        decision: the decision taken on them.

    Returns:
        The ``reply`` of the module docstring for Allocate and GetResourcesAllocation; None
        for every other decision (kubelet's other committing calls answer nothing about a
        container, and the advisor's and checkers' decisions answer no kubelet call).
    """
    if isinstance(inputs, AllocateInputs):
        if decision.error is not None:
            return {"error": str(decision.error)}
        reply = decision.reply
        allocation = reply.allocation if isinstance(reply, AllocationReply) else None
        if allocation is None:
            return {"allocation": None}
        return {
            "allocation": {
                "allocation_result": allocation.allocation_result,
                "allocated_quantity": allocation.allocated_quantity,
            }
        }
    if isinstance(inputs, GetResourcesAllocation) and isinstance(
        decision.reply, ResourcesAllocation
    ):
        return {"listed_after_events": decision.reply.listed_after_events}
    return None


def plain(value: object) -> Any:
    """``value`` as msgpack-able plain data (see the module docstring).

    Args:
        value: a domain value: a dataclass, enum, mapping, set, sequence or scalar.

    Returns:
        The same information in plain types.

    Raises:
        TypeError: a value with no plain form (names its type).
    """
    # The exact types a cause is mostly made of first (every Allocate's cause walks a request
    # of a dozen strings and two string maps); subclasses (an IntEnum, a mapping proxy) take
    # the general checks below.
    kind = type(value)
    if kind is str or value is None or kind is bool or kind is int or kind is float:
        return value
    if kind is dict:
        return {str(key): plain(item) for key, item in value.items()}  # type: ignore[attr-defined]
    if isinstance(value, (bool, str)):
        return value
    if isinstance(value, enum.Enum):
        return value.name
    if isinstance(value, (int, float)):
        return value
    names = _field_names(type(value))
    if names is not None:
        return {name: plain(getattr(value, name)) for name in names}
    if isinstance(value, Mapping):
        return {str(key): plain(item) for key, item in value.items()}
    if isinstance(value, (Set, frozenset)):
        return sorted(plain(item) for item in value)
    if isinstance(value, (list, tuple)):
        return [plain(item) for item in value]
    raise TypeError(f"no plain form for a cause value of type {type(value).__name__}")


#: The request fields that hold text, which ``plain`` keeps as they are.
_REQUEST_TEXTS: Final = (
    "pod_uid",
    "pod_namespace",
    "pod_name",
    "container_name",
    "resource_name",
    "pod_role",
    "pod_type",
    "native_qos_class",
)
_request_texts: Final = operator.attrgetter(*_REQUEST_TEXTS)
_JUST_STR: Final = frozenset({str})
#: ``plain`` of each container type (its name), looked up: the enum's ``name`` is a property.
_TYPE_NAMES: Final = {member: member.name for member in ContainerType}


def _request_plain(request: ResourceRequest) -> Any:
    """``plain(request)``, written field by field for the request kubelet sends.

    Anything unusual (a subclass, a field of another type than the request declares) takes
    ``plain`` itself, so the result is always the general walk's.
    """
    texts = _request_texts(request)
    if type(request) is not ResourceRequest or frozenset(map(type, texts)) != _JUST_STR:
        return plain(request)
    container_type = request.container_type
    index = request.container_index
    hint = request.hint
    return {
        "pod_uid": texts[0],
        "pod_namespace": texts[1],
        "pod_name": texts[2],
        "container_name": texts[3],
        "container_type": (
            _TYPE_NAMES[container_type]
            if type(container_type) is ContainerType
            else plain(container_type)
        ),
        "container_index": index if type(index) is int else plain(index),
        "resource_name": texts[4],
        "resource_requests": plain(request.resource_requests),
        "pod_role": texts[5],
        "pod_type": texts[6],
        "hint": _hint_plain(hint) if type(hint) is TopologyHint else plain(hint),
        "labels": plain(request.labels),
        "annotations": plain(request.annotations),
        "native_qos_class": texts[7],
    }


def _hint_plain(hint: TopologyHint) -> dict[str, Any]:
    """``plain(hint)`` for a ``TopologyHint``, NUMA ids kept as they are when ints."""
    preferred = hint.preferred
    return {
        "nodes": [node if type(node) is int else plain(node) for node in hint.nodes],
        "preferred": preferred if type(preferred) is bool else plain(preferred),
    }


#: Field names by dataclass type (``None`` for other types): every Allocate's cause walks the
#: same few request types, so ``dataclasses.fields`` is asked once per type.
_FIELD_NAMES: dict[type, tuple[str, ...] | None] = {}


def _field_names(kind: type) -> tuple[str, ...] | None:
    try:
        return _FIELD_NAMES[kind]
    except KeyError:
        pass
    names = (
        tuple(field.name for field in dataclasses.fields(kind))
        if dataclasses.is_dataclass(kind)
        else None
    )
    _FIELD_NAMES[kind] = names
    return names


def _residual_fields(inputs: ResidualPods) -> dict[str, Any]:
    evidence = inputs.evidence.to_plain()
    return {
        "pod_uids": evidence["due"],
        "listing": evidence["listing"],
        "sightings": evidence["sightings"],
        "advisor_refused": list(inputs.advisor_refused),
    }


# -- reading causes back ------------------------------------------------------------------------


def upgrade_cause(cause: Mapping[Any, Any]) -> dict[Any, Any]:
    """A cause of any known version, rewritten in the current version.

    Args:
        cause: a record's cause as the journal holds it.

    Returns:
        A new map in version :data:`CAUSE_VERSION`; ``cause`` is not changed.

    Raises:
        CauseError: the version is not one this code knows (newer or malformed).
    """
    version = cause.get(_VERSION_KEY, 1)
    if isinstance(version, bool) or version not in range(1, CAUSE_VERSION + 1):
        raise CauseError(
            f"{cause.get('rpc', '?')} cause has version {version!r}; this qrmd reads "
            f"versions 1 to {CAUSE_VERSION}"
        )
    if version == CAUSE_VERSION:
        return dict(cause)
    upgraded = {**cause, _VERSION_KEY: CAUSE_VERSION}
    if upgraded.get("rpc") == "Allocate":
        # Version 1 decided with a pod source that never listed a pod: the phase was unknown.
        upgraded.setdefault("pod", plain(PodPhase()))
    if upgraded.get("rpc") == "RemoveResidualPods":
        # Versions 1 and 2 named the candidates only, and had no advisor in the removal.
        upgraded.setdefault("listing", None)
        upgraded.setdefault("sightings", {})
        upgraded.setdefault("advisor_refused", [])
    return upgraded


def decode_cause(cause: Mapping[Any, Any]) -> DecisionCause:
    """The decision inputs a journaled Allocator cause holds (upgrading old versions).

    Args:
        cause: a record's cause as the journal holds it.

    Returns:
        The decoded cause.

    Raises:
        CauseError: not an Allocator cause, a version this code does not read, or a field
            missing or of the wrong type (named in the message).
    """
    rpc = cause.get("rpc")
    if not isinstance(rpc, str) or rpc not in _DECODERS:
        raise CauseError(f"cause names no Allocator command: rpc={rpc!r}")
    decoder = _DECODERS[rpc]
    version = cause.get(_VERSION_KEY, 1)
    current = upgrade_cause(cause)
    now = _number(current, "now", rpc)
    return DecisionCause(rpc, now, decoder(_Fields(current, rpc)), int(version))


class _Fields:
    """Typed access to one cause map's fields, raising ``CauseError`` that names the field."""

    def __init__(self, data: Mapping[Any, Any], where: str) -> None:
        self.data = data
        self.where = where

    def get(self, key: str) -> Any:
        if key not in self.data:
            raise CauseError(f"{self.where}: field {key!r} is missing")
        return self.data[key]

    def text(self, key: str, default: str | None = None) -> str:
        if default is not None and key not in self.data:
            return default
        value = self.get(key)
        if not isinstance(value, str):
            raise CauseError(f"{self.where}: field {key!r} is {value!r}, not a string")
        return value

    def integer(self, key: str) -> int:
        value = self.get(key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise CauseError(f"{self.where}: field {key!r} is {value!r}, not an integer")
        return value

    def nested(self, key: str) -> _Fields:
        value = self.get(key)
        if not isinstance(value, dict):
            raise CauseError(f"{self.where}: field {key!r} is {value!r}, not a map")
        return _Fields(value, f"{self.where}.{key}")

    def str_map(self, key: str) -> dict[str, str] | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise CauseError(f"{self.where}: field {key!r} is not a map of strings")
        return dict(value)


def _number(data: Mapping[Any, Any], key: str, where: str) -> float:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        raise CauseError(f"{where}: field {key!r} is {value!r}, not a number")
    return float(value)


def _request(fields: _Fields) -> ResourceRequest:
    """A ``ResourceRequest`` from its plain form (the inverse of ``plain``)."""
    type_name = fields.text("container_type")
    try:
        container_type = ContainerType[type_name]
    except KeyError:
        raise CauseError(f"{fields.where}: container_type {type_name!r} is unknown") from None
    requests = fields.get("resource_requests")
    if not isinstance(requests, dict) or not all(
        isinstance(k, str) and isinstance(v, int | float) and not isinstance(v, bool)
        for k, v in requests.items()
    ):
        raise CauseError(f"{fields.where}: resource_requests is not a map of numbers")
    hint = None
    if fields.data.get("hint") is not None:
        raw = fields.nested("hint")
        nodes = raw.get("nodes")
        if not isinstance(nodes, list) or not all(
            isinstance(n, int) and not isinstance(n, bool) for n in nodes
        ):
            raise CauseError(f"{raw.where}: nodes {nodes!r} is not a list of NUMA ids")
        preferred = raw.get("preferred")
        if not isinstance(preferred, bool):
            raise CauseError(f"{raw.where}: preferred {preferred!r} is not a bool")
        hint = TopologyHint(tuple(nodes), preferred)
    return ResourceRequest(
        pod_uid=fields.text("pod_uid"),
        pod_namespace=fields.text("pod_namespace"),
        pod_name=fields.text("pod_name"),
        container_name=fields.text("container_name"),
        container_type=container_type,
        container_index=fields.integer("container_index"),
        resource_name=fields.text("resource_name"),
        resource_requests=dict(requests),
        pod_role=fields.text("pod_role", ""),
        pod_type=fields.text("pod_type", ""),
        hint=hint,
        labels=fields.str_map("labels"),
        annotations=fields.str_map("annotations"),
        native_qos_class=fields.text("native_qos_class", ""),
    )


def _pod(fields: _Fields) -> PodPhase:
    age = fields.data.get("listing_age_s")
    if age is not None:
        age = _number(fields.data, "listing_age_s", fields.where)
    return PodPhase(fields.text("phase"), age)


def _response(fields: _Fields) -> AdvisorResponse:
    try:
        return AdvisorResponse.from_json(fields.get("response"))
    except PolicyError as err:  # ResponseFormatError: names the field at fault
        raise CauseError(f"{fields.where}: response does not decode: {err}") from err


def _uids(fields: _Fields, key: str) -> tuple[str, ...]:
    uids = fields.get(key)
    if not isinstance(uids, list) or not all(isinstance(uid, str) for uid in uids):
        raise CauseError(f"{fields.where}: {key} {uids!r} is not a list of strings")
    return tuple(uids)


def _residual_pods(fields: _Fields) -> ResidualPods:
    """A residual removal's inputs from their plain form (the inverse of ``_residual_fields``)."""
    listing = None
    if fields.get("listing") is not None:
        raw = fields.nested("listing")
        listing = ListingSummary(
            raw.text("fingerprint"), raw.integer("pods"), _number(raw.data, "fetched_at", raw.where)
        )
    sightings: dict[str, Sighting] = {}
    table = fields.get("sightings")
    if not isinstance(table, dict):
        raise CauseError(f"{fields.where}: field 'sightings' is {table!r}, not a map")
    for uid in table:
        if not isinstance(uid, str):
            raise CauseError(f"{fields.where}: sightings has a key {uid!r}, not a pod uid")
        one = fields.nested("sightings").nested(uid)
        sightings[uid] = Sighting(
            _number(one.data, "first_at", one.where),
            _number(one.data, "last_at", one.where),
            one.integer("count"),
        )
    due = _uids(fields, "pod_uids")
    evidence = ResidualEvidence(sightings, due, listing, counted=True)
    return ResidualPods(evidence, _uids(fields, "advisor_refused"))


# Only committing commands reach the journal; the reads decode too, so one table serves any
# cause built with ``cause_of``.
_DECODERS: Mapping[str, Callable[[_Fields], DecisionInputs]] = {
    "Allocate": lambda f: AllocateInputs(
        Allocate(_request(f.nested("request"))), _pod(f.nested("pod"))
    ),
    "GetTopologyHints": lambda f: GetTopologyHints(_request(f.nested("request"))),
    "RemovePod": lambda f: RemovePod(f.text("pod_uid")),
    "GetResourcesAllocation": lambda f: GetResourcesAllocation(),
    "GetTopologyAwareResources": lambda f: GetTopologyAwareResources(
        f.text("pod_uid"), f.text("container_name")
    ),
    "GetTopologyAwareAllocatableResources": lambda f: GetTopologyAwareAllocatableResources(),
    "GetResourcePluginOptions": lambda f: GetResourcePluginOptions(),
    "PreStartContainer": lambda f: PreStartContainer(
        f.text("pod_uid"), f.text("pod_namespace"), f.text("pod_name"), f.text("container_name")
    ),
    "StartPolicy": lambda f: StartPolicy(),
    "RemoveResidualPods": _residual_pods,
    "ListAndWatch": _response,
    "AdvisorSilence": lambda f: AdvisorSilence(
        _number(f.data, "silent_since", f.where), _number(f.data, "unhealthy_after_s", f.where)
    ),
    "AddContainerRefused": lambda f: AddContainerRefused(
        f.text("pod_uid"), f.text("container_name"), f.text("reason")
    ),
}
