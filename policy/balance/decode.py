"""Typed reading of the balancer's plain-dict JSON forms, with errors that name the field.

Inputs, configuration and records arrive as decoded JSON (a round file, a journal record). Every
reader here takes the value and its path (``pods[3].containers[0].anon["2"]``) and either returns
a value of the wanted type or raises ``BalanceError`` naming that path and the value. Booleans
are never accepted as numbers, although Python counts them as ints.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from typing import Any, TypeVar

from policy.balance.errors import BalanceError

__all__ = [
    "amounts_checked_in_bulk",
    "amounts_in_bulk",
    "anon_by_numa",
    "anon_in_bulk",
    "as_bool",
    "as_float",
    "as_int",
    "as_list",
    "as_object",
    "as_str",
    "in_numa_order",
    "int_key",
    "reject_unknown",
    "required",
]

V = TypeVar("V")

#: Byte counts and ids must fit Go's int64, as the reference holds them.
INT64_MAX = 2**63 - 1


def as_object(value: object, where: str) -> Mapping[str, object]:
    """A JSON object with string keys.

    Raises:
        BalanceError: ``value`` is not an object.
    """
    # map(type) runs in C: round inputs hold an object per container, this must stay cheap.
    if not isinstance(value, Mapping) or (value and set(map(type, value)) != {str}):
        raise BalanceError(f"{where}: expected a JSON object, got {_show(value)}")
    return value


def as_list(value: object, where: str) -> list[object]:
    """A JSON array.

    Raises:
        BalanceError: ``value`` is not an array.
    """
    if not isinstance(value, list | tuple):
        raise BalanceError(f"{where}: expected a JSON array, got {_show(value)}")
    return list(value)


def as_str(value: object, where: str, *, non_empty: bool = False) -> str:
    """A JSON string, optionally required to be non-empty.

    Raises:
        BalanceError: ``value`` is not a string, or is empty when it must not be.
    """
    if not isinstance(value, str):
        raise BalanceError(f"{where}: expected a string, got {_show(value)}")
    if non_empty and not value:
        raise BalanceError(f"{where}: must not be empty")
    return value


def as_bool(value: object, where: str) -> bool:
    """A JSON boolean.

    Raises:
        BalanceError: ``value`` is not ``true`` or ``false``.
    """
    if not isinstance(value, bool):
        raise BalanceError(f"{where}: expected true or false, got {_show(value)}")
    return value


def as_int(value: object, where: str, *, minimum: int = 0, maximum: int = INT64_MAX) -> int:
    """A JSON integer within ``[minimum, maximum]``.

    Raises:
        BalanceError: ``value`` is not an integer or is out of range.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise BalanceError(f"{where}: expected an integer, got {_show(value)}")
    if not minimum <= value <= maximum:
        raise BalanceError(f"{where}: {_show(value)} is outside [{minimum}, {maximum}]")
    return value


def as_float(
    value: object, where: str, *, minimum: float = 0.0, maximum: float = math.inf
) -> float:
    """A finite JSON number within ``[minimum, maximum]``, as a float.

    Raises:
        BalanceError: ``value`` is not a number, is NaN or infinite, or is out of range.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BalanceError(f"{where}: expected a number, got {_show(value)}")
    try:
        number = float(value)
    except OverflowError:
        raise BalanceError(f"{where}: {_show(value)} is too large for a float") from None
    if not math.isfinite(number):
        raise BalanceError(f"{where}: expected a finite number, got {value!r}")
    if not minimum <= number <= maximum:
        raise BalanceError(f"{where}: {_show(value)} is outside [{minimum:g}, {maximum:g}]")
    return number


def int_key(key: str, where: str) -> int:
    """A non-negative decimal NUMA id used as a JSON object key (``"0"``, ``"12"``).

    Raises:
        BalanceError: the key is not a plain decimal integer.
    """
    if not key.isascii() or not key.isdigit() or len(key) > 18:
        raise BalanceError(f"{where}: key {key!r} is not a NUMA id (a decimal integer)")
    return int(key)


def required(obj: Mapping[str, object], key: str, where: str) -> object:
    """The value of a required field.

    Raises:
        BalanceError: the field is absent.
    """
    if key not in obj:
        raise BalanceError(f"{where}: missing field {key!r}")
    return obj[key]


def reject_unknown(obj: Mapping[str, object], known: Iterable[str], where: str) -> None:
    """Refuse fields this format does not define, so a typo is not silently ignored.

    Raises:
        BalanceError: names the first unknown field and lists the known ones.
    """
    allowed = set(known)
    for key in obj:
        if key not in allowed:
            raise BalanceError(
                f"{where}: unknown field {key!r} (known: {', '.join(sorted(allowed))})"
            )


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def anon_by_numa(value: Mapping[Any, object], where: str) -> dict[int, float]:
    """Bytes per NUMA node: keys are NUMA ids (ints, or decimal strings in JSON), values byte
    counts in ``[0, INT64_MAX]``, returned as floats as the reference holds them.

    A node's pods carry a value per container and NUMA node, so the common case is checked in
    bulk with builtins and no message is built unless something is wrong.

    Raises:
        BalanceError: a key is not a NUMA id or a value is not a byte count, named with its path.
    """
    bulk = anon_in_bulk(value)
    if bulk is not None:
        return bulk
    out: dict[int, float] = {}
    for key, raw in value.items():
        numa = int_key(key, where) if isinstance(key, str) else as_int(key, f"{where} key")
        out[numa] = as_float(raw, f"{where}[{key!r}]", maximum=_INT64_MAX_F)
    return out


def in_numa_order(amounts: Mapping[int, V]) -> dict[int, V]:
    """A copy of per-NUMA amounts in NUMA order; sorted only when not given in that order
    already (readers give it: ``memory.numa_stat`` lists its nodes in order, and a round holds
    thousands of these)."""
    # Keys equal to a set of ids known to be ascending are ascending, whatever their type:
    # the order is all this decides, so the known sets are looked up without typing the keys
    # (a str equals only a str: a hit on JSON keys is a set known by its decimal strings).
    keys: tuple[object, ...] = tuple(amounts)
    known = _ASCENDING_IDS.get(keys)
    if (known is not None and not isinstance(keys[0], str)) or _ascending_numa_ids(keys) == keys:
        return dict(amounts)
    numas = list(amounts)
    ordered = sorted(numas)
    if numas == ordered:
        return dict(amounts)
    return {numa: amounts[numa] for numa in ordered}


def anon_in_bulk(value: Mapping[Any, object]) -> dict[int, float] | None:
    """``anon_by_numa`` for the common case, checked in bulk with builtins and returned in
    NUMA order (``in_numa_order``); None when a key or a value needs the per-value checks
    (which name it), so a caller builds the path of its message only then.
    """
    bulk = amounts_in_bulk(value)
    return None if bulk is None else dict(zip(*bulk, strict=True))


def amounts_in_bulk(
    value: Mapping[Any, object],
) -> tuple[tuple[int, ...], tuple[float, ...]] | None:
    """``anon_in_bulk`` as two tuples, the NUMA ids ascending and their amounts, for a caller
    that holds them columnar (``policy.balance.amounts``); None as ``anon_in_bulk``."""
    keys = tuple(value)
    amounts = _amounts_in_bulk(value.values())
    if amounts is None:
        return None
    numas = _ascending_numa_ids(keys)
    if numas is None:
        unordered = _fast_numa_ids(list(keys))
        if unordered is None:
            return None
        # Two JSON keys may name one node ("1", "01"): the last one holds, as in a dict.
        by_numa = dict(zip(unordered, amounts, strict=True))
        numas = tuple(sorted(by_numa))
        amounts = tuple(map(by_numa.__getitem__, numas))
    return numas, amounts


def amounts_checked_in_bulk(raws: Collection[Any]) -> tuple[float, ...] | None:
    """Byte counts as floats, checked in bulk as ``anon_by_numa`` checks its values; None
    when one needs the per-value checks (which name it). For amounts held apart from their
    NUMA ids (``policy.balance.columns``)."""
    return _amounts_in_bulk(raws) if raws else ()


def _amounts_in_bulk(raws: Collection[Any]) -> tuple[float, ...] | None:
    """Byte counts as floats, checked in bulk; None when one needs the per-value checks."""
    kinds = set(map(type, raws))
    if kinds == _INT_TYPE and min(raws) >= 0 and max(raws) <= INT64_MAX:
        # Byte counts as readers give them: integers hold no NaN and no infinity.
        return tuple(map(float, raws))
    if kinds <= _NUMBER_TYPES:
        try:
            amounts = tuple(map(float, raws))
        except OverflowError:  # an int beyond any float: the per-value checks name it
            return None
        # NaN may slip past min/max but not past the sum; anything odd takes the slow path.
        if not amounts or (
            min(amounts) >= 0.0 and max(amounts) <= _INT64_MAX_F and math.isfinite(sum(amounts))
        ):
            return amounts
    return None


#: Key sets known to be NUMA ids in ascending order, each with its ids: exact ints as
#: readers give them (``memory.numa_stat`` lists its nodes in order), or decimal strings as a
#: journaled round's JSON holds them. A node's containers hold memory on the same few sets of
#: nodes, so a round checks and orders each set once rather than once per container; bounded
#: so a node with many distinct sets keeps no more than this many.
_ASCENDING_IDS: dict[tuple[object, ...], tuple[int, ...]] = {}
_ASCENDING_IDS_MAX = 64


def _ascending_numa_ids(keys: tuple[object, ...]) -> tuple[int, ...] | None:
    """The NUMA ids ``keys`` name (exact ints, or decimal strings as in JSON), when they
    name distinct nodes in ascending order."""
    # The types first: 0.0 and True equal 0 (and hash alike), so a set seen as ints would
    # otherwise let them in.
    kinds = set(map(type, keys))
    if kinds not in (_INT_TYPE, _STR_TYPE):
        return None
    known = _ASCENDING_IDS.get(keys)
    if known is not None:
        return known
    numas = _fast_numa_ids(list(keys))
    if numas is None or numas != sorted(set(numas)):
        return None
    if len(_ASCENDING_IDS) >= _ASCENDING_IDS_MAX:
        _ASCENDING_IDS.clear()
    ids = keys if kinds == _INT_TYPE else tuple(numas)
    _ASCENDING_IDS[keys] = ids  # type: ignore[assignment]  # ints when the keys are
    return ids  # type: ignore[return-value]


_NUMBER_TYPES = {int, float}
_INT_TYPE = {int}
_STR_TYPE = {str}
_INT64_MAX_F = float(INT64_MAX)


def _fast_numa_ids(keys: list[object]) -> list[int] | None:
    if not keys:
        return []
    kinds = set(map(type, keys))
    if kinds == {int}:
        ints: list[int] = keys  # type: ignore[assignment]
        return ints if min(ints) >= 0 else None
    if kinds == {str}:
        texts: list[str] = keys  # type: ignore[assignment]
        joined = "".join(texts)
        if joined.isascii() and all(map(str.isdigit, texts)) and max(map(len, texts)) <= 18:
            return list(map(int, texts))
    return None
