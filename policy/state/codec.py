"""Events and states as msgpack-able primitives, and back (journal records and checkpoints).

The format, schema version ``SCHEMA_VERSION``:

* an event is a dict ``{"kind": <event class name>, <field>: <value>, ...}`` with exactly the
  event's fields;
* a CPUSet is its list-format string (``"0-3,8"``, ``""`` for empty) or ``"nil"`` for the
  uninitialized set (§1.1); a label/annotation map is a dict of strings or None (null and
  ``{}`` are different, §5.1);
* a placement is ``{"kind": "in_pool", "pool": P}``, ``{"kind": "ramping"}`` or
  ``{"kind": "own", "result": CPUSET, "original": CPUSET}``;
* a container entry (in an event) is a dict of every ``ContainerEntry`` field, by field name;
* a state is ``{"schema": N, "topology": fingerprint, "sections": {name: section}}``; the CPU
  section is ``{"pools": {name: CPUSET}, "ramp_cpus": CPUSET or None, "containers": COLUMNS}``
  where COLUMNS holds the entries by field, sorted by key, repeated values written once
  (``policy.state.codec_columns``); checkpoints written before hold ``"containers": [entry]``
  instead, and still decode to the same state. ``encode_state(state, form="entries")`` writes
  that list (``policy.state.checkpoint_form``: for rolling back to a release before the
  columns). Derived indexes are never encoded: decoding rebuilds them by applying the entries;
* the balance section and its events are described in ``policy.balance.codec``, the advisor
  section and its events in ``policy.state.advisor_section``, the ``cpu_pressure`` section
  and its events in ``policy.state.pressure.codec``. A section added after a checkpoint was
  written (the advisor and ``cpu_pressure`` sections) has an ``empty`` value: a checkpoint
  without it decodes with that section empty, so an upgraded qrmd starts from an older
  checkpoint.

Each section registers one :class:`SectionCodec` in ``SECTION_CODECS``: its event types, how
their fields and its value are encoded and decoded. This module dispatches on the event's
``kind`` and the section's name and checks the framing (the ``kind``, exactly the event's
fields, every section present), so a new section adds a codec and touches no other section.

Only dict, list, str, int, float, bool and None appear. Decoding checks every field and
raises ``CodecError`` naming it (``ContainerAllocated.entry.placement.result: ...``) for any
malformed input, and nothing else. CPU events and container entries exactly as this module
writes them are decoded by ``policy.state.codec_fast`` without building that error context
(replay and restart decode thousands); anything else goes through the checks here, with the
same result.
"""

from __future__ import annotations

import dataclasses
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import immutables

from policy.balance.codec import (
    decode_balance_event,
    decode_balance_section,
    encode_balance_event,
    encode_balance_section,
)
from policy.balance.events import BALANCE_EVENT_TYPES, BALANCE_SECTION
from policy.errors import CodecError, StateError
from policy.state.advisor_section import (
    ADVISOR_EVENT_TYPES,
    ADVISOR_SECTION,
    AdvisorState,
    decode_advisor_event,
    decode_advisor_section,
    encode_advisor_event,
    encode_advisor_section,
)
from policy.state.checkpoint_form import CHECKPOINT_FORMS, DEFAULT_CHECKPOINT_FORM, CheckpointForm
from policy.state.codec_columns import decode_columns, encode_columns
from policy.state.codec_fast import fast_cpu_event, fast_entry, known_cpuset, remember_cpuset
from policy.state.cpu_apply import allocate_all, apply_cpu_event
from policy.state.cpu_state import CPUState
from policy.state.entries import RAMPING, ContainerEntry, InPool, OwnCPUs, Placement, Ramping
from policy.state.events import CPU_EVENT_TYPES, Event, PoolSet, RampCPUsSet
from policy.state.pressure.codec import (
    decode_pressure_event,
    decode_pressure_section,
    encode_pressure_event,
    encode_pressure_section,
)
from policy.state.pressure.events import PRESSURE_EVENT_TYPES, PRESSURE_SECTION
from policy.state.pressure.history import PressureHistory
from policy.state.sections import CPU_SECTION, State
from policy.topology.cpuset import CPUSet
from policy.topology.model import CPUTopology

__all__ = [
    "EVENT_TYPES",
    "MAX_CPU_ID",
    "SCHEMA_VERSION",
    "SECTION_CODECS",
    "SectionCodec",
    "decode_event",
    "decode_state",
    "encode_entry_maps",
    "encode_event",
    "encode_state",
]

#: Version of this format; bump it when an encoding changes meaning.
SCHEMA_VERSION: Final = 1

#: Largest CPU id a decoded cpuset may name: far above any node, low enough that a corrupt
#: ``"0-99999999999"`` cannot make a gigabyte bitmask.
MAX_CPU_ID: Final = 65535

_UINT64_MAX: Final = 2**64 - 1

_NUMBER = re.compile(r"\d+")


# -- primitive fields ---------------------------------------------------------------------


def _expect_str(value: object, where: str) -> str:
    if not isinstance(value, str):
        raise CodecError(f"{where}: expected a string, got {type(value).__name__}")
    return value


def _expect_float(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CodecError(f"{where}: expected a number, got {type(value).__name__}")
    return float(value)


def _expect_uint(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _UINT64_MAX:
        raise CodecError(f"{where}: expected an unsigned 64-bit integer, got {value!r:.40}")
    return value


def _expect_bool(value: object, where: str) -> bool:
    if not isinstance(value, bool):
        raise CodecError(f"{where}: expected a boolean, got {type(value).__name__}")
    return value


def _expect_dict(value: object, where: str) -> dict[Any, Any]:
    if not isinstance(value, dict):
        raise CodecError(f"{where}: expected a map, got {type(value).__name__}")
    return value


def _encode_cpuset(cpus: CPUSet) -> str:
    return cpus.to_json()


def _decode_cpuset(value: object, where: str) -> CPUSet:
    text = _expect_str(value, where)
    # Each valid text is parsed once per process (policy.state.codec_fast, the cache's why).
    known = known_cpuset(text)
    if known is not None:
        return known
    for number in _NUMBER.findall(text):
        if len(number) > 6 or int(number) > MAX_CPU_ID:
            raise CodecError(f"{where}: CPU id {number:.20} in {text!r:.60} exceeds {MAX_CPU_ID}")
    try:
        cpus = CPUSet.from_json(text)
    except ValueError as err:
        raise CodecError(f"{where}: {err}") from None
    remember_cpuset(text, cpus)
    return cpus


def _encode_str_map(value: Mapping[str, str] | None) -> dict[str, str] | None:
    return None if value is None else dict(value.items())


def _decode_str_map(value: object, where: str) -> immutables.Map[str, str] | None:
    if value is None:
        return None
    items = _expect_dict(value, where)
    for k, v in items.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise CodecError(f"{where}: keys and values must be strings, got {k!r:.40}: {v!r:.40}")
    return immutables.Map(items)


def _fields_of(data: object, where: str, expected: tuple[str, ...]) -> dict[str, Any]:
    """``data`` as a dict holding exactly ``expected`` keys (plus ``kind`` when expected)."""
    items = _expect_dict(data, where)
    missing = [name for name in expected if name not in items]
    if missing:
        raise CodecError(f"{where}: missing {', '.join(missing)}")
    extra = sorted(repr(k) for k in items if k not in expected)
    if extra:
        raise CodecError(f"{where}: unknown field {', '.join(extra):.80}")
    return items


# -- placements and entries ---------------------------------------------------------------


def _encode_placement(placement: Placement) -> dict[str, Any]:
    if isinstance(placement, InPool):
        if placement.numas is not None:
            # Only v0.5.47's reclaimed NUMA binding narrows a pool; every other placement
            # keeps the map it always had.
            return {
                "kind": "in_pool_numas",
                "pool": placement.pool_name,
                "numas": sorted(placement.numas),
            }
        return {"kind": "in_pool", "pool": placement.pool_name}
    if isinstance(placement, Ramping):
        return {"kind": "ramping"}
    return {
        "kind": "own",
        "result": _encode_cpuset(placement.result),
        "original": _encode_cpuset(placement.original),
    }


_PLACEMENT_FIELDS: Final = {
    "in_pool": ("kind", "pool"),
    "in_pool_numas": ("kind", "pool", "numas"),
    "ramping": ("kind",),
    "own": ("kind", "result", "original"),
}


def _decode_placement(value: object, where: str) -> Placement:
    kind = _expect_str(_expect_dict(value, where).get("kind"), f"{where}.kind")
    expected = _PLACEMENT_FIELDS.get(kind)
    if expected is None:
        raise CodecError(f"{where}.kind: unknown placement {kind!r:.40}")
    items = _fields_of(value, where, expected)
    if kind == "in_pool":
        return InPool(_expect_str(items["pool"], f"{where}.pool"))
    if kind == "in_pool_numas":
        numas = items["numas"]
        if not isinstance(numas, list):
            raise CodecError(f"{where}.numas: expected a list, got {type(numas).__name__}")
        return InPool(
            _expect_str(items["pool"], f"{where}.pool"),
            frozenset(_expect_uint(n, f"{where}.numas") for n in numas),
        )
    if kind == "ramping":
        return RAMPING
    return OwnCPUs(
        _decode_cpuset(items["result"], f"{where}.result"),
        _decode_cpuset(items["original"], f"{where}.original"),
    )


_ENTRY_FIELDS: Final = tuple(f.name for f in dataclasses.fields(ContainerEntry))
_ENTRY_DECODERS: Final[dict[str, Callable[[object, str], Any]]] = {
    "container_index": _expect_uint,
    "ramp_up": _expect_bool,
    "placement": _decode_placement,
    "labels": _decode_str_map,
    "annotations": _decode_str_map,
    "request_quantity": _expect_float,
}


#: Every field of an entry, in field order, read in one call.
_entry_values: Final = operator.attrgetter(*_ENTRY_FIELDS)


def _encode_entry(entry: ContainerEntry) -> dict[str, Any]:
    # Every field as it is, then the three with a codec of their own replaced in place (a
    # dict keeps a key's position when its value is replaced): one entry per Allocate.
    out = dict(zip(_ENTRY_FIELDS, _entry_values(entry), strict=True))
    out["placement"] = _encode_placement(out["placement"])
    out["labels"] = _encode_str_map(out["labels"])
    out["annotations"] = _encode_str_map(out["annotations"])
    return out


def _decode_entry(value: object, where: str) -> ContainerEntry:
    # Well-formed entries (nearly all) skip the per-field error context (codec_fast).
    entry = fast_entry(value)
    if entry is not None:
        return entry
    return _decode_entry_checked(value, where)


def _decode_entry_checked(value: object, where: str) -> ContainerEntry:
    items = _fields_of(value, where, _ENTRY_FIELDS)
    fields = {
        name: _ENTRY_DECODERS.get(name, _expect_str)(items[name], f"{where}.{name}")
        for name in _ENTRY_FIELDS
    }
    return ContainerEntry(**fields)


# -- events of the CPU section --------------------------------------------------------------

# Field codecs by the annotation the event dataclass declares (its source text).
_FIELD_CODECS: Final[dict[str, tuple[Callable[[Any], Any], Callable[[object, str], Any]]]] = {
    "str": (lambda v: v, _expect_str),
    "float": (lambda v: v, _expect_float),
    "CPUSet": (_encode_cpuset, _decode_cpuset),
    "Placement": (_encode_placement, _decode_placement),
    "ContainerEntry": (_encode_entry, _decode_entry),
}


def _event_fields(cls: type[Event]) -> tuple[tuple[str, str], ...]:
    fields = tuple((f.name, str(f.type)) for f in dataclasses.fields(cls))  # type: ignore[arg-type]
    for name, kind in fields:
        if kind not in _FIELD_CODECS:
            raise TypeError(f"{cls.__name__}.{name}: no codec for field type {kind!r}")
    return fields


_CPU_EVENT_FIELDS: Final[dict[type[Event], tuple[tuple[str, str], ...]]] = {
    cls: _event_fields(cls) for cls in CPU_EVENT_TYPES
}

#: Field types whose values are written as they are.
_AS_IS: Final = frozenset({"str", "float"})

#: A CPU event class's fields in order: each one's name and encoder (None: written as it is).
_FieldEncoders = tuple[tuple[str, Callable[[Any], Any] | None], ...]

_CPU_EVENT_ENCODERS: Final[dict[type[Event], _FieldEncoders]] = {
    cls: tuple((name, None if kind in _AS_IS else _FIELD_CODECS[kind][0]) for name, kind in fields)
    for cls, fields in _CPU_EVENT_FIELDS.items()
}


def _encode_cpu_event(event: Event) -> dict[str, Any]:
    return _write_fields({}, event, _CPU_EVENT_ENCODERS[type(event)])


def _write_fields(out: dict[str, Any], event: Event, fields: _FieldEncoders) -> dict[str, Any]:
    """``out`` with each of ``event``'s fields added, encoded, in order."""
    for name, encode in fields:
        value = getattr(event, name)
        out[name] = value if encode is None else encode(value)
    return out


def _decode_cpu_event(cls: type[Event], items: Mapping[str, Any], where: str) -> Event:
    values = {
        name: _FIELD_CODECS[field_type][1](items[name], f"{where}.{name}")
        for name, field_type in _CPU_EVENT_FIELDS[cls]
    }
    return cls(**values)


# -- states -------------------------------------------------------------------------------


def _encode_cpu_section(
    state: CPUState, form: CheckpointForm = DEFAULT_CHECKPOINT_FORM
) -> dict[str, Any]:
    entries = sorted(state.entries(), key=lambda e: e.key)
    return {
        "pools": {name: _encode_cpuset(cpus) for name, cpus in sorted(state.pools.items())},
        "ramp_cpus": None if state.ramp_cpus is None else _encode_cpuset(state.ramp_cpus),
        "containers": (
            encode_columns(entries, _encode_placement)
            if form == "columns"
            else encode_entry_maps(entries)
        ),
    }


def encode_entry_maps(entries: Sequence[ContainerEntry]) -> list[dict[str, Any]]:
    """``entries`` (in the order given) as the CPU section's ``containers`` of the
    ``entries`` form: one map per container by field name, as an event's entry is written
    (what qrmd releases before the columns form read)."""
    return [_encode_entry(entry) for entry in entries]


def _decode_cpu_section(data: object, topology: CPUTopology) -> CPUState:
    where = "sections.cpu"
    items = _fields_of(data, where, ("pools", "ramp_cpus", "containers"))
    state = CPUState.empty(topology)
    try:
        # Pools and the ramp-up cpuset first: entries refer to them.
        for name, cpus in _expect_dict(items["pools"], f"{where}.pools").items():
            pool = _expect_str(name, f"{where}.pools key")
            cpuset = _decode_cpuset(cpus, f"{where}.pools.{pool}")
            state = apply_cpu_event(state, PoolSet(pool, cpuset))
        if items["ramp_cpus"] is not None:
            ramp = _decode_cpuset(items["ramp_cpus"], f"{where}.ramp_cpus")
            state = apply_cpu_event(state, RampCPUsSet(ramp))
        entries = _decode_containers(items["containers"], f"{where}.containers")
        # What ContainerAllocated of each entry gives, in one pass (cpu_apply.allocate_all).
        state = allocate_all(state, entries)
    except CodecError:
        raise
    except StateError as err:
        raise CodecError(f"{where}: {err}") from None
    return state


def _decode_containers(containers: object, where: str) -> list[ContainerEntry]:
    """The CPU section's entries: a columns map (``policy.state.codec_columns``), or the list
    of entry maps checkpoints held before it; each container at most once."""
    if isinstance(containers, dict):
        entries = decode_columns(containers, where, _decode_placement, _decode_str_map)
    elif isinstance(containers, list):
        entries = [_decode_entry(raw, f"{where}[{i}]") for i, raw in enumerate(containers)]
    else:
        raise CodecError(f"{where}: expected a map of columns, got {type(containers).__name__}")
    keys = [entry.key for entry in entries]
    if len(set(keys)) != len(keys):
        seen: set[tuple[str, str]] = set()
        for i, key in enumerate(keys):
            if key in seen:
                raise CodecError(f"{where}[{i}]: {key} appears twice")
            seen.add(key)
    return entries


@dataclass(frozen=True, slots=True)
class SectionCodec:
    """How one state section's events and value become primitives and back.

    Attributes:
        event_types: the section's event classes; each is encoded under its class name.
        encode_event: an event's fields as primitives, without its ``kind``.
        decode_event: ``(event class, fields, where) -> event``; the field names are checked.
        encode_section: the section value as primitives.
        decode_section: ``(primitives, topology) -> section value``.
        empty: the section's value when a checkpoint does not hold it (a section added later);
            ``None`` makes the section mandatory.
    """

    event_types: tuple[type[Event], ...]
    encode_event: Callable[[Any], dict[str, Any]]
    decode_event: Callable[[type[Event], Mapping[str, Any], str], Event]
    encode_section: Callable[[Any], Any]
    decode_section: Callable[[object, CPUTopology], Any]
    empty: Callable[[], Any] | None = None


#: Every section's codec, by section name.
SECTION_CODECS: Final[Mapping[str, SectionCodec]] = {
    CPU_SECTION: SectionCodec(
        CPU_EVENT_TYPES,
        _encode_cpu_event,
        _decode_cpu_event,
        _encode_cpu_section,
        _decode_cpu_section,
    ),
    BALANCE_SECTION: SectionCodec(
        BALANCE_EVENT_TYPES,
        encode_balance_event,
        decode_balance_event,
        encode_balance_section,
        decode_balance_section,
    ),
    PRESSURE_SECTION: SectionCodec(
        PRESSURE_EVENT_TYPES,
        encode_pressure_event,
        decode_pressure_event,
        encode_pressure_section,
        decode_pressure_section,
        empty=PressureHistory,
    ),
    ADVISOR_SECTION: SectionCodec(
        ADVISOR_EVENT_TYPES,
        encode_advisor_event,
        decode_advisor_event,
        encode_advisor_section,
        decode_advisor_section,
        empty=AdvisorState,
    ),
}


def _event_types() -> dict[str, type[Event]]:
    kinds: dict[str, type[Event]] = {}
    for name, codec in SECTION_CODECS.items():
        for cls in codec.event_types:
            if cls.section != name:
                raise TypeError(f"{cls.__name__} is registered in section {name!r}, not its own")
            if cls.__name__ in kinds:
                raise TypeError(f"event kind {cls.__name__} is registered twice")
            kinds[cls.__name__] = cls
    return kinds


#: Event classes by ``kind``, over every section.
EVENT_TYPES: Final[Mapping[str, type[Event]]] = _event_types()

_EVENT_FIELD_NAMES: Final = {
    kind: tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]
    for kind, cls in EVENT_TYPES.items()
}


def encode_event(event: Event) -> dict[str, Any]:
    """An event as a dict of primitives with its ``kind``.

    Raises:
        CodecError: the event type is not registered in ``EVENT_TYPES``.
    """
    cls = type(event)
    fields = _CPU_EVENT_ENCODERS.get(cls)
    if fields is not None:
        # A CPU event (every kubelet call commits some): its map written in one pass, the
        # same keys in the same order as the general path below.
        return _write_fields({"kind": cls.__name__}, event, fields)
    kind = cls.__name__
    if EVENT_TYPES.get(kind) is not cls:
        raise CodecError(f"{kind} is not a registered event type")
    return {"kind": kind, **SECTION_CODECS[event.section].encode_event(event)}


def decode_event(data: object) -> Event:
    """The event a dict from :func:`encode_event` describes.

    Raises:
        CodecError: ``data`` is not a well-formed event; the message names the field.
    """
    # Replay decodes every journaled event: a well-formed CPU event takes the fast path,
    # anything else (or anything unusual) the checked one, with the same result.
    event = fast_cpu_event(data)
    if event is not None:
        return event
    return _decode_event_checked(data)


def _decode_event_checked(data: object) -> Event:
    kind = _expect_str(_expect_dict(data, "event").get("kind"), "event.kind")
    cls = EVENT_TYPES.get(kind)
    if cls is None:
        raise CodecError(f"event.kind: unknown event kind {kind!r:.60}")
    items = _fields_of(data, kind, ("kind", *_EVENT_FIELD_NAMES[kind]))
    return SECTION_CODECS[cls.section].decode_event(cls, items, kind)


def encode_state(state: State, form: CheckpointForm = DEFAULT_CHECKPOINT_FORM) -> dict[str, Any]:
    """A state as a dict of primitives (for checkpoints).

    Args:
        state: the state.
        form: how the CPU section's containers are written (``policy.state.checkpoint_form``):
            ``columns``, or ``entries`` for a release before the columns to read.

    Raises:
        CodecError: a section has no codec.
        ValueError: ``form`` is not one of ``CHECKPOINT_FORMS``.
    """
    if form not in CHECKPOINT_FORMS:
        raise ValueError(f"checkpoint form {form!r} is not one of {', '.join(CHECKPOINT_FORMS)}")
    sections: dict[str, Any] = {}
    for name, value in state.sections.items():
        codec = SECTION_CODECS.get(name)
        if codec is None:
            raise CodecError(f"state section {name!r} has no codec")
        # Only the CPU section has two forms; every other section is written one way.
        sections[name] = (
            _encode_cpu_section(state.cpu, form)
            if name == CPU_SECTION
            else codec.encode_section(value)
        )
    return {
        "schema": SCHEMA_VERSION,
        "topology": state.cpu.topology.fingerprint(),
        "sections": sections,
    }


def decode_state(data: object, topology: CPUTopology) -> State:
    """The state a dict from :func:`encode_state` describes, indexes rebuilt for ``topology``.

    Raises:
        CodecError: malformed, another schema version, another machine's topology, or
            entries that do not fit together; the message names the field.
    """
    items = _fields_of(data, "state", ("schema", "topology", "sections"))
    schema = items["schema"]
    if schema != SCHEMA_VERSION or isinstance(schema, bool):
        raise CodecError(f"state.schema: version {schema!r:.20}, this qrmd reads {SCHEMA_VERSION}")
    fingerprint = _expect_str(items["topology"], "state.topology")
    if fingerprint != topology.fingerprint():
        raise CodecError(
            f"state.topology: written for topology {fingerprint:.40}, "
            f"this node is {topology.fingerprint()}"
        )
    raw = _expect_dict(items["sections"], "state.sections")
    required = tuple(name for name, codec in SECTION_CODECS.items() if codec.empty is None)
    raw_sections = _fields_of(
        raw, "state.sections", tuple(name for name in SECTION_CODECS if name in raw) + required
    )
    sections = {
        name: _decode_section(codec, raw_sections.get(name, _ABSENT), topology)
        for name, codec in SECTION_CODECS.items()
    }
    return State(immutables.Map(sections))


_ABSENT: Final = object()


def _decode_section(codec: SectionCodec, raw: object, topology: CPUTopology) -> Any:
    """A section's value; a section added after the checkpoint was written is empty."""
    if raw is _ABSENT:
        assert codec.empty is not None  # mandatory sections were checked present
        return codec.empty()
    return codec.decode_section(raw, topology)
