"""A checkpoint's container entries as columns (the CPU section's ``containers`` map).

A restart decodes every container of the newest checkpoint. Written as one map per entry
with its field names, 5,000 entries were 80,000 keys for msgpack to build and as many
per-field checks to run, most of them on a handful of distinct values (pool names, cpusets,
annotation maps, QoS levels). Here the entries are stored by field instead, in the codec's
order (sorted by ``(pod_uid, container_name)``), and every repeated value is written once:

``{"count": N, "texts": [str], "maps": [map or None], "placements": [placement],
<text field>: [index into texts], "container_index": [uint], "ramp_up": [bool],
"request_quantity": [float], "placement": [index into placements],
"labels": [index into maps], "annotations": [index into maps]}``

where a text field is each ``ContainerEntry`` field holding a string, a map is a
label/annotation map (``None``: the reference's null, §5.1) and a placement is written as
``policy.state.codec`` writes one. Each column is checked whole (its type, its length, every
element's exact type, each index in range), each distinct map and placement once; any
deviation raises ``CodecError`` naming the column (and the element, for a bad one). The
entries are then filled slot by slot, a column at a time, which is what makes decoding cheap:
the frozen dataclass's ``__init__`` only freezes the two maps, and decoded maps are frozen
already (``policy.state.codec_fast`` builds entries the same way).

Checkpoints written before hold a list of entry maps; ``policy.state.codec`` still reads them.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from itertools import repeat
from typing import Any, Final

from policy.errors import CodecError
from policy.state.entries import ContainerEntry, Placement

__all__ = ["COLUMN_KEYS", "decode_columns", "encode_columns"]

_UINT64_MAX: Final = 2**64 - 1

_ENTRY_FIELDS: Final = tuple(f.name for f in dataclasses.fields(ContainerEntry))
_NOT_TEXT: Final = frozenset(
    ("container_index", "ramp_up", "placement", "labels", "annotations", "request_quantity")
)
#: The entry's string fields, each a column of indexes into ``texts``.
_TEXT_FIELDS: Final = tuple(name for name in _ENTRY_FIELDS if name not in _NOT_TEXT)
_MAP_FIELDS: Final = ("labels", "annotations")

#: Every key of the columns map.
COLUMN_KEYS: Final = (
    "count",
    "texts",
    "maps",
    "placements",
    *_ENTRY_FIELDS,
)


def _interned(values: Iterable[Any], table: dict[Any, int]) -> list[int]:
    """Each value's index in ``table``, adding the values not there yet."""
    out = []
    for value in values:
        index = table.get(value)
        if index is None:
            index = table[value] = len(table)
        out.append(index)
    return out


def encode_columns(
    entries: Sequence[ContainerEntry], encode_placement: Callable[[Placement], Any]
) -> dict[str, Any]:
    """``entries`` (in the order given) as the columns map.

    Args:
        entries: the containers, in the codec's order.
        encode_placement: the codec's placement encoder.
    """
    texts: dict[str, int] = {}
    columns: dict[str, Any] = {}
    for name in _TEXT_FIELDS:
        columns[name] = _interned((getattr(e, name) for e in entries), texts)
    # Maps and placements are values (immutables.Map and frozen dataclasses hash by value):
    # equal ones share an index.
    maps: dict[Any, int] = {}
    for name in _MAP_FIELDS:
        columns[name] = _interned((getattr(e, name) for e in entries), maps)
    placements: dict[Placement, int] = {}
    columns["placement"] = _interned((e.placement for e in entries), placements)
    columns["container_index"] = [e.container_index for e in entries]
    columns["ramp_up"] = [e.ramp_up for e in entries]
    columns["request_quantity"] = [float(e.request_quantity) for e in entries]
    return {
        "count": len(entries),
        "texts": list(texts),
        "maps": [None if m is None else dict(m.items()) for m in maps],
        "placements": [encode_placement(p) for p in placements],
        **{name: columns[name] for name in _ENTRY_FIELDS},
    }


def _slot_setter(name: str) -> Callable[[ContainerEntry, object], None]:
    setter: Callable[[ContainerEntry, object], None] = getattr(ContainerEntry, name).__set__
    return setter


_SETTERS: Final = {name: _slot_setter(name) for name in _ENTRY_FIELDS}
_new_object = object.__new__


def _list(value: object, where: str) -> list[Any]:
    if type(value) is not list:
        raise CodecError(f"{where}: expected a list, got {type(value).__name__}")
    return value


def _column(items: dict[str, Any], name: str, count: int, where: str) -> list[Any]:
    column = _list(items[name], f"{where}.{name}")
    if len(column) != count:
        raise CodecError(f"{where}.{name}: {len(column)} values for {count} containers")
    return column


def _first_bad(column: list[Any], ok: Callable[[Any], bool]) -> int:
    return next(i for i, value in enumerate(column) if not ok(value))


def _looked_up(column: list[Any], table: list[Any], where: str) -> list[Any]:
    """Each index of ``column`` replaced by its value in ``table``."""
    size = len(table)
    if column and not (set(map(type, column)) == {int} and min(column) >= 0 and max(column) < size):
        i = _first_bad(column, lambda v: type(v) is int and 0 <= v < size)
        raise CodecError(f"{where}[{i}]: {column[i]!r:.40} is not an index below {size}")
    return list(map(table.__getitem__, column))


def decode_columns(
    data: object,
    where: str,
    decode_placement: Callable[[object, str], Placement],
    decode_str_map: Callable[[object, str], Any],
) -> list[ContainerEntry]:
    """The entries a columns map holds, in its order.

    Args:
        data: the columns map.
        where: its place in the state, for error messages (``sections.cpu.containers``).
        decode_placement: the codec's checked placement decoder.
        decode_str_map: the codec's checked label/annotation map decoder (``None`` stays None).

    Raises:
        CodecError: anything ill-shaped; the message names the column and element.
    """
    if type(data) is not dict:
        raise CodecError(f"{where}: expected a map, got {type(data).__name__}")
    missing = [name for name in COLUMN_KEYS if name not in data]
    if missing:
        raise CodecError(f"{where}: missing {', '.join(missing)}")
    if len(data) != len(COLUMN_KEYS):
        extra = sorted(repr(k) for k in data if k not in COLUMN_KEYS)
        raise CodecError(f"{where}: unknown field {', '.join(extra):.80}")
    count = data["count"]
    if type(count) is not int or count < 0:
        raise CodecError(f"{where}.count: expected a count, got {count!r:.40}")
    texts = _list(data["texts"], f"{where}.texts")
    if texts and set(map(type, texts)) != {str}:
        i = _first_bad(texts, lambda v: type(v) is str)
        raise CodecError(f"{where}.texts[{i}]: expected a string, got {type(texts[i]).__name__}")
    maps = [
        decode_str_map(m, f"{where}.maps[{i}]")
        for i, m in enumerate(_list(data["maps"], f"{where}.maps"))
    ]
    placements = [
        decode_placement(p, f"{where}.placements[{i}]")
        for i, p in enumerate(_list(data["placements"], f"{where}.placements"))
    ]
    values: dict[str, list[Any]] = {}
    for name in _TEXT_FIELDS:
        values[name] = _looked_up(_column(data, name, count, where), texts, f"{where}.{name}")
    for name in _MAP_FIELDS:
        values[name] = _looked_up(_column(data, name, count, where), maps, f"{where}.{name}")
    values["placement"] = _looked_up(
        _column(data, "placement", count, where), placements, f"{where}.placement"
    )
    values["container_index"] = _uints(_column(data, "container_index", count, where), where)
    values["ramp_up"] = _bools(_column(data, "ramp_up", count, where), where)
    values["request_quantity"] = _floats(_column(data, "request_quantity", count, where), where)
    entries: list[ContainerEntry] = list(map(_new_object, repeat(ContainerEntry, count)))
    for name, column in values.items():
        # One C-level pass per field: map calls the slot's setter, deque drains it.
        deque(map(_SETTERS[name], entries, column), maxlen=0)
    return entries


def _uints(column: list[Any], where: str) -> list[int]:
    if column and not (
        set(map(type, column)) == {int} and min(column) >= 0 and max(column) <= _UINT64_MAX
    ):
        i = _first_bad(column, lambda v: type(v) is int and 0 <= v <= _UINT64_MAX)
        raise CodecError(
            f"{where}.container_index[{i}]: expected an unsigned 64-bit integer, "
            f"got {column[i]!r:.40}"
        )
    return column


def _bools(column: list[Any], where: str) -> list[bool]:
    if column and set(map(type, column)) != {bool}:
        i = _first_bad(column, lambda v: type(v) is bool)
        raise CodecError(
            f"{where}.ramp_up[{i}]: expected a boolean, got {type(column[i]).__name__}"
        )
    return column


def _floats(column: list[Any], where: str) -> list[float]:
    kinds = set(map(type, column))
    if kinds <= {float}:
        return column
    if kinds <= {float, int}:
        return [float(v) for v in column]  # an integral quantity, as the checked decoder reads it
    i = _first_bad(column, lambda v: type(v) in (int, float))
    raise CodecError(
        f"{where}.request_quantity[{i}]: expected a number, got {type(column[i]).__name__}"
    )
