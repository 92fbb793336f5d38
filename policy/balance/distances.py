"""The NUMA distance lists a round reads, checked once (memory-balancer §4.4).

Each NUMA node has a list of ``(NumaID, Distance)`` entries, read once when the balancer starts
(sysfs includes the node itself, a synthetic map may omit it, O5). Every round's ``RoundInputs``
holds them, so the balancer checks them once into ``DistanceLists``, an immutable mapping, and
each round takes that value as it is: the check of a value that cannot change is not repeated
per round (32 nodes: a thousand entries, every 5 s). Any other mapping handed to
``RoundInputs`` is checked there, as before. Their plain form, which every journaled round
holds, is likewise made once (``to_json``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from policy.balance.decode import as_int
from policy.balance.errors import BalanceError

__all__ = ["DistanceLists", "NumaDistance", "distance_lists_from_rows"]


@dataclass(frozen=True, slots=True)
class NumaDistance:
    """One entry of a NUMA node's distance list (§4.4)."""

    numa_id: int
    distance: int


class DistanceLists(Mapping[int, tuple[NumaDistance, ...]]):
    """NUMA id → its distance list, nodes ascending, checked on construction and immutable.

    Args:
        distances: each node's entries, in the order the source gave them (NUMA-id order).

    Raises:
        BalanceError: the map holds no node, a list names a NUMA id twice, or a distance is
            not a positive integer.
    """

    __slots__ = ("_form", "_lists")

    def __init__(self, distances: Mapping[int, Sequence[NumaDistance]]) -> None:
        if not distances:
            raise BalanceError("distances: the distance map holds no NUMA node")
        lists: dict[int, tuple[NumaDistance, ...]] = {}
        for numa in sorted(distances):
            entries = tuple(distances[numa])
            seen = [e.numa_id for e in entries]
            if len(set(seen)) != len(seen):
                raise BalanceError(f"distances[{numa}]: a NUMA id appears twice in {seen}")
            for e in entries:
                as_int(e.distance, f"distances[{numa}] distance to NUMA {e.numa_id}", minimum=1)
            lists[numa] = entries
        self._lists: Mapping[int, tuple[NumaDistance, ...]] = MappingProxyType(lists)
        self._form: dict[str, list[list[int]]] | None = None

    def __getitem__(self, numa: int) -> tuple[NumaDistance, ...]:
        return self._lists[numa]

    def __iter__(self) -> Iterator[int]:
        return iter(self._lists)

    def __len__(self) -> int:
        return len(self._lists)

    def __repr__(self) -> str:
        return f"DistanceLists({dict(self._lists)!r})"

    def to_json(self) -> dict[str, list[list[int]]]:
        """``{"<numa>": [[numaId, distance], ...]}``, the ``distances`` of a round's plain
        form (``RoundInputs.to_json``).

        Made at the first call and the same object after: the lists cannot change, and every
        journaled round's form holds them (32 nodes: a thousand pairs, as costly to build as
        a quiet round's planning). Like that form (``PlainInputs``), it is only ever read
        (packed, compared), never changed.
        """
        form = self._form
        if form is None:
            form = self._form = {
                str(numa): [[e.numa_id, e.distance] for e in entries]
                for numa, entries in self._lists.items()
            }
        return form


def distance_lists_from_rows(
    rows: Mapping[int, Sequence[int]],
) -> dict[int, tuple[NumaDistance, ...]]:
    """Distance lists as sysfs gives them: the i-th number of a node's row is its distance to
    NUMA i, the node itself included (§4.4; positions are ids, O15)."""
    return {
        numa: tuple(NumaDistance(i, d) for i, d in enumerate(row)) for numa, row in rows.items()
    }
