"""Shared cores with NUMA binding (SNB) at the v0.5.47 reference level: what marks them, the
pools they live in, and the quantities their hints and pools are computed from (spec
cpu-policy-v0.5.47 (a); katalyst-core v0.5.47 ``commonstate/pool.go``, ``state/state.go``,
``state/util.go``).

* A container is SNB when its level is ``shared_cores`` and its flattened annotations hold
  ``numa_binding: "true"`` (``numa_exclusive`` is ignored for it).
* Allocate records the NUMA it was placed on as annotation ``numa_hint: "<id>"`` and the
  container joins pool ``<base>-NUMA<id>``: the base is its ``cpuset_pool``, or ``share``.
  A pool is an SNB pool by its name (``-NUMA`` in it), as in the reference.
* A NUMA's *available quantity* for SNB is its allocatable CPUs (the default cpuset minus the
  reserve) minus the requests of the SNB pods on it, each pod counted once: by its
  ``pod.kubernetes.io/pod-aggregated-requests`` annotation when it has one, else by the sum of
  its SNB containers' requests. It is fractional; "sufficient" allows 0.0001 of slack.
* An SNB pool's demand is the sum of its main containers' requests × 2, ceiled after
  truncating to milli-CPUs (``CPUPreciseCeil``); non-binding pools are ceiled the same way.

Everything reads the state; nothing here emits events. Costs: the SNB pools and their owners
come from the state's pool map and owner index (O(SNB pools + SNB containers)); pool demands,
the non-binding shared total and NUMA anti-affinity from the state's per-class index
(``policy.state.cpu_indexes.ContainerClass``: O(classes), never O(containers)). The reference
sums floats in key order; the index holds exact sums, and its answer stands only when every
float sum within the rounding error bound would ceil alike, else the key-order walk answers
(``_Sum.settled_ceil``), so answers are the reference's to the bit.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Mapping
from functools import lru_cache
from typing import Final

from policy.cpu.context import PolicyContext
from policy.cpu.reference import AGGREGATED_REQUESTS_KEY, INPLACE_UPDATE_RESIZING_KEY
from policy.cpu.reserve import ReserveError, parse_cpu_quantity
from policy.state.cpu_indexes import ClassTotals, ContainerClass, exact_units
from policy.state.cpu_state import ContainerKey, CPUState
from policy.state.entries import (
    ANNOTATION_CPUSET_POOL,
    ANNOTATION_NUMA_BINDING,
    ANNOTATION_NUMA_SHARE,
    RAMPING,
    SHARE_POOL,
    SHARED_CORES,
    ContainerEntry,
    InPool,
    requested_cores,
    specified_pool_name,
)
from policy.topology.cpuset import CPUSet

__all__ = [
    "NUMA_HINT_KEY",
    "NUMA_POOL_INFIX",
    "NUMA_SHARE_KEY",
    "SNB_INCR_RATIO",
    "adjustable_cpus",
    "anti_affine_numas",
    "binding_numas",
    "cpu_is_sufficient",
    "demand_of",
    "exclusive_binding_numas",
    "is_anti_affine",
    "is_inplace_resizing",
    "is_snb",
    "non_binding_pooled_cpus",
    "non_binding_shared_requested",
    "numa_allocatable",
    "numa_available_quantities",
    "numa_available_quantity",
    "numa_of_pool",
    "numa_pool_name",
    "numas_of",
    "pod_aggregated_request",
    "pool_demands",
    "precise_ceil",
    "snb_numa_of",
    "snb_pool_cpus",
    "snb_pools",
    "target_pool",
]

#: Annotation of an SNB container: the NUMA it was placed on (``consts.go``).
NUMA_HINT_KEY: Final = "numa_hint"
#: ``commonstate.NUMAPoolInfix``.
NUMA_POOL_INFIX: Final = "-NUMA"
#: ``numa_share: "false"`` asks for NUMA anti-affinity.
NUMA_SHARE_KEY: Final = ANNOTATION_NUMA_SHARE
#: ``CPUIncrRatioSharedCoresNUMABinding``: an SNB pool holds twice its requests, to burst.
SNB_INCR_RATIO: Final = 2.0
#: ``CPUIsSufficient``'s slack: the smallest CPU quantity is a milli-CPU.
_SUFFICIENT_SLACK: Final = 0.0001

_NUMA_POOL = re.compile(r"^(?P<base>.*)-NUMA(?P<numa>[0-9]+)$")


def is_snb(qos_level: str, annotations: Mapping[str, str] | None) -> bool:
    """Whether a container of this level and these (flattened) annotations is SNB."""
    return (
        qos_level == SHARED_CORES
        and annotations is not None
        and annotations.get(ANNOTATION_NUMA_BINDING) == "true"
    )


def is_inplace_resizing(annotations: Mapping[str, str] | None) -> bool:
    """``PodInplaceUpdateResizing``: the pod is being resized in place."""
    return annotations is not None and annotations.get(INPLACE_UPDATE_RESIZING_KEY) == "true"


def numa_pool_name(annotations: Mapping[str, str] | None, numa: int) -> str:
    """``GetNUMAPoolName``: ``<cpuset_pool or share>-NUMA<numa>``."""
    base = (annotations or {}).get(ANNOTATION_CPUSET_POOL, "") or SHARE_POOL
    return f"{base}{NUMA_POOL_INFIX}{numa}"


@lru_cache(maxsize=1024)
def numa_of_pool(name: str) -> int | None:
    """The NUMA of an SNB pool named ``<base>-NUMA<id>``; None for any other pool.

    Remembered per name: a node has a few pools, and SNB decisions ask of each of them for
    every NUMA node they weigh."""
    match = _NUMA_POOL.match(name)
    return None if match is None else int(match["numa"])


def snb_numa_of(entry: ContainerEntry) -> int | None:
    """The NUMA an SNB container is bound to: its SNB owner pool's, else its ``numa_hint``."""
    numa = numa_of_pool(entry.owner_pool_name)
    if numa is not None:
        return numa
    text = (entry.annotations or {}).get(NUMA_HINT_KEY, "")
    return int(text) if text.isdigit() else None


def precise_ceil(quantity: float) -> int:
    """``CPUPreciseCeil``: truncate to milli-CPUs, then round up."""
    return math.ceil(int(quantity * 1000) / 1000)


def cpu_is_sufficient(request: float, available: float) -> bool:
    """``CPUIsSufficient``: ``request < available + 0.0001``."""
    return request < available + _SUFFICIENT_SLACK


def pod_aggregated_request(annotations: Mapping[str, str] | None) -> float | None:
    """The CPU of ``pod.kubernetes.io/pod-aggregated-requests`` (a JSON ResourceList), in
    cores rounded up to milli-CPUs; None when absent or unreadable (the reference then falls
    back on the container's own request)."""
    text = (annotations or {}).get(AGGREGATED_REQUESTS_KEY)
    if text is None:
        return None
    try:
        resources = json.loads(text)
    except ValueError:
        return None
    if not isinstance(resources, dict):
        return None
    cpu = resources.get("cpu", "0")
    if isinstance(cpu, bool) or not isinstance(cpu, str | int | float):
        return None
    try:
        cores = parse_cpu_quantity(str(cpu))
    except ReserveError:
        return None
    return math.ceil(cores * 1000) / 1000


def snb_pools(state: CPUState) -> dict[str, int]:
    """Every SNB pool some container owns, with its NUMA."""
    out: dict[str, int] = {}
    for name in state.pools:
        numa = numa_of_pool(name)
        if numa is not None and state.containers_owned_by(name):
            out[name] = numa
    return out


def binding_numas(state: CPUState, ignore: Collection[ContainerKey] = ()) -> frozenset[int]:
    """NUMAs hosting an SNB or a dedicated NUMA-binding container (the reference's
    ``CheckSharedOrDedicatedNUMABinding`` NUMAs)."""
    numas = set(state.numas_with_dedicated_numa_binding())
    for name, numa in snb_pools(state).items():
        if any(key not in ignore for key in state.containers_owned_by(name)):
            numas.add(numa)
    return frozenset(numas)


def _snb_containers_by_numa(
    state: CPUState, ignore: Collection[ContainerKey]
) -> dict[int, dict[str, list[ContainerEntry]]]:
    """``{numa: {pod: [SNB containers]}}`` of the SNB pools' owners."""
    out: dict[int, dict[str, list[ContainerEntry]]] = {}
    for name, numa in snb_pools(state).items():
        for key in state.containers_owned_by(name):
            if key in ignore:
                continue
            entry = state.require_entry(*key)
            out.setdefault(numa, {}).setdefault(entry.pod_uid, []).append(entry)
    return out


def numa_allocatable(state: CPUState, ctx: PolicyContext, numa: int) -> int:
    """A NUMA's allocatable CPUs: its default cpuset minus the reserve."""
    return state.numa_available_count(numa, ctx.reserved)


def numa_available_quantity(
    state: CPUState, ctx: PolicyContext, numa: int, ignore: Collection[ContainerKey] = ()
) -> float:
    """``GetAvailableCPUQuantity``: allocatable minus the SNB pods' requests on ``numa``
    (module docstring), at least 0.

    Args:
        state: the CPU state.
        ctx: the reserve and the pod-spec seam.
        numa: the NUMA node.
        ignore: containers to leave out (a container being re-hinted).
    """
    pods = _snb_containers_by_numa(state, ignore).get(numa, {})
    return _available_quantity(state, ctx, numa, pods, ignore)


def numa_available_quantities(
    state: CPUState, ctx: PolicyContext, ignore: Collection[ContainerKey] = ()
) -> dict[int, float]:
    """:func:`numa_available_quantity` of every NUMA node of the topology, the SNB pools'
    owners gathered once for all of them (a decision that weighs each node asks for all)."""
    by_numa = _snb_containers_by_numa(state, ignore)
    return {
        numa: _available_quantity(state, ctx, numa, by_numa.get(numa, {}), ignore)
        for numa in ctx.topology.numa_masks()
    }


def _available_quantity(
    state: CPUState,
    ctx: PolicyContext,
    numa: int,
    pods: Mapping[str, list[ContainerEntry]],
    ignore: Collection[ContainerKey],
) -> float:
    used = 0.0
    for pod_uid in sorted(pods):
        main = state.main_container_entry(pod_uid)
        if main is None or not is_snb(main.qos_level, main.annotations) or main.key in ignore:
            continue
        aggregated = pod_aggregated_request(main.annotations)
        if aggregated is not None:
            used += aggregated
            continue
        for entry in sorted(pods[pod_uid], key=lambda e: e.container_name):
            used += entry.request_quantity
    return max(numa_allocatable(state, ctx, numa) - used, 0.0)


def non_binding_shared_requested(
    state: CPUState, ctx: PolicyContext, new_pod: tuple[str, float] | None = None
) -> int:
    """``GetNonBindingSharedRequestedQuantityFromPodEntries``: the requests of every
    non-binding shared container, precisely ceiled; with ``new_pod = (uid, request)`` that
    pod's stored containers are replaced by its request (its aggregated one).

    From the state's exact per-class sums (O(classes + that pod's containers)); the walk in key
    order only when the reference's float sum could ceil differently (``_settled_ceil``).
    """
    idx = state.indexes
    total = _Sum()
    for cls, totals in idx.classes.items():
        if cls.qos_level == SHARED_CORES and not cls.numa_binding:
            total.add_sum(totals)
            for key in idx.class_unknown.get(cls, ()):
                entry = state.require_entry(*key)
                total.add_value(requested_cores(entry, ctx.requested_millicpu))
    if new_pod is not None:
        for entry in state.pod_containers(new_pod[0]).values():
            if entry.is_shared() and not entry.is_numa_binding():
                total.remove(requested_cores(entry, ctx.requested_millicpu))
        if not math.isfinite(new_pod[1]):
            return _non_binding_shared_requested_walk(state, ctx, new_pod)
        total.add(new_pod[1])
    settled = total.settled_ceil()
    if settled is None:
        return _non_binding_shared_requested_walk(state, ctx, new_pod)
    return settled


def _non_binding_shared_requested_walk(
    state: CPUState, ctx: PolicyContext, new_pod: tuple[str, float] | None = None
) -> int:
    """``non_binding_shared_requested`` as the reference sums it: in key order, in floats."""
    total = 0.0
    for entry in state.entries():  # by key: the order of the sum
        if not entry.is_shared() or entry.is_numa_binding():
            continue
        if new_pod is not None and entry.pod_uid == new_pod[0]:
            continue
        total += requested_cores(entry, ctx.requested_millicpu)
    if new_pod is not None:
        total += new_pod[1]
    return precise_ceil(total)


def non_binding_pooled_cpus(state: CPUState, ctx: PolicyContext) -> CPUSet:
    """The pooled CPUs at v0.5.47 (``GetFilteredAvailableCPUSet(reserved, CheckDedicated,
    CheckSharedOrDedicatedNUMABinding)``): the CPUs of NUMAs hosting no SNB or dedicated
    NUMA-binding container, minus dedicated containers' CPUs and the reserve (spec
    cpu-policy-v0.5.47 (c) 8)."""
    pooled = state.pooled_cpus(ctx.reserved)
    snb = snb_pools(state).values()
    if not snb:
        return pooled
    masks = ctx.topology.numa_masks()
    return CPUSet.from_mask(pooled.mask & ~_mask_of(masks, snb))


def numas_of(masks: Mapping[int, int], cpus: CPUSet) -> frozenset[int]:
    """The NUMA nodes ``cpus`` touch."""
    return frozenset(numa for numa, mask in masks.items() if mask & cpus.mask)


def _mask_of(masks: Mapping[int, int], numas: Collection[int]) -> int:
    bits = 0
    for numa in numas:
        bits |= masks.get(numa, 0)
    return bits


def is_anti_affine(entry: ContainerEntry, qos_level: str, annotations: Mapping[str, str]) -> bool:
    """``CheckNUMABindingAntiAffinity``: whether a stored container keeps a NUMA binding
    candidate of this level and these annotations off its NUMA nodes.

    Only when one side asks ``numa_share: "false"``: then a different level is anti-affine,
    and so is an SNB container whose pool base differs from the candidate's.
    """
    if not annotations:
        return False
    mine = entry.annotations or {}
    if mine.get(NUMA_SHARE_KEY) != "false" and annotations.get(NUMA_SHARE_KEY) != "false":
        return False
    if entry.qos_level != qos_level:
        return True
    if is_snb(entry.qos_level, entry.annotations):
        candidate = annotations.get(ANNOTATION_CPUSET_POOL, "") or SHARE_POOL
        return entry.specified_pool_name() != candidate
    return False


def anti_affine_numas(
    state: CPUState, ctx: PolicyContext, qos_level: str, annotations: Mapping[str, str]
) -> frozenset[int]:
    """The NUMA nodes where some stored container is anti-affine to the candidate (the
    NUMAs its current or original CPUs touch).

    From the state's affinity index: per class of stored container, the placements its
    members follow or the NUMA nodes their own CPUs touch (O(classes × placements)).
    """
    if not annotations:
        return frozenset()
    masks = ctx.topology.numa_masks()
    out: set[int] = set()
    for cls, totals in state.indexes.classes.items():
        if not _class_anti_affine(cls, qos_level, annotations):
            continue
        for placement in totals.placements:
            kind = placement[0]
            if kind == "own":  # own CPUs: the NUMA nodes they touch
                out.update(placement[1])
                continue
            followed = InPool(placement[1], placement[2]) if kind == "pool" else RAMPING
            result, original = state.placement_cpus(followed)
            out |= numas_of(masks, result.union(original))
    return frozenset(out)


def _class_anti_affine(cls: ContainerClass, qos_level: str, annotations: Mapping[str, str]) -> bool:
    """``is_anti_affine`` for every stored container of class ``cls``."""
    if not cls.numa_share_false and annotations.get(NUMA_SHARE_KEY) != "false":
        return False
    if cls.qos_level != qos_level:
        return True
    if cls.qos_level == SHARED_CORES and cls.numa_binding:
        candidate = annotations.get(ANNOTATION_CPUSET_POOL, "") or SHARE_POOL
        return specified_pool_name(cls.qos_level, cls.cpuset_pool) != candidate
    return False


def _anti_affine_numas_walk(
    state: CPUState, ctx: PolicyContext, qos_level: str, annotations: Mapping[str, str]
) -> frozenset[int]:
    """``anti_affine_numas`` as the reference finds them: every stored container in turn."""
    masks = ctx.topology.numa_masks()
    out: set[int] = set()
    for entry in state.entries():
        if not is_anti_affine(entry, qos_level, annotations):
            continue
        result, original = state.placement_cpus(entry.placement)
        out |= numas_of(masks, result.union(original))
    return frozenset(out)


def target_pool(entry: ContainerEntry) -> str:
    """The pool a shared container counts toward at v0.5.47: an SNB container's NUMA pool
    (its owner, or ``<base>-NUMA<numa_hint>``), any other its owner or named pool."""
    if is_snb(entry.qos_level, entry.annotations):
        if numa_of_pool(entry.owner_pool_name) is not None:
            return entry.owner_pool_name
        numa = snb_numa_of(entry)
        if numa is not None:
            return numa_pool_name(entry.annotations, numa)
    return entry.pool_name()


def demand_of(entry: ContainerEntry, ctx: PolicyContext) -> float:
    """A container's share of its pool's demand: its request, × 2 for SNB (to burst)."""
    cores = requested_cores(entry, ctx.requested_millicpu)
    return cores * SNB_INCR_RATIO if is_snb(entry.qos_level, entry.annotations) else cores


def pool_demands(
    state: CPUState, ctx: PolicyContext, ignore: Collection[ContainerKey] = ()
) -> dict[str, int]:
    """``GetSharedQuantityMapFromPodEntries`` at v0.5.47: per pool, the precisely ceiled sum
    of its shared *main* containers' demands (``demand_of``), ramping ones included (they
    count toward the pool they name), ``ignore`` left out.

    From the state's exact per-class sums (O(classes + ignored containers)); the walk in key
    order only when the reference's float sum could ceil differently (``_settled_ceil``).
    """
    idx = state.indexes
    totals: dict[str, _Sum] = {}
    for cls, class_totals in idx.classes.items():
        if cls.qos_level != SHARED_CORES or not cls.main:
            continue
        pool = _class_target_pool(cls)
        if not pool:
            continue
        total = totals.get(pool)
        if total is None:
            total = totals[pool] = _Sum()
        ratio = 2 if cls.numa_binding else 1  # SNB_INCR_RATIO: doubling a float is exact
        total.add_sum(class_totals, ratio)
        for key in idx.class_unknown.get(cls, ()):
            if key not in ignore:
                total.add_value(demand_of(state.require_entry(*key), ctx))
    for key in set(ignore):
        entry = state.entry(*key)
        if entry is None or not entry.is_shared() or not entry.is_main():
            continue
        total = totals.get(target_pool(entry))
        if total is not None:
            # A stored quantity of 0 was counted without a value (its looked-up one is added
            # above only for containers not ignored).
            total.remove(demand_of(entry, ctx) if entry.request_quantity else 0.0)
    out: dict[str, int] = {}
    for pool, total in totals.items():
        if total.count <= 0:
            continue
        settled = total.settled_ceil()
        if settled is None:
            return _pool_demands_walk(state, ctx, ignore)
        out[pool] = settled
    return out


def _class_target_pool(cls: ContainerClass) -> str:
    """``target_pool`` of every shared container of class ``cls``."""
    if cls.numa_binding:  # SNB: its NUMA pool, by its owner or else its numa_hint
        if numa_of_pool(cls.owner) is not None:
            return cls.owner
        if cls.numa_hint.isdigit():
            return f"{cls.cpuset_pool or SHARE_POOL}{NUMA_POOL_INFIX}{int(cls.numa_hint)}"
    return cls.owner or specified_pool_name(SHARED_CORES, cls.cpuset_pool)


def _pool_demands_walk(
    state: CPUState, ctx: PolicyContext, ignore: Collection[ContainerKey] = ()
) -> dict[str, int]:
    """``pool_demands`` as the reference sums them: in key order, in floats."""
    precise: dict[str, float] = {}
    for entry in state.entries():  # by key: the order of the sum
        if not entry.is_shared() or not entry.is_main() or entry.key in ignore:
            continue
        pool = target_pool(entry)
        if pool:
            precise[pool] = precise.get(pool, 0.0) + demand_of(entry, ctx)
    return {pool: precise_ceil(total) for pool, total in precise.items()}


class _Sum:
    """The exact sum of some float terms (units of 2**-1074), of their magnitudes, and how
    many there are: enough to bound the float sum the reference computes in key order."""

    __slots__ = ("count", "magnitude", "units")

    def __init__(self) -> None:
        self.count = 0
        self.units = 0
        self.magnitude = 0

    def add_sum(self, sums: ClassTotals, ratio: int = 1) -> None:
        """Add a class's terms, each multiplied by ``ratio`` (a power of two: exact)."""
        self.count += sums.terms
        self.units += sums.units * ratio
        self.magnitude += sums.magnitude * ratio

    def add_value(self, term: float) -> None:
        """Add the value of a term already counted (a stored quantity of 0, looked up)."""
        units = exact_units(term)
        self.units += units
        self.magnitude += abs(units)

    def add(self, term: float) -> None:
        self.count += 1
        self.add_value(term)

    def remove(self, term: float) -> None:
        units = exact_units(term)
        self.count -= 1
        self.units -= units
        self.magnitude -= abs(units)

    def settled_ceil(self) -> int | None:
        """``precise_ceil`` of the float sum of the terms in any order, when every such sum
        ceils alike; None when it could depend on the order (the caller then walks).

        Summing n doubles in any order strays from the exact sum by at most
        ``(n-1)·u/(1-(n-1)·u)`` times the sum of magnitudes (u = 2**-53, Higham, *Accuracy
        and Stability of Numerical Algorithms*, §4.2); ``n·2**-52`` bounds that for any
        realistic n. ``precise_ceil`` is monotone, so when the floats just outside both ends
        of that interval give the same answer, every sum inside does.
        """
        margin = ((self.count * self.magnitude) >> 52) + 1
        try:
            low = math.nextafter((self.units - margin) / _ONE_UNIT, -math.inf)
            high = math.nextafter((self.units + margin) / _ONE_UNIT, math.inf)
            answer = precise_ceil(low)
            return answer if precise_ceil(high) == answer else None
        except OverflowError:
            return None


#: One in units of 2**-1074 (``policy.state.cpu_indexes.exact_units``).
_ONE_UNIT: Final = exact_units(1.0)


def exclusive_binding_numas(state: CPUState) -> frozenset[int]:
    """NUMAs hosting a dedicated NUMA-binding, NUMA-exclusive container."""
    masks = state.topology.numa_masks()
    out: set[int] = set()
    for key in state.dedicated_containers():
        entry = state.require_entry(*key)
        if entry.is_numa_exclusive():
            result, original = state.placement_cpus(entry.placement)
            out |= numas_of(masks, result.union(original))
    return frozenset(out)


def adjustable_cpus(state: CPUState, ctx: PolicyContext) -> CPUSet:
    """The adjustable CPUs at v0.5.47 (``GetFilteredAvailableCPUSet(reserved, nil,
    CheckDedicatedNUMABindingNUMAExclusive)``): only NUMAs with a NUMA-exclusive dedicated
    container are left out whole; on the others, the dedicated NUMA-binding CPUs (v0.5.3 left
    out every NUMA hosting one). Minus the reserve."""
    masks = ctx.topology.numa_masks()
    bits = ctx.topology.cpu_details.mask & ~_mask_of(masks, exclusive_binding_numas(state))
    return CPUSet.from_mask(bits & ~state.indexes.allocated_mask & ~ctx.reserved.mask)


def snb_pool_cpus(state: CPUState) -> CPUSet:
    """The CPUs of every owned SNB pool."""
    return CPUSet.union_all(state.pools[name] for name in snb_pools(state))
