"""Everything one balance round reads, as immutable values with a plain-dict JSON form (spec §4).

A round is a pure function of ``RoundInputs``: per-NUMA read latency and bandwidth (§4.1), the
NUMA distance lists (§4.4, with or without self entries), the pools' NUMA lists and the pods in
them with each container's anonymous memory per NUMA (§4.2, §4.5), the configuration and CPU
vendor (§3), the last emitted round (§6.1) and the time. ``qrmd balance plan FILE`` reads
this form; a journaled round records it with its pods as columns (``to_journal``, the format in
``policy.balance.columns``), and either form reads back as the same inputs::

    {"now": 1795994721.5, "cpuVendor": "GenuineIntel",
     "numaMetrics": [{"numa": 0, "readLatency": 75, "readWriteBandwidth": 900}, ...],
     "distances": {"0": [[1, 11], [2, 21], [3, 21]], ...},
     "pools": {"share": [0, 1], "reclaim": [0, 1, 2, 3]},
     "pods": [{"uid": "s4", "namespace": "default", "name": "s4", "pool": "share",
               "containers": [{"name": "a", "anon": {"0": 2147483648},
                               "containerId": "containerd://4f1e..."}, ...]}, ...],
     "unresolvedPods": [], "config": {...}, "last": null}

``now`` is Unix seconds, or an RFC 3339 timestamp in a hand-written file. A metric the source
could not read is ``null`` (no sample) or ``{"error": "<reason>"}``; it fails the round, never
counts as zero. A container without a sample for a NUMA node has no key for it. Optional:
``cpuVendor`` (default none), ``unresolvedPods``, ``config`` (defaults), ``last`` (none), and
a container's ``containerId``: the runtime ID its figure was read by (memory-balancer §4.2; the
pod source lists it), absent when the figure came from the pod's cgroup.
``unresolvedPods`` are pods whose main container sits in a pool but whose pod lookup failed; they
fail any step that lists that pool, as in the reference (O17).

Construction normalises for determinism (O12): pods are kept in UID order, each UID once (O22);
container order is pod-spec order and is kept, since it is part of the output (§5.4). The pods
are held as columns (``policy.balance.pod_table``), read as the sequence of ``Pod`` values
they stand for.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from policy.balance.amounts import NumaAmounts, numa_index
from policy.balance.columns import JournaledInputs, PodColumns, pod_columns
from policy.balance.config import BalancerConfig
from policy.balance.decode import (
    amounts_checked_in_bulk,
    amounts_in_bulk,
    anon_by_numa,
    as_float,
    as_int,
    as_list,
    as_object,
    as_str,
    int_key,
    reject_unknown,
    required,
)
from policy.balance.distances import DistanceLists, NumaDistance, distance_lists_from_rows
from policy.balance.errors import BalanceError, within
from policy.balance.gojson import check_time, parse_time
from policy.balance.pod_table import PodTable
from policy.balance.pod_values import Container, Pod
from policy.balance.record import BalanceInfo

__all__ = [
    "Container",
    "MissingSample",
    "NumaDistance",
    "NumaMetrics",
    "PlainInputs",
    "Pod",
    "RoundInputs",
    "Sample",
    "UnresolvedPod",
    "distance_lists_from_rows",
]


@dataclass(frozen=True, slots=True)
class MissingSample:
    """A NUMA metric the source could not give this round (absent, expired, unreadable)."""

    reason: str = "no sample"


#: A metric value, or why there is none.
Sample = float | MissingSample


@dataclass(frozen=True, slots=True)
class NumaMetrics:
    """One NUMA node's read latency and read+write bandwidth samples (§4.1)."""

    read_latency: Sample
    read_write_bandwidth: Sample

    def __post_init__(self) -> None:
        # Made for every NUMA node every round: a sample that is already a float within
        # ``as_float``'s bounds (NaN fails the comparison) is kept as it is, as it would be.
        latency, bandwidth = self.read_latency, self.read_write_bandwidth
        if not (type(latency) is float and 0.0 <= latency < math.inf) and not isinstance(
            latency, MissingSample
        ):
            object.__setattr__(self, "read_latency", as_float(latency, "readLatency"))
        if not (type(bandwidth) is float and 0.0 <= bandwidth < math.inf) and not isinstance(
            bandwidth, MissingSample
        ):
            checked = as_float(bandwidth, "readWriteBandwidth")
            object.__setattr__(self, "read_write_bandwidth", checked)


@dataclass(frozen=True, slots=True)
class UnresolvedPod:
    """A main container in a pool whose pod could not be looked up (§4.5, O17)."""

    uid: str
    pool: str
    reason: str


@dataclass(frozen=True, slots=True)
class RoundInputs:
    """Everything one round reads. Validated and normalised on construction; ``pods``, given
    as any sequence of pods, is then a ``PodTable`` (module docstring).

    Raises:
        BalanceError: a value is out of range, a pod UID repeats, or the distances hold no node.
    """

    now: float
    numa_metrics: Mapping[int, NumaMetrics]
    distances: Mapping[int, tuple[NumaDistance, ...]]
    pools: Mapping[str, tuple[int, ...]]
    pods: Sequence[Pod]
    config: BalancerConfig = field(default_factory=BalancerConfig)
    cpu_vendor: str = ""
    unresolved_pods: tuple[UnresolvedPod, ...] = ()
    last: BalanceInfo | None = None

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "now", check_time(self.now, "now"))
        if not isinstance(self.distances, DistanceLists):  # else checked when it was made
            set_(self, "distances", DistanceLists(self.distances))
        set_(self, "numa_metrics", MappingProxyType(dict(sorted(self.numa_metrics.items()))))
        set_(
            self,
            "pools",
            MappingProxyType(
                {name: tuple(sorted(set(numas))) for name, numas in sorted(self.pools.items())}
            ),
        )
        # Held as columns in UID order (``policy.balance.pod_table``): a round's gatherer
        # gives them so, other callers give pods.
        set_(self, "pods", PodTable.of(self.pods))
        set_(
            self,
            "unresolved_pods",
            tuple(sorted(self.unresolved_pods, key=lambda u: (u.pool, u.uid, u.reason))),
        )

    def numa_ids(self) -> list[int]:
        """The NUMA nodes a round reads metrics for: every node of the distance map, ascending."""
        return list(self.distances)

    # -- JSON ------------------------------------------------------------------------------

    @classmethod
    def from_json(cls, value: object, where: str = "inputs") -> RoundInputs:
        """Decode the plain-dict form (module docstring).

        ``pods`` may be given as the journal's ``podColumns`` instead
        (``policy.balance.columns``), read column by column.

        Raises:
            BalanceError: a missing, unknown or mistyped field, named with its path.
        """
        if type(value) is JournaledInputs:
            value = value.raw  # its columns, read as they are rather than as pod maps
        obj = as_object(value, where)
        reject_unknown(obj, _INPUT_KEYS, where)
        if "pods" in obj and "podColumns" in obj:
            raise BalanceError(f"{where}: holds both 'pods' and 'podColumns'; give one")
        last_raw = obj.get("last")
        try:
            return cls._decoded(obj, last_raw, where)
        except BalanceError as exc:
            raise within(where, exc) from None

    @classmethod
    def _decoded(cls, obj: Mapping[str, object], last_raw: object, where: str) -> RoundInputs:
        return cls(
            now=_now_from_json(required(obj, "now", where), f"{where}.now"),
            cpu_vendor=as_str(obj.get("cpuVendor", ""), f"{where}.cpuVendor"),
            numa_metrics=_metrics_from_json(required(obj, "numaMetrics", where), where),
            distances=_distances_from_json(required(obj, "distances", where), where),
            pools=_pools_from_json(required(obj, "pools", where), where),
            pods=_pods_from_json(obj, where),
            unresolved_pods=tuple(
                _unresolved_from_json(u, f"{where}.unresolvedPods[{i}]")
                for i, u in enumerate(
                    as_list(obj.get("unresolvedPods", []), f"{where}.unresolvedPods")
                )
            ),
            config=BalancerConfig.from_json(obj.get("config", {}), f"{where}.config"),
            last=None if last_raw is None else BalanceInfo.from_json(last_raw, f"{where}.last"),
        )

    def plain(self) -> PlainInputs:
        """The plain-dict form, held read-only: what a round's event journals."""
        return PlainInputs(self)

    def to_journal(self) -> dict[str, object]:
        """The form a round's event journals: ``to_json`` with the pods as ``podColumns``
        (``policy.balance.columns``); ``from_json(to_journal())`` equals the original."""
        pods = self.pods
        return self._form(
            "podColumns", pods.columns if isinstance(pods, PodTable) else pod_columns(pods)
        )

    def to_json(self) -> dict[str, object]:
        """The plain-dict form; ``from_json(to_json())`` equals the original."""
        pods = [
            {
                "uid": p.uid,
                "namespace": p.namespace,
                "name": p.name,
                "pool": p.pool,
                "containers": [_container_to_json(c) for c in p.containers],
            }
            for p in self.pods
        ]
        return self._form("pods", pods)

    def _form(self, pods_key: str, pods: object) -> dict[str, object]:
        """The plain-dict form with the pods given, under their key."""
        return {
            "now": self.now,
            "cpuVendor": self.cpu_vendor,
            "numaMetrics": self._metrics_to_json(),
            "distances": _distances_to_json(self.distances),
            "pools": {name: list(numas) for name, numas in self.pools.items()},
            pods_key: pods,
            "unresolvedPods": [
                {"uid": u.uid, "pool": u.pool, "reason": u.reason} for u in self.unresolved_pods
            ],
            "config": self.config.to_json(),
            "last": None if self.last is None else self.last.to_json(),
        }

    def _metrics_to_json(self) -> list[dict[str, object]]:
        """The ``numaMetrics`` entry of ``to_json``: all a coalesced round reads of its form."""
        return [
            {
                "numa": numa,
                "readLatency": _sample_to_json(m.read_latency),
                "readWriteBandwidth": _sample_to_json(m.read_write_bandwidth),
            }
            for numa, m in self.numa_metrics.items()
        ]


class PlainInputs(Mapping[str, Any]):
    """A round's inputs in their plain-dict form (``RoundInputs.to_json``), read-only.

    Made only from a ``RoundInputs``, whose ``to_json`` and ``to_journal`` build nothing but
    str-keyed dicts, lists and scalars from values checked on construction. So the journal
    packs its journal form (``journal_form``: the pods as columns) as it is
    (``policy.balance.codec``) instead of walking it to prove it plain; no one can change it
    after it was made. Reads, and compares equal, like the dict form (``to_json``), which a
    live round builds only when something reads it.

    The form is built on first use, not when the round's event is made: a quiet round that
    coalescing leaves out of the journal (``policy.balance.coalesce``) reads only its
    ``numaMetrics``, and building the rest (the distance lists: one per NUMA pair) cost a
    quiet round more than its planning. ``numaMetrics`` alone is built apart for that read.
    """

    __slots__ = ("_form", "_inputs", "_journal", "_metrics")

    def __init__(self, inputs: RoundInputs) -> None:
        self._inputs = inputs
        self._form: dict[str, Any] | None = None
        self._journal: dict[str, Any] | None = None
        self._metrics: list[dict[str, object]] | None = None

    def __getitem__(self, key: str) -> Any:
        if self._form is None and key == "numaMetrics":
            if self._metrics is None:
                self._metrics = self._inputs._metrics_to_json()
            return self._metrics
        return self.packable()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.packable())

    def __len__(self) -> int:
        return len(self.packable())

    def __repr__(self) -> str:
        return f"PlainInputs({self.packable()!r})"

    @property
    def inputs(self) -> RoundInputs:
        """The inputs this form is made from."""
        return self._inputs

    def packable(self) -> dict[str, Any]:
        """The form itself, for an encoder to pack at once: not a copy, never to be changed."""
        if self._form is None:
            self._form = self._inputs.to_json()
        return self._form

    def journal_form(self) -> dict[str, Any]:
        """The journal's form (``RoundInputs.to_journal``: the pods as columns), as
        ``packable``: what the codec packs, built once."""
        if self._journal is None:
            self._journal = self._inputs.to_journal()
        return self._journal


_INPUT_KEYS = (
    "now",
    "cpuVendor",
    "numaMetrics",
    "distances",
    "pools",
    "pods",
    "podColumns",
    "unresolvedPods",
    "config",
    "last",
)


def _pods_from_json(obj: Mapping[str, object], where: str) -> tuple[Pod, ...]:
    if "podColumns" in obj:
        return _pods_from_columns(obj["podColumns"], f"{where}.podColumns")
    return tuple(
        _pod_from_json(p, f"{where}.pods[{i}]")
        for i, p in enumerate(as_list(required(obj, "pods", where), f"{where}.pods"))
    )


def _now_from_json(value: object, where: str) -> float:
    # Operators writing a round file may prefer a timestamp to Unix seconds.
    if isinstance(value, str):
        return parse_time(value, where)
    return as_float(value, where)


def _sample_from_json(value: object, where: str) -> Sample:
    if value is None:
        return MissingSample()
    if isinstance(value, Mapping):
        obj = as_object(value, where)
        reject_unknown(obj, ("error",), where)
        return MissingSample(as_str(required(obj, "error", where), f"{where}.error"))
    return as_float(value, where)


def _sample_to_json(sample: Sample) -> object:
    if isinstance(sample, MissingSample):
        return None if sample == MissingSample() else {"error": sample.reason}
    return sample


def _metrics_from_json(value: object, where: str) -> dict[int, NumaMetrics]:
    metrics: dict[int, NumaMetrics] = {}
    for i, raw in enumerate(as_list(value, f"{where}.numaMetrics")):
        at = f"{where}.numaMetrics[{i}]"
        obj = as_object(raw, at)
        reject_unknown(obj, ("numa", "readLatency", "readWriteBandwidth"), at)
        numa = as_int(required(obj, "numa", at), f"{at}.numa")
        if numa in metrics:
            raise BalanceError(f"{at}.numa: NUMA {numa} is listed twice")
        metrics[numa] = NumaMetrics(
            read_latency=_sample_from_json(obj.get("readLatency"), f"{at}.readLatency"),
            read_write_bandwidth=_sample_from_json(
                obj.get("readWriteBandwidth"), f"{at}.readWriteBandwidth"
            ),
        )
    return metrics


def _distances_from_json(value: object, where: str) -> dict[int, tuple[NumaDistance, ...]]:
    at = f"{where}.distances"
    out: dict[int, tuple[NumaDistance, ...]] = {}
    for key, raw in as_object(value, at).items():
        numa = int_key(key, at)
        entries: list[NumaDistance] = []
        for i, pair in enumerate(as_list(raw, f"{at}[{key!r}]")):
            pair_at = f"{at}[{key!r}][{i}]"
            items = as_list(pair, pair_at)
            if len(items) != 2:
                raise BalanceError(f"{pair_at}: expected [numaId, distance], got {items!r}")
            entries.append(
                NumaDistance(
                    as_int(items[0], f"{pair_at}[0]"), as_int(items[1], f"{pair_at}[1]", minimum=1)
                )
            )
        out[numa] = tuple(entries)
    return out


def _pools_from_json(value: object, where: str) -> dict[str, tuple[int, ...]]:
    at = f"{where}.pools"
    return {
        name: tuple(
            as_int(n, f"{at}[{name!r}][{i}]") for i, n in enumerate(as_list(raw, f"{at}[{name!r}]"))
        )
        for name, raw in as_object(value, at).items()
    }


def _distances_to_json(
    distances: Mapping[int, tuple[NumaDistance, ...]],
) -> dict[str, list[list[int]]]:
    if isinstance(distances, DistanceLists):  # always, once constructed: its form is kept
        return distances.to_json()
    return {
        str(numa): [[e.numa_id, e.distance] for e in entries] for numa, entries in distances.items()
    }


def _container_to_json(c: Container) -> dict[str, object]:
    anon = c.anon
    plain: dict[str, object] = {
        "name": c.name,
        "anon": anon.to_json()
        if isinstance(anon, NumaAmounts)
        else {str(numa): amount for numa, amount in anon.items()},
    }
    if c.container_id:  # absent without a pod source: older records read the same
        plain["containerId"] = c.container_id
    return plain


def _pod_from_json(value: object, where: str) -> Pod:
    obj = as_object(value, where)
    reject_unknown(obj, ("uid", "namespace", "name", "pool", "containers"), where)
    containers: list[Container] = []
    for i, raw in enumerate(as_list(required(obj, "containers", where), f"{where}.containers")):
        at = f"{where}.containers[{i}]"
        c = as_object(raw, at)
        reject_unknown(c, ("name", "anon", "containerId"), at)
        raw_anon = as_object(c.get("anon", {}), f"{at}.anon")
        bulk = amounts_in_bulk(raw_anon)
        # Only a value the bulk check refuses is walked again, to name it with its path.
        anon: Mapping[int, float] = (
            anon_by_numa(raw_anon, f"{at}.anon")
            if bulk is None
            else NumaAmounts(numa_index(bulk[0]), bulk[1])
        )
        name = as_str(required(c, "name", at), f"{at}.name")
        container_id = as_str(c.get("containerId", ""), f"{at}.containerId")
        containers.append(Container(name, anon, container_id))
    try:
        return Pod(
            uid=as_str(required(obj, "uid", where), f"{where}.uid", non_empty=True),
            namespace=as_str(required(obj, "namespace", where), f"{where}.namespace"),
            name=as_str(required(obj, "name", where), f"{where}.name"),
            pool=as_str(required(obj, "pool", where), f"{where}.pool"),
            containers=tuple(containers),
        )
    except BalanceError as exc:
        raise within(where, exc) from None


def _unresolved_from_json(value: object, where: str) -> UnresolvedPod:
    obj = as_object(value, where)
    reject_unknown(obj, ("uid", "pool", "reason"), where)
    return UnresolvedPod(
        uid=as_str(required(obj, "uid", where), f"{where}.uid", non_empty=True),
        pool=as_str(required(obj, "pool", where), f"{where}.pool"),
        reason=as_str(required(obj, "reason", where), f"{where}.reason", non_empty=True),
    )


def _pods_from_columns(value: object, where: str) -> tuple[Pod, ...]:
    """The pods journaled as columns (``policy.balance.columns``), each checked as a pod map
    is; a refusal names the column, and the pod by its place and UID."""
    shape = PodColumns(value, where)
    columns = shape.columns
    uids, namespaces, names, pools = (columns[k] for k in ("uid", "namespace", "name", "pool"))
    container_names, container_ids = columns["containerName"], columns["containerId"]
    indexes = [numa_index(numas) for numas in shape.sets]
    # Every amount checked at once, as a container's are; only when one is refused are they
    # read container by container, to name it.
    checked = amounts_checked_in_bulk(columns["anon"])
    pods: list[Pod] = []
    for i, containers in shape.pods():
        listed: list[Container] = []
        try:
            for c in containers:
                anon: Mapping[int, float]
                if checked is None:
                    numas, amounts = shape.amounts_of(c)
                    at = f"{where}.anon: container {container_names[c]!r} anon"
                    anon = anon_by_numa(dict(zip(numas, amounts, strict=True)), at)
                else:
                    end = shape.set_ends[c]
                    index = indexes[shape.set_of[c]]
                    anon = NumaAmounts(index, checked[end - len(index.numas) : end])
                listed.append(Container(container_names[c], anon, container_ids[c]))
            pods.append(Pod(uids[i], namespaces[i], names[i], pools[i], tuple(listed)))
        except BalanceError as exc:
            raise within(f"{where}: pod {i} ({uids[i]!r})", exc) from None
    return tuple(pods)
