"""Well-formed CPU events and container entries decoded in one pass (the codec's fast path).

Replay decodes every event the journal holds, and a restart from a checkpoint written before
the columnar containers (``policy.state.codec_columns``) every container of it; nearly all of
them are exactly what ``policy.state.codec`` encoded. The checked
decoder builds an error context (``ContainerAllocated.entry.placement.result``) for every
field it visits, whether or not anything is wrong, and that bookkeeping was most of the cost
of decoding (bench/bench_wire.py, the replay rows). Here the shape is tested with exact
``type()`` and key-set comparisons, and nothing is built for an error:

* each function returns the decoded value, or ``None`` when anything is unusual — a missing
  or extra field, a type the encoder never writes (an ``int`` where a float belongs, a ``str``
  subclass), a cpuset text not decoded before — and the caller then runs the checked decoder,
  which gives the same value or the error naming the field;
* it never raises, and what it accepts decodes to the very value the checked decoder returns
  (a hypothesis property in ``tests/policy/state/test_codec_fast.py`` holds the two together).

Cpuset texts come from the codec's cache only (``known_cpuset``): a text seen for the first
time goes through the checked path, which validates it and fills the cache.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, Final

import immutables

from policy.state.entries import RAMPING, ContainerEntry, InPool, OwnCPUs, Placement
from policy.state.events import CPU_EVENT_TYPES, Event
from policy.topology.cpuset import CPUSet

__all__ = [
    "decoded_cpuset",
    "fast_allocated_entry",
    "fast_cpu_event",
    "fast_entry",
    "fast_placement",
    "forget_cpusets",
    "known_cpuset",
    "remember_cpuset",
]

_UINT64_MAX: Final = 2**64 - 1

# A checkpoint of thousands of pooled containers, or a journal of thousands of allocations,
# holds a few distinct cpuset strings many times over, and parsing them was most of a
# restart's decoding. A CPUSet is immutable and a function of its text, so each text that
# decoded once is reused; a text that fails is never kept, and fails again where it appears.
_DECODED_CPUSETS: dict[str, CPUSet] = {}
_DECODED_CPUSETS_MAX: Final = 4096


def known_cpuset(text: str) -> CPUSet | None:
    """The set ``text`` decoded to before, or None."""
    return _DECODED_CPUSETS.get(text)


def remember_cpuset(text: str, cpus: CPUSet) -> None:
    """Keep ``cpus`` as what the valid text ``text`` decodes to (bounded: cleared when full)."""
    if len(_DECODED_CPUSETS) >= _DECODED_CPUSETS_MAX:
        _DECODED_CPUSETS.clear()
    _DECODED_CPUSETS[text] = cpus


def forget_cpusets() -> None:
    """Empty the caches (tests that watch them fill)."""
    _DECODED_CPUSETS.clear()
    _OWN_PLACEMENTS.clear()
    _FROZEN_MAPS.clear()
    for memo in _MEMOS:
        memo.forget()


def decoded_cpuset(value: object) -> CPUSet | None:
    """A cpuset text decoded before, or None (not a str, or not seen yet)."""
    if type(value) is not str:
        return None
    return _DECODED_CPUSETS.get(value)


# The label and annotation maps of a node's containers are a handful of distinct values
# repeated thousands of times; each decoded one is kept (by its items, in order) and the
# frozen map shared, like the cpusets above: an immutables.Map is a value, safe to share.
# Only maps of exact strs are kept, so a later hit is one whose items equal exact strs, which
# only exact strs do (msgpack builds no str subclass).
_FROZEN_MAPS: dict[tuple[tuple[str, str], ...], immutables.Map[str, str]] = {}
_FROZEN_MAPS_MAX: Final = 4096


def _str_map(value: object) -> tuple[bool, immutables.Map[str, str] | None]:
    """``(ok, map)``: a label/annotation map of exact strs, or None (the reference's null)."""
    if value is None:
        return True, None
    if type(value) is not dict:
        return False, None
    items = tuple(value.items())
    try:
        frozen = _FROZEN_MAPS.get(items)
    except TypeError:  # an unhashable item: not a map of strs
        return False, None
    if frozen is not None:
        return True, frozen
    for key, item in items:
        if type(key) is not str or type(item) is not str:
            return False, None
    frozen = immutables.Map(value)
    if len(_FROZEN_MAPS) >= _FROZEN_MAPS_MAX:
        _FROZEN_MAPS.clear()
    _FROZEN_MAPS[items] = frozen
    return True, frozen


_OWN_KEYS: Final = frozenset(("kind", "result", "original"))
_IN_POOL_KEYS: Final = frozenset(("kind", "pool"))
_RAMPING_KEYS: Final = frozenset(("kind",))


# Placements on their own CPUs by their two cpuset texts (both decoded before): a node's
# containers hold a few distinct ones, and one shared value decodes faster and lets the
# indexes work out each distinct placement's contribution once (CPUIndexes.with_entries).
_OWN_PLACEMENTS: dict[tuple[object, object], OwnCPUs] = {}


def fast_placement(value: object) -> Placement | None:
    """A placement map as the codec writes it, or None."""
    if type(value) is not dict:
        return None
    kind = value.get("kind")
    keys = value.keys()
    if kind == "own" and keys == _OWN_KEYS:
        texts = (value["result"], value["original"])
        if type(texts[0]) is not str or type(texts[1]) is not str:
            return None
        shared = _OWN_PLACEMENTS.get(texts)
        if shared is not None:
            return shared
        result = decoded_cpuset(texts[0])
        original = decoded_cpuset(texts[1])
        if result is None or original is None:
            return None
        placement = OwnCPUs(result, original)
        if len(_OWN_PLACEMENTS) >= _DECODED_CPUSETS_MAX:
            _OWN_PLACEMENTS.clear()
        _OWN_PLACEMENTS[texts] = placement
        return placement
    if kind == "in_pool" and keys == _IN_POOL_KEYS:
        pool = value["pool"]
        return InPool(pool) if type(pool) is str else None
    if kind == "ramping" and keys == _RAMPING_KEYS:
        return RAMPING
    return None


_UNUSABLE: Final = object()


class _LastMap:
    """The value the last usable map decoded to, kept with a copy of that map.

    Consecutive entries of a journal or a checkpoint nearly always carry an equal placement,
    equal labels and equal annotations: comparing a map with the last one (one C-level
    ``==`` of a few short strings) is a fraction of looking it up in the caches above, which
    first builds and hashes a key of its items. Equality stands for the lookup on the same
    grounds as the caches': the map kept holds exact strs (``decode`` accepted it), and only
    exact strs equal them as msgpack builds values. The pair is one attribute, replaced
    whole, so a reader in another thread never sees one map with another's value.

    ``fast_entry`` compares with ``last`` itself (a call per map was most of the gain) and
    calls ``decode`` on a miss.
    """

    __slots__ = ("_decode", "last")

    def __init__(self, decode: Callable[[object], object]) -> None:
        self._decode = decode
        self.last: tuple[dict[object, object] | None, object] = (None, _UNUSABLE)

    def decode(self, value: object) -> object:
        """What the decoder gives for ``value`` (``_UNUSABLE`` where nothing usable), kept
        as the last map when usable."""
        decoded = self._decode(value)
        if decoded is not _UNUSABLE and type(value) is dict:
            # A copy: the caller's map may change after this call, the one kept must not.
            self.last = (dict(value), decoded)
        return decoded

    def forget(self) -> None:
        """Drop the map kept (``forget_cpusets``)."""
        self.last = (None, _UNUSABLE)


def _placement_or_unusable(value: object) -> object:
    placement = fast_placement(value)
    return _UNUSABLE if placement is None else placement


def _str_map_or_unusable(value: object) -> object:
    ok, frozen = _str_map(value)
    return frozen if ok else _UNUSABLE


_LAST_PLACEMENT: Final = _LastMap(_placement_or_unusable)
_LAST_LABELS: Final = _LastMap(_str_map_or_unusable)
_LAST_ANNOTATIONS: Final = _LastMap(_str_map_or_unusable)
_MEMOS: Final = (_LAST_PLACEMENT, _LAST_LABELS, _LAST_ANNOTATIONS)

_ENTRY_FIELDS: Final = tuple(f.name for f in dataclasses.fields(ContainerEntry))
_ENTRY_KEYS: Final = frozenset(_ENTRY_FIELDS)
# The fields fast_entry checks and decodes itself; every other one the codec writes as a
# plain string.
_ENTRY_DECODED: Final = ("container_index", "ramp_up", "placement", "labels", "annotations")
_ENTRY_FLOAT: Final = "request_quantity"


def _slot_setter(name: str) -> Callable[[ContainerEntry, object], None]:
    setter: Callable[[ContainerEntry, object], None] = getattr(ContainerEntry, name).__set__
    return setter


# Each entry field's slot, set directly: the dataclass __init__ of a frozen class sets each
# field through object.__setattr__ by name, which was the larger part of decoding an entry.
# Its __post_init__ only freezes the label and annotation maps, and fast_entry hands it
# maps already frozen, so the entry is the one ContainerEntry(**fields) builds (the property
# in tests/policy/state/test_codec_fast.py holds the two paths together).
_ENTRY_STR_SLOTS: Final = tuple(
    (name, _slot_setter(name))
    for name in _ENTRY_FIELDS
    if name not in _ENTRY_DECODED and name != _ENTRY_FLOAT
)
_SET_INDEX: Final = _slot_setter("container_index")
_SET_RAMP_UP: Final = _slot_setter("ramp_up")
_SET_PLACEMENT: Final = _slot_setter("placement")
_SET_LABELS: Final = _slot_setter("labels")
_SET_ANNOTATIONS: Final = _slot_setter("annotations")
_SET_QUANTITY: Final = _slot_setter(_ENTRY_FLOAT)
_new_object = object.__new__


def fast_entry(value: object) -> ContainerEntry | None:
    """A container entry map as the codec writes it, or None."""
    if type(value) is not dict or value.keys() != _ENTRY_KEYS:
        return None
    index = value["container_index"]
    if type(index) is not int or not 0 <= index <= _UINT64_MAX:
        return None
    ramp_up = value["ramp_up"]
    quantity = value[_ENTRY_FLOAT]
    if type(ramp_up) is not bool or type(quantity) is not float:
        return None
    # Each map equal to the last one decoded gives that one's value (_LastMap).
    raw = value["placement"]
    last = _LAST_PLACEMENT.last
    placement = last[1] if type(raw) is dict and raw == last[0] else _LAST_PLACEMENT.decode(raw)
    raw = value["labels"]
    last = _LAST_LABELS.last
    labels = last[1] if type(raw) is dict and raw == last[0] else _LAST_LABELS.decode(raw)
    raw = value["annotations"]
    last = _LAST_ANNOTATIONS.last
    annotations = last[1] if type(raw) is dict and raw == last[0] else _LAST_ANNOTATIONS.decode(raw)
    if placement is _UNUSABLE or labels is _UNUSABLE or annotations is _UNUSABLE:
        return None
    entry: ContainerEntry = _new_object(ContainerEntry)
    for name, set_slot in _ENTRY_STR_SLOTS:
        text = value[name]
        if type(text) is not str:
            return None
        set_slot(entry, text)
    _SET_INDEX(entry, index)
    _SET_RAMP_UP(entry, ramp_up)
    _SET_PLACEMENT(entry, placement)
    _SET_LABELS(entry, labels)
    _SET_ANNOTATIONS(entry, annotations)
    _SET_QUANTITY(entry, quantity)
    return entry


def _same_str(value: object) -> object:
    return value if type(value) is str else None


def _same_float(value: object) -> object:
    return value if type(value) is float else None


# Field decoders by the annotation the event dataclass declares, as the codec's table.
_FIELD_DECODERS: Final[dict[str, Callable[[object], Any]]] = {
    "str": _same_str,
    "float": _same_float,
    "CPUSet": decoded_cpuset,
    "Placement": fast_placement,
    "ContainerEntry": fast_entry,
}


def _event_spec(cls: type[Event]) -> tuple[type[Event], frozenset[str], tuple[Any, ...]]:
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    keys = frozenset(("kind", *(f.name for f in fields)))
    return cls, keys, tuple((f.name, _FIELD_DECODERS[str(f.type)]) for f in fields)


_CPU_EVENTS: Final = {cls.__name__: _event_spec(cls) for cls in CPU_EVENT_TYPES}


def fast_cpu_event(data: object) -> Event | None:
    """A CPU event map as the codec writes it, or None (any other section's event too)."""
    if type(data) is not dict:
        return None
    kind = data.get("kind")
    spec = _CPU_EVENTS.get(kind) if type(kind) is str else None
    if spec is None:
        return None
    cls, keys, fields = spec
    if data.keys() != keys:
        return None
    values = {}
    for name, decode in fields:
        value = decode(data[name])
        if value is None:
            return None
        values[name] = value
    return cls(**values)


_ALLOCATED_KEYS: Final = frozenset(("kind", "entry"))


def fast_allocated_entry(data: object) -> ContainerEntry | None:
    """The entry of a ``ContainerAllocated`` event map as the codec writes it, or None (any
    other event, or anything unusual).

    What ``fast_cpu_event(data).entry`` gives for such an event, without building the event:
    replay applies most records' lone allocation straight to the state
    (``policy.state.replay``).
    """
    if type(data) is not dict or data.get("kind") != "ContainerAllocated":
        return None
    if data.keys() != _ALLOCATED_KEYS:
        return None
    return fast_entry(data["entry"])
