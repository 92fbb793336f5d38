"""The balance section's events and value as msgpack-able primitives, and back.

The format (part of ``policy.state.codec``'s schema):

* a record is its reference JSON form (``BalanceInfo.to_json``: Go's field names, the detect
  time in RFC 3339 with nanoseconds), so a journal dump reads like the reference's log;
* ``BalanceRoundRecorded`` is ``{"record": RECORD, "inputs": INPUTS}`` and
  ``BalanceRoundFailed`` is ``{"inputs": INPUTS, "error": STR}``, INPUTS being the round's
  ``RoundInputs.to_journal()``: ``to_json()`` with the pods as ``podColumns``, a few long
  columns (``policy.balance.columns``) instead of a map per pod and container. A journal
  written before the columns holds ``to_json()`` itself (``pods``), and reads as it always
  did; a columnar one reads as that same map (``JournaledInputs``: its ``pods`` expanded
  from the columns when read, the columns' shape checked when decoded, packed again as
  read). INPUTS are kept verbatim (a map of plain values, checked to be plain but not
  re-validated as inputs: a round that ran must stay readable even if input rules tighten;
  a live round's ``PlainInputs`` is plain by construction and packed without the check);
* ``BalanceAdviceTaken`` and ``BalanceEvictionTaken`` are ``{"detect_time": SECONDS}``;
* ``BalanceRoundsCoalesced`` is ``{"rounds": N, "first_time": SECONDS, "last_time": SECONDS,
  "metrics": {NUMA: {"readLatency": [MIN, MAX], "readWriteBandwidth": [MIN, MAX]}}}``, the
  metrics a map of plain values (kept verbatim, like INPUTS);
* the section is ``{"current": RECORD or None, "last": RECORD or None}``.

Decoding raises ``CodecError`` naming the field, and nothing else.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from itertools import chain
from typing import Any, Final

from policy.balance.columns import JournaledInputs
from policy.balance.errors import BalanceError
from policy.balance.events import (
    BalanceAdviceTaken,
    BalanceEvent,
    BalanceEvictionTaken,
    BalanceRoundFailed,
    BalanceRoundRecorded,
    BalanceRoundsCoalesced,
)
from policy.balance.gojson import check_time
from policy.balance.inputs import PlainInputs
from policy.balance.record import BalanceInfo
from policy.balance.section import BalancerState
from policy.decision import Event
from policy.errors import CodecError
from policy.topology.model import CPUTopology

__all__ = [
    "decode_balance_event",
    "decode_balance_section",
    "encode_balance_event",
    "encode_balance_section",
]

#: Deepest nesting a plain input map may have; RoundInputs' form is five levels deep.
MAX_DEPTH: Final = 16


def encode_balance_event(event: Event) -> dict[str, Any]:
    """A balance event's fields as primitives (without its ``kind``).

    Raises:
        CodecError: not a balance event.
    """
    match event:
        case BalanceRoundRecorded(record=record, inputs=inputs):
            return {"record": record.to_json(), "inputs": _plain(inputs, "inputs", 0)}
        case BalanceRoundFailed(inputs=inputs, error=error):
            return {"inputs": _plain(inputs, "inputs", 0), "error": error}
        case BalanceAdviceTaken(detect_time=t) | BalanceEvictionTaken(detect_time=t):
            return {"detect_time": t}
        case BalanceRoundsCoalesced(rounds, first_time, last_time, metrics):
            return {
                "rounds": rounds,
                "first_time": first_time,
                "last_time": last_time,
                "metrics": _plain(metrics, "metrics", 0),
            }
    raise CodecError(f"{type(event).__name__} is not a balance event")


def decode_balance_event(cls: type[Event], fields: Mapping[str, Any], where: str) -> BalanceEvent:
    """The balance event of type ``cls`` with these fields (their names already checked).

    Raises:
        CodecError: a field is malformed; the message names it.
    """
    if cls is BalanceRoundRecorded:
        return BalanceRoundRecorded(
            record=_record(fields["record"], f"{where}.record"),
            inputs=_inputs(fields["inputs"], f"{where}.inputs"),
        )
    if cls is BalanceRoundFailed:
        error = fields["error"]
        if not isinstance(error, str):
            raise CodecError(f"{where}.error: expected a string, got {type(error).__name__}")
        return BalanceRoundFailed(inputs=_inputs(fields["inputs"], f"{where}.inputs"), error=error)
    if cls is BalanceAdviceTaken or cls is BalanceEvictionTaken:
        detect_time = _time(fields["detect_time"], f"{where}.detect_time")
        return (
            BalanceAdviceTaken(detect_time)
            if cls is BalanceAdviceTaken
            else (BalanceEvictionTaken(detect_time))
        )
    if cls is BalanceRoundsCoalesced:
        rounds = fields["rounds"]
        if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
            raise CodecError(f"{where}.rounds: expected a count of at least 1, got {rounds!r}")
        return BalanceRoundsCoalesced(
            rounds=rounds,
            first_time=_time(fields["first_time"], f"{where}.first_time"),
            last_time=_time(fields["last_time"], f"{where}.last_time"),
            metrics=_plain_map(fields["metrics"], f"{where}.metrics"),
        )
    raise CodecError(f"{where}: {cls.__name__} is not a balance event")


def encode_balance_section(state: BalancerState) -> dict[str, Any]:
    """The section as ``{"current": record|None, "last": record|None}``."""
    return state.to_json()


def decode_balance_section(data: object, topology: CPUTopology) -> BalancerState:
    """The section a dict from :func:`encode_balance_section` describes.

    Args:
        data: the encoded section.
        topology: unused; every section decoder takes the node's topology.

    Raises:
        CodecError: malformed; the message names the field.
    """
    del topology
    try:
        return BalancerState.from_json(data, "sections.balance")
    except BalanceError as err:
        raise CodecError(str(err)) from None


def _record(value: object, where: str) -> BalanceInfo:
    try:
        return BalanceInfo.from_json(value, where)
    except BalanceError as err:
        raise CodecError(str(err)) from None


def _time(value: object, where: str) -> float:
    try:
        return check_time(value, where)  # type: ignore[arg-type]  # check_time checks the type
    except BalanceError as err:
        raise CodecError(str(err)) from None


def _plain_map(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise CodecError(f"{where}: expected a map, got {type(value).__name__}")
    plain = _plain(value, where, 0)
    assert isinstance(plain, dict)
    return plain


def _inputs(value: object, where: str) -> Mapping[str, Any]:
    """A round's journaled inputs: the map itself, or, when it holds ``podColumns``, the map
    it reads as (``JournaledInputs``), the columns' shape checked."""
    plain = _plain_map(value, where)
    if "podColumns" not in plain:
        return plain
    if "pods" in plain:
        raise CodecError(f"{where}: holds both 'pods' and 'podColumns'")
    try:
        return JournaledInputs(plain, where)
    except BalanceError as err:
        raise CodecError(str(err)) from None


def _plain(value: object, where: str, depth: int) -> Any:
    """``value`` in plain types (str-keyed maps, lists, scalars): itself when it already is
    one in exact types, else a deep copy in them.

    A round's inputs hold a value per container and NUMA node (tens of thousands on a large
    node). What ``RoundInputs.to_json`` builds, and what msgpack decodes, is plain in exact
    types already: ``_is_plain`` proves it in bulk, level by level, and the value is encoded
    as it is (it is packed at once, and nothing holds it to change it). Anything else (a
    tuple, a read-only or derived map, a ``str`` subclass) is copied without building a path
    per value; only when the copy meets something that is not plain does ``_plain_checked``
    walk again to name the place.

    Raises:
        CodecError: a value of another type, a non-string key, or nesting deeper than
            ``MAX_DEPTH``.
    """
    if type(value) is PlainInputs:
        # Plain by construction (``RoundInputs.to_journal`` of checked values): packed as is.
        return value.journal_form()
    if type(value) is JournaledInputs:
        # Decoded from a record, checked then: packed again as it was read.
        return value.raw
    if _is_plain(value, depth):
        return value
    try:
        return _plain_fast(value, depth)
    except _NotPlain:
        return _plain_checked(value, where, depth)


class _NotPlain(Exception):  # noqa: N818 - an internal signal, never raised to a caller
    """``_plain_fast`` met a value it does not copy; ``_plain_checked`` says why."""


_SCALARS: Final = frozenset({type(None), bool, int, float, str})
_STR: Final = frozenset({str})


_CONTAINERS: Final = frozenset({dict, list})


def _is_plain(value: object, depth: int) -> bool:
    """Whether ``value`` is plain in exact types (``dict`` with ``str`` keys, ``list``, and
    the scalars of ``_SCALARS``), nested at most ``MAX_DEPTH`` levels below ``depth``.

    One level of the tree at a time: every key and every item of a level is typed by the
    builtins (``map(type, ...)`` over the level's maps and lists chained together), so the
    cost is a few calls per level and per map or list, not per value.
    """
    if type(value) in _SCALARS:
        return True
    nested: list[Any] = [value]
    while True:
        if not set(map(type, nested)) <= _CONTAINERS or depth >= MAX_DEPTH:
            return False
        maps: list[dict[Any, Any]] = [item for item in nested if type(item) is dict]
        if maps and not set(map(type, chain.from_iterable(maps))) <= _STR:
            return False
        kinds = set(map(type, _items_below(nested, maps)))
        if kinds <= _SCALARS:
            return True
        nested = [item for item in _items_below(nested, maps) if type(item) not in _SCALARS]
        depth += 1


def _items_below(nested: list[Any], maps: list[dict[Any, Any]]) -> Iterator[Any]:
    """The values of a level's maps and the items of its lists, chained."""
    lists = (item for item in nested if type(item) is list)
    return chain(chain.from_iterable(map(dict.values, maps)), chain.from_iterable(lists))


def _plain_fast(value: object, depth: int) -> Any:
    """``_plain`` without the paths: the same copy, or ``_NotPlain``.

    A map or list of scalars (each container's anon, each distance pair) is copied whole by
    the builtins once the types of its items are known to be plain.
    """
    kind = type(value)
    if kind in _SCALARS:
        return value
    if depth >= MAX_DEPTH:
        raise _NotPlain
    inner = depth + 1
    if kind is dict:
        mapping: dict[Any, Any] = value  # type: ignore[assignment]
        if not set(map(type, mapping)) <= _STR:
            raise _NotPlain
        if set(map(type, mapping.values())) <= _SCALARS:
            return dict(mapping)
        return {
            key: item if type(item) in _SCALARS else _plain_fast(item, inner)
            for key, item in mapping.items()
        }
    if kind is list or kind is tuple:
        items: list[Any] = value  # type: ignore[assignment]
        if set(map(type, items)) <= _SCALARS:
            return list(items)
        return [item if type(item) in _SCALARS else _plain_fast(item, inner) for item in items]
    # Subclasses and other mappings take the checked path, which accepts what it accepts.
    raise _NotPlain


def _plain_checked(value: object, where: str, depth: int) -> Any:
    """``_plain`` with the path of every value, for its messages."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if depth >= MAX_DEPTH:
        raise CodecError(f"{where}: nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise CodecError(f"{where}: keys must be strings, got {key!r:.40}")
            out[key] = _plain_checked(item, f"{where}.{key}", depth + 1)
        return out
    if isinstance(value, list | tuple):
        return [_plain_checked(item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value)]
    raise CodecError(f"{where}: {type(value).__name__} is not a plain value")
