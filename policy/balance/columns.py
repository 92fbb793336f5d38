"""A balance round's pods as columns: how a journaled round holds them (memory-balancer §4.2, §4.5).

A pressured round reads every pod of the balanced pools: 2,000 pods with a few containers each
on a 32-node machine is about 130,000 amounts. As a list of pod maps (``RoundInputs.to_json``'s
``pods``) that is thousands of small maps, each container's amounts keyed by decimal NUMA ids,
to build, pack, fsync and read back every round. The journal holds them as a few long columns
instead (``RoundInputs.to_journal``), in the pods' UID order::

    "podColumns": {
      "uid": [UID, ...], "namespace": [...], "name": [...], "pool": [...],   # one per pod
      "containers": [N, ...],                  # each pod's container count, pod-spec order
      "containerName": [NAME, ...],            # one per container, the pods' in turn
      "containerId": [ID or "", ...],          # "" when the figure is the pod cgroup's
      "anonNumas": [[NUMA, ...], ...],         # each distinct set of nodes, ascending
      "anonSet": [I, ...],                     # per container: its set in anonNumas
      "anon": [BYTES, ...]                     # per container, one amount per node of its
    }                                          # set, in that order; the containers in turn

It reads back as exactly the pod maps it stands for (``expand_pod_columns``): the same pods,
containers, ``containerId`` left out when "", each container's ``anon`` keyed by its set's
ids as decimal strings. A journal written before the columns holds ``pods`` and reads as it
always did; a journaled map holds one or the other, never both.

Decoding checks the shape the expansion needs (each column's type, the lengths agreeing, every
set index and amount count in range) and raises ``BalanceError`` naming the column; the values'
own rules (a non-negative amount, a bounded name) are ``RoundInputs``' checks, applied when a
round is read back as inputs (``RoundInputs.from_json``), as for the pod maps.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from itertools import accumulate, chain
from typing import Any, Final

from policy.balance.amounts import NumaAmounts
from policy.balance.decode import (
    as_int,
    as_list,
    as_object,
    reject_unknown,
    required,
)
from policy.balance.errors import BalanceError

__all__ = [
    "POD_COLUMNS",
    "JournaledInputs",
    "PodColumns",
    "check_pod_columns",
    "expand_pod_columns",
    "pod_columns",
]

#: The columns, in the order a journaled map holds them.
POD_COLUMNS: Final = (
    "uid",
    "namespace",
    "name",
    "pool",
    "containers",
    "containerName",
    "containerId",
    "anonNumas",
    "anonSet",
    "anon",
)
_POD_TEXT: Final = ("uid", "namespace", "name", "pool")
_CONTAINER_TEXT: Final = ("containerName", "containerId")
_STR: Final = {str}
_INT: Final = {int}
_NUMBERS: Final = {int, float}


def pod_columns(pods: Sequence[Any]) -> dict[str, Any]:
    """The columns of ``pods`` (``policy.balance.inputs.Pod``, in the order given).

    Each container's amounts are a ``NumaAmounts`` (``Container`` holds them so): its node
    ids and its amounts are taken as they are, so the cost is a few appends per container.
    """
    uids: list[str] = []
    namespaces: list[str] = []
    names: list[str] = []
    pools: list[str] = []
    counts: list[int] = []
    container_names: list[str] = []
    container_ids: list[str] = []
    sets: dict[tuple[int, ...], int] = {}
    set_of: list[int] = []
    amounts: list[tuple[float, ...]] = []
    for pod in pods:
        uids.append(pod.uid)
        namespaces.append(pod.namespace)
        names.append(pod.name)
        pools.append(pod.pool)
        counts.append(len(pod.containers))
        for container in pod.containers:
            container_names.append(container.name)
            container_ids.append(container.container_id)
            anon = container.anon
            if type(anon) is NumaAmounts:
                numas, values = anon.index.numas, anon.amounts
            else:  # a Container always holds NumaAmounts; any other map is read in order
                numas, values = tuple(anon), tuple(anon.values())
            found = sets.get(numas)
            if found is None:
                found = sets[numas] = len(sets)
            set_of.append(found)
            amounts.append(values)
    return {
        "uid": uids,
        "namespace": namespaces,
        "name": names,
        "pool": pools,
        "containers": counts,
        "containerName": container_names,
        "containerId": container_ids,
        "anonNumas": [list(numas) for numas in sets],
        "anonSet": set_of,
        "anon": list(chain.from_iterable(amounts)),
    }


class PodColumns:
    """Columns whose shape is checked (module docstring): what expanding them or reading them
    as pods needs.

    Raises:
        BalanceError: on construction, the shape is wrong; names the column and the place.
    """

    __slots__ = ("columns", "ends", "set_ends", "set_of", "sets")

    def __init__(self, value: object, where: str) -> None:
        columns = as_object(value, where)
        reject_unknown(columns, POD_COLUMNS, where)
        lists: dict[str, list[Any]] = {
            key: as_list(required(columns, key, where), f"{where}.{key}") for key in POD_COLUMNS
        }
        pods = len(lists["uid"])
        for key in _POD_TEXT:
            _texts(lists[key], f"{where}.{key}", pods)
        counts = lists["containers"]
        _lengths(counts, f"{where}.containers", pods)
        if counts and (set(map(type, counts)) != _INT or min(counts) < 0):
            bad = next(i for i, n in enumerate(counts) if type(n) is not int or n < 0)
            raise BalanceError(
                f"{where}.containers[{bad}]: expected a container count, got {counts[bad]!r:.40}"
            )
        ends: list[int] = list(accumulate(counts))
        containers = ends[-1] if ends else 0
        for key in _CONTAINER_TEXT:
            _texts(lists[key], f"{where}.{key}", containers)
        sets: list[tuple[int, ...]] = []
        for i, raw in enumerate(lists["anonNumas"]):
            at = f"{where}.anonNumas[{i}]"
            numas = tuple(as_int(n, f"{at}[{j}]") for j, n in enumerate(as_list(raw, at)))
            if list(numas) != sorted(set(numas)):
                raise BalanceError(
                    f"{at}: NUMA ids must be distinct and ascending, got {numas!r:.60}"
                )
            sets.append(numas)
        set_of = lists["anonSet"]
        _lengths(set_of, f"{where}.anonSet", containers)
        if set_of and (
            set(map(type, set_of)) != _INT or min(set_of) < 0 or max(set_of) >= len(sets)
        ):
            bad = next(
                i for i, s in enumerate(set_of) if type(s) is not int or not 0 <= s < len(sets)
            )
            raise BalanceError(
                f"{where}.anonSet[{bad}]: {set_of[bad]!r:.40} names no set of anonNumas "
                f"(it has {len(sets)})"
            )
        set_ends = list(accumulate(len(sets[s]) for s in set_of))
        amounts = lists["anon"]
        wanted = set_ends[-1] if set_ends else 0
        if len(amounts) != wanted:
            raise BalanceError(
                f"{where}.anon: holds {len(amounts)} amounts, its containers' sets of nodes "
                f"need {wanted}"
            )
        if amounts and not set(map(type, amounts)) <= _NUMBERS:
            bad = next(i for i, a in enumerate(amounts) if type(a) not in _NUMBERS)
            raise BalanceError(f"{where}.anon[{bad}]: expected a number, got {amounts[bad]!r:.40}")
        #: Each column by its name, as read (the text columns hold str, the counts and set
        #: indexes int, the amounts int or float).
        self.columns = lists
        #: Per pod, the end of its containers; per container, the end of its amounts.
        self.ends = ends
        self.set_ends = set_ends
        #: The distinct sets of NUMA nodes, and per container the index of its set.
        self.sets = sets
        self.set_of: list[int] = set_of

    def pods(self) -> Iterator[tuple[int, range]]:
        """Each pod's index and the range of its containers."""
        start = 0
        for i, end in enumerate(self.ends):
            yield i, range(start, end)
            start = end

    def amounts_of(self, container: int) -> tuple[tuple[int, ...], list[Any]]:
        """A container's set of nodes and its amounts, as journaled."""
        end = self.set_ends[container]
        numas = self.sets[self.columns["anonSet"][container]]
        return numas, self.columns["anon"][end - len(numas) : end]


def _lengths(column: list[object], where: str, wanted: int) -> None:
    if len(column) != wanted:
        raise BalanceError(f"{where}: holds {len(column)} values, expected {wanted}")


def _texts(column: list[object], where: str, wanted: int) -> None:
    _lengths(column, where, wanted)
    if column and set(map(type, column)) != _STR:
        bad = next(i for i, v in enumerate(column) if type(v) is not str)
        raise BalanceError(f"{where}[{bad}]: expected a string, got {column[bad]!r:.40}")


def check_pod_columns(value: object, where: str) -> None:
    """Refuse columns whose shape does not hold pods (module docstring).

    Raises:
        BalanceError: names the column, and the place in it.
    """
    PodColumns(value, where)


def expand_pod_columns(value: object, where: str) -> list[dict[str, Any]]:
    """The pod maps the columns stand for (``RoundInputs.to_json``'s ``pods``), values as
    journaled.

    Raises:
        BalanceError: the columns' shape is wrong; names the column.
    """
    shape = PodColumns(value, where)
    columns = shape.columns
    uids, namespaces, names, pools = (columns[key] for key in _POD_TEXT)
    container_names, container_ids = columns["containerName"], columns["containerId"]
    keys = [tuple(map(str, numas)) for numas in shape.sets]
    set_of = shape.set_of
    pods: list[dict[str, Any]] = []
    for i, containers in shape.pods():
        listed: list[dict[str, Any]] = []
        for c in containers:
            _, amounts = shape.amounts_of(c)
            plain: dict[str, Any] = {
                "name": container_names[c],
                "anon": dict(zip(keys[set_of[c]], amounts, strict=True)),
            }
            if container_ids[c]:
                plain["containerId"] = container_ids[c]
            listed.append(plain)
        pods.append(
            {
                "uid": uids[i],
                "namespace": namespaces[i],
                "name": names[i],
                "pool": pools[i],
                "containers": listed,
            }
        )
    return pods


class JournaledInputs(Mapping[str, Any]):
    """A journaled round's inputs holding ``podColumns``, read as the map with ``pods``.

    Decoding a record keeps the columns as they were read (their shape checked) and expands
    them to pod maps only when something reads ``pods``: replaying a journal reads none, and
    ``RoundInputs.from_json`` reads the columns themselves. Equal to the map it reads as, so a
    record of either form compares equal to the other; packed again as it was read.
    """

    __slots__ = ("_pods", "_raw")

    def __init__(self, raw: dict[str, Any], where: str) -> None:
        check_pod_columns(raw["podColumns"], f"{where}.podColumns")
        self._raw = raw
        self._pods: list[dict[str, Any]] | None = None

    @property
    def raw(self) -> dict[str, Any]:
        """The map as journaled, with its columns: not a copy, never to be changed."""
        return self._raw

    def __getitem__(self, key: str) -> Any:
        if key == "pods":
            if self._pods is None:
                self._pods = expand_pod_columns(self._raw["podColumns"], "podColumns")
            return self._pods
        if key == "podColumns":
            raise KeyError(key)
        return self._raw[key]

    def __iter__(self) -> Iterator[str]:
        return ("pods" if key == "podColumns" else key for key in self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def __repr__(self) -> str:
        return f"JournaledInputs({dict(self)!r})"
