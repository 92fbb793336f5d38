"""A container's anonymous memory per NUMA node, held columnar (memory-balancer §4.2).

A round's inputs hold an amount per container and NUMA node: 2,000 pods with a few
containers each on a 32-node machine is about 130,000 amounts, and the containers of a node
hold memory on the same few sets of nodes. So a container's amounts are a tuple of floats
beside a ``NumaIndex`` shared by every container with the same nodes (the ids in NUMA order,
each id's position, and the ids as JSON keys), instead of one map per container: a round
builds a tuple per container rather than a map, and the JSON form reuses the keys.

``NumaAmounts`` reads like the read-only map it stands for (``Mapping[int, float]``, NUMA
order, equal to a dict of the same items).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from operator import attrgetter
from typing import Any, Final

__all__ = ["NumaAmounts", "NumaIndex", "amounts_of", "index_of", "numa_index"]


class NumaIndex:
    """NUMA ids in ascending order, with each id's position and its JSON key."""

    __slots__ = ("json_keys", "numas", "positions")

    def __init__(self, numas: tuple[int, ...]) -> None:
        self.numas = numas
        self.positions = {numa: i for i, numa in enumerate(numas)}
        self.json_keys = tuple(map(str, numas))


#: The indexes made so far, by their ids; bounded so that a node whose containers hold
#: memory on many distinct sets of nodes keeps no more than this many.
_INDEXES: dict[tuple[int, ...], NumaIndex] = {}
_INDEXES_MAX: Final = 64


def numa_index(numas: tuple[int, ...]) -> NumaIndex:
    """The shared index of ``numas``, distinct NUMA ids in ascending order (the caller's
    guarantee: the bulk reader and the per-value path of ``policy.balance.decode`` give
    them so)."""
    index = _INDEXES.get(numas)
    if index is None:
        if len(_INDEXES) >= _INDEXES_MAX:
            _INDEXES.clear()
        index = _INDEXES[numas] = NumaIndex(numas)
    return index


class NumaAmounts(Mapping[int, float]):
    """Bytes per NUMA node, read-only, in NUMA order: a tuple of amounts on a shared index."""

    __slots__ = ("_amounts", "_index")

    def __init__(self, index: NumaIndex, amounts: tuple[float, ...]) -> None:
        self._index = index
        self._amounts = amounts

    @property
    def index(self) -> NumaIndex:
        """The nodes, shared with every container holding memory on the same ones."""
        return self._index

    @property
    def amounts(self) -> tuple[float, ...]:
        """The amounts, one per node of ``index``, in its order."""
        return self._amounts

    def __getitem__(self, numa: int) -> float:
        return self._amounts[self._index.positions[numa]]

    def get(self, numa: int, default: Any = None) -> Any:
        position = self._index.positions.get(numa)
        return default if position is None else self._amounts[position]

    def __contains__(self, numa: object) -> bool:
        return numa in self._index.positions

    def __iter__(self) -> Iterator[int]:
        return iter(self._index.numas)

    def __len__(self) -> int:
        return len(self._amounts)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, NumaAmounts):
            return self._index.numas == other._index.numas and self._amounts == other._amounts
        if isinstance(other, Mapping):
            return dict(zip(self._index.numas, self._amounts, strict=True)) == dict(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # a map: unhashable, as the dict it stands for

    def __repr__(self) -> str:
        return f"NumaAmounts({dict(zip(self._index.numas, self._amounts, strict=True))!r})"

    def to_json(self) -> dict[str, float]:
        """The JSON form: NUMA ids as decimal keys, in NUMA order."""
        return dict(zip(self._index.json_keys, self._amounts, strict=True))


#: ``NumaAmounts.index`` and ``.amounts`` as functions a bulk reader maps over thousands of
#: figures at builtin speed (``policy.balance.pod_table``): the properties' values, read
#: without calling the properties.
index_of: Final[Callable[[NumaAmounts], NumaIndex]] = attrgetter("_index")
amounts_of: Final[Callable[[NumaAmounts], tuple[float, ...]]] = attrgetter("_amounts")
