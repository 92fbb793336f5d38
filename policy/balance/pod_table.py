"""A round's pods held as columns, from the memory read to the journal (memory-balancer §4.2,
§4.5, §7.8, §7.10).

A pressured round reads every pod of the balanced pools: on a 32-node machine with 2,000 pods
that is some 4,000 containers and 130,000 amounts. The planner needs little of it: each pod's
anonymous memory on the source node (§7.8, §7.10), its pool, and the names of the few pods it
picks; the journal holds it all as columns (``policy.balance.columns``). So a round keeps its
pods as those very columns (``PodTable``): the gatherer hands over every pod's values at once
(``PodTable.gathered``), the planner reads a pool's rows and one node's per-pod sums, and the
journal packs the columns as they are. A ``Pod`` (with its ``Container`` values) is made
only when something asks for one: a tool that prints the pods, a test.

``PodTable`` reads like the tuple of pods it stands for (a ``Sequence[Pod]`` in UID order, equal
to a sequence of equal pods), and its columns are exactly what ``pod_columns`` makes of those
pods: the pods in UID order, each distinct set of nodes numbered where it is first seen.

A round's values are taken into the columns (``PodTable.gathered``) when they pass, checked in
bulk, what a ``Pod`` and a ``Container`` would check one by one; when anything needs a closer
look (a long or non-ASCII name, an amount the bulk check refuses, pods out of UID order), the
gatherer makes ``Pod`` values instead (``PodTable.of``), whose checks refuse them naming the
pod, or take them as they would.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from itertools import accumulate, chain, islice, pairwise, repeat
from operator import lt
from typing import Any, Final, overload

from policy import names as k8s_names
from policy.balance.amounts import NumaAmounts, NumaIndex, amounts_of, index_of, numa_index
from policy.balance.decode import amounts_in_bulk
from policy.balance.errors import BalanceError
from policy.balance.pod_values import Container, Pod

__all__ = ["PodTable"]

_UID_MAX: Final = k8s_names.MAX_POD_UID_BYTES
_NAMESPACE_MAX: Final = k8s_names.MAX_NAMESPACE_BYTES
_NAME_MAX: Final = k8s_names.MAX_POD_NAME_BYTES
_CONTAINER_NAME_MAX: Final = k8s_names.MAX_CONTAINER_NAME_BYTES


class PodTable(Sequence[Pod]):
    """A round's pods as columns, in UID order, each UID once (module docstring).

    Made by ``PodTable.gathered`` from a round's reads or by ``PodTable.of`` from pods; never
    changed after.
    """

    __slots__ = (
        "_anon_on",
        "_columns",
        "_container_ids",
        "_container_names",
        "_counts",
        "_indexes",
        "_names",
        "_namespaces",
        "_parts",
        "_pod_ends",
        "_pods",
        "_pools",
        "_rows",
        "_set_of",
        "_uids",
    )

    def __init__(
        self,
        pods: tuple[list[str], list[str], list[str], list[str]],
        containers: tuple[list[int], list[str], list[str]],
        figures: list[NumaAmounts],
        made: tuple[Pod, ...] | None,
    ) -> None:
        # Private: ``gathered`` and ``of`` make the values (their checks are the table's).
        self._uids, self._namespaces, self._names, self._pools = pods
        self._counts, self._container_names, self._container_ids = containers
        # Each container's amounts, as its figure holds them; and its set of nodes, numbered
        # where first seen (``anonNumas``): one number for two indexes of the same nodes.
        self._parts: list[tuple[float, ...]] = list(map(amounts_of, figures))
        of_figure = list(map(index_of, figures))
        number: dict[NumaIndex, int] = {}
        by_numas: dict[tuple[int, ...], int] = {}
        self._indexes: list[NumaIndex] = []
        for index in dict.fromkeys(of_figure):
            found = by_numas.get(index.numas)
            if found is None:
                found = by_numas[index.numas] = len(self._indexes)
                self._indexes.append(index)
            number[index] = found
        self._set_of: list[int] = list(map(number.__getitem__, of_figure))
        self._pod_ends = list(accumulate(self._counts))
        self._pods = made
        self._columns: dict[str, Any] | None = None
        self._rows: dict[str, list[int]] | None = None
        self._anon_on: dict[int, list[float | None]] = {}

    @classmethod
    def gathered(
        cls,
        pods: tuple[list[str], list[str], list[str], list[str]],
        container_names: Sequence[Sequence[str]],
        container_ids: Sequence[Sequence[str]],
        figures: Sequence[Sequence[Mapping[int, float]]],
    ) -> PodTable | None:
        """The table of a round's reads, when every value passes the checks in bulk; None
        when one needs a ``Pod``'s own checks (module docstring).

        Args:
            pods: the pods' UIDs, namespaces, names and pools, by pod.
            container_names: per pod, its regular containers' names in pod-spec order.
            container_ids: per pod, per container, the ID its figure was read by, or "".
            figures: per pod, per container, its anonymous memory per NUMA node: a
                ``NumaAmounts`` (taken as checked, as ``Container`` takes it) or a map of
                byte counts, checked in bulk (``policy.balance.decode.amounts_in_bulk``).
        """
        uids, namespaces, names, pools = pods
        counts = list(map(len, container_names))
        if not (
            _fit(uids, _UID_MAX, non_empty=True)
            and all(map(lt, uids, islice(uids, 1, None)))  # UID order, each UID once
            and _fit(namespaces, _NAMESPACE_MAX)
            and _fit(names, _NAME_MAX)
            and _texts(pools)
            and len(uids) == len(namespaces) == len(names) == len(pools) == len(counts)
            and (not counts or min(counts) > 0)
            and counts == list(map(len, container_ids)) == list(map(len, figures))
            and all(len(set(each)) == len(each) for each in container_names if len(each) > 1)
        ):
            return None
        flat_names = list(chain.from_iterable(container_names))
        flat_ids = list(chain.from_iterable(container_ids))
        if not (_fit(flat_names, _CONTAINER_NAME_MAX, non_empty=True) and _texts(flat_ids)):
            return None
        flat = list(chain.from_iterable(figures))
        if set(map(type, flat)) - {NumaAmounts}:
            for at, figure in enumerate(flat):
                if type(figure) is not NumaAmounts:
                    bulk = amounts_in_bulk(figure)
                    if bulk is None:
                        return None
                    flat[at] = NumaAmounts(numa_index(bulk[0]), bulk[1])
        held: list[NumaAmounts] = flat  # type: ignore[assignment]  # every one, by now
        return cls(pods, (counts, flat_names, flat_ids), held, None)

    @classmethod
    def of(cls, pods: Sequence[Pod]) -> PodTable:
        """The table of ``pods`` (checked ``Pod`` values), put in UID order.

        Raises:
            BalanceError: a UID is listed twice.
        """
        if type(pods) is PodTable:
            return pods
        ordered = tuple(sorted(pods, key=lambda p: p.uid))
        for before, after in pairwise(ordered):
            if before.uid == after.uid:
                raise BalanceError(f"pods: pod {before.uid!r} is listed twice")
        containers = [c for pod in ordered for c in pod.containers]
        figures = []
        for container in containers:
            anon = container.anon
            if type(anon) is not NumaAmounts:  # a Container holds one; any other map in order
                anon = NumaAmounts(numa_index(tuple(anon)), tuple(anon.values()))
            figures.append(anon)
        return cls(
            (
                [p.uid for p in ordered],
                [p.namespace for p in ordered],
                [p.name for p in ordered],
                [p.pool for p in ordered],
            ),
            (
                [len(p.containers) for p in ordered],
                [c.name for c in containers],
                [c.container_id for c in containers],
            ),
            figures,
            ordered,
        )

    # -- the sequence of pods ------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._uids)

    @overload
    def __getitem__(self, index: int) -> Pod: ...

    @overload
    def __getitem__(self, index: slice) -> tuple[Pod, ...]: ...

    def __getitem__(self, index: int | slice) -> Pod | tuple[Pod, ...]:
        return self._every_pod()[index]

    def __iter__(self) -> Iterator[Pod]:
        return iter(self._every_pod())

    def __eq__(self, other: object) -> bool:
        if type(other) is PodTable:
            # Equal pods make equal columns (module docstring); different columns may still
            # stand for equal pods only if one was numbered otherwise, so those are compared.
            return self.columns == other.columns or self._every_pod() == other._every_pod()
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return self._every_pod() == tuple(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # a sequence of maps: unhashable, as its pods

    def __repr__(self) -> str:
        return repr(self._every_pod())

    def _every_pod(self) -> tuple[Pod, ...]:
        pods = self._pods
        if pods is None:
            pods = self._pods = tuple(map(self._pod, range(len(self))))
        return pods

    def _pod(self, row: int) -> Pod:
        indexes, set_of, parts = self._indexes, self._set_of, self._parts
        names, ids = self._container_names, self._container_ids
        return Pod(
            self._uids[row],
            self._namespaces[row],
            self._names[row],
            self._pools[row],
            tuple(
                Container(names[c], NumaAmounts(indexes[set_of[c]], parts[c]), ids[c])
                for c in self._containers_of(row)
            ),
        )

    def _containers_of(self, row: int) -> range:
        end = self._pod_ends[row]
        return range(end - self._counts[row], end)

    # -- what a round reads --------------------------------------------------------------------

    @property
    def columns(self) -> dict[str, Any]:
        """The journal's ``podColumns`` (``policy.balance.columns``), made on first use: not a
        copy, never to be changed."""
        columns = self._columns
        if columns is None:
            # In the order of ``policy.balance.columns.POD_COLUMNS``: the journal packs it so.
            columns = self._columns = {
                "uid": self._uids,
                "namespace": self._namespaces,
                "name": self._names,
                "pool": self._pools,
                "containers": self._counts,
                "containerName": self._container_names,
                "containerId": self._container_ids,
                "anonNumas": [list(index.numas) for index in self._indexes],
                "anonSet": self._set_of,
                "anon": list(chain.from_iterable(self._parts)),
            }
        return columns

    def uid(self, row: int) -> str:
        """The pod's UID."""
        return self._uids[row]

    def namespace(self, row: int) -> str:
        """The pod's namespace."""
        return self._namespaces[row]

    def name(self, row: int) -> str:
        """The pod's name."""
        return self._names[row]

    def container_names(self, row: int) -> tuple[str, ...]:
        """The pod's regular containers' names, in pod-spec order."""
        end = self._pod_ends[row]
        return tuple(self._container_names[end - self._counts[row] : end])

    def rows_in(self, pool: str) -> list[int]:
        """The rows of the pods in ``pool``, in UID order (none for an unknown pool)."""
        rows = self._rows
        if rows is None:
            rows = {}
            for row, name in enumerate(self._pools):
                rows.setdefault(name, []).append(row)
            self._rows = rows
        return rows.get(pool, [])

    def anon_on(self, numa_id: int) -> list[float | None]:
        """Each pod's anonymous memory on a NUMA node, by row: the sum over its containers in
        pod-spec order (as ``Pod.anon_on``, the same float additions), or None when one of
        them has no sample there (§4.2: the pod is then skipped)."""
        found = self._anon_on.get(numa_id)
        if found is not None:
            return found
        positions = [index.positions.get(numa_id) for index in self._indexes]
        each = [
            None if (at := positions[s]) is None else part[at]
            for s, part in zip(self._set_of, self._parts, strict=True)
        ]
        totals: list[float | None] = []
        start = 0
        for end in self._pod_ends:
            total = 0.0
            for value in each[start:end]:
                if value is None:
                    totals.append(None)
                    break
                total += value
            else:  # every container has a sample there
                totals.append(total)
            start = end
        self._anon_on[numa_id] = totals
        return totals

    def container_ids(self) -> dict[tuple[str, str], str]:
        """``(pod UID, container name)`` → the container ID its figure was read by, for the
        containers read by one (``actors.balancer_inputs.container_ids_of``)."""
        uids = chain.from_iterable(map(repeat, self._uids, self._counts))  # per container
        return {
            (uid, name): cid
            for uid, name, cid in zip(uids, self._container_names, self._container_ids, strict=True)
            if cid
        }


def _texts(values: list[str]) -> bool:
    """Every value a str (a subclass takes the per-field path)."""
    return not values or set(map(type, values)) == {str}


def _fit(values: list[str], limit: int, *, non_empty: bool = False) -> bool:
    """Every value a str within Kubernetes' bound in UTF-8 bytes (and not empty), told
    without encoding: within a quarter of the bound on its length alone (no character takes
    more than 4 bytes), or ASCII (every name kubelet sends is: one byte a character); False
    sends the pods through the ``Pod``'s own checks, which encode what they must."""
    if not values:
        return True
    if not _texts(values) or (non_empty and not all(values)):
        return False
    longest = max(map(len, values))
    return longest * 4 <= limit or (longest <= limit and all(map(str.isascii, values)))
