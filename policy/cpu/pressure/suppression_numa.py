"""``GetEvictPods`` of the suppression plugin at Katalyst v0.5.47: the reclaim pool judged by
parts, each against the CPU it can actually supply (katalyst-core v0.5.47
``cpueviction/strategy/pressure_suppression.go:79-260``; ``metaserver/agent/metric/helper/
reclaim.go``). The v0.5.3 rule stays ``policy.cpu.pressure.suppression``.

v0.5.47 splits the reclaim pool as its CPU plugin does for reclaimed cores bound to a NUMA
node (RNB, ``policy.cpu.rnb``):

* the **non-bound part** (NUMA ``-1``): the pool's CPUs in the NUMA nodes no actual RNB
  container is in, sampled under the reclaim root cgroup (``--reclaim-relative-root-cgroup-path``,
  ``/kubepods/besteffort``); its pods are the reclaimed pods without a NUMA binding result;
* one **NUMA part** per NUMA node whose own reclaim cgroup (``<root>-<numa>``,
  ``GetNUMABindingReclaimRelativeRootCgroupPaths``) exists on the node: the pool's CPUs in that
  NUMA node, sampled under that cgroup; its pods are those whose
  ``katalyst.kubewharf.io/numa_bind_result`` annotation names that NUMA node. A NUMA node
  without that cgroup is not judged, its pods neither.

A part's **supply** (``GetReclaimMetrics``) is its idle CPU plus what reclaimed pods use:
``max(|cpus| − Σ per-core usage, 0) + cgroup usage``, capped by the cgroup's CFS quota in cores
(``quota / period`` when both are positive, the raw quota when only it is); 0 makes the rate
infinite (``math.MaxFloat64``).

The decision, in the reference's order:

1. As at v0.5.3: disabled: no pods; no reclaim pool: ``get reclaim pool failed: pool not
   found``; a pool of 0 CPUs: no pods; the reclaimed pods only (none: no pods), ordered
   larger request first, then lower priority, then ``namespace/name`` descending.
2. Each pod's NUMA binding result (``GetActualNUMABindingResult``): the annotation as an
   integer; a pod without it is ``-1``, unless it asks for NUMA binding
   (``memory_enhancement`` ``numa_binding``), which is an error; a pod whose result cannot be
   read is left out of every part (``FilterPods`` logs it), and keeps its timer.
3. The non-bound part, then each NUMA part by NUMA id (the reference walks a Go map, in no
   defined order; the set of offers does not depend on it): the part's pods against
   ``⌈total⌉ / supply`` as v0.5.3 judges them against ``⌈total⌉ / |pool|`` (the total is the
   part's pods' requests, shrinking as pods are offered; the timers start, run, and stop as at
   v0.5.3). A part whose metrics could not be read fails the call with ``get reclaim metrics
   failed: <why>``; the timers the parts before it changed are kept, as the reference changes
   them in place.
4. Timers of pods no longer reclaimed are stopped.

Each offer carries the deletion grace period when ``eviction-cpu-grace-period`` is positive
(``EvictPodsAnswer.grace_period_seconds``; v0.5.3 never sets it).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Final

from policy.cpu.enhancements import MEMORY_ENHANCEMENT_KEY, NUMA_BINDING_KEY
from policy.cpu.pressure.answers import EvictOffer, EvictPodsAnswer
from policy.cpu.pressure.inputs import InputError, active_pods_from_json, number
from policy.cpu.pressure.pods import (
    ActivePod,
    PodError,
    enhancement_pairs,
    is_reclaimed,
    pod_cpu_request,
)
from policy.cpu.pressure.settings import PressureSettings
from policy.cpu.pressure.suppression import (
    POOL_NOT_FOUND,
    SuppressionError,
    judge_part,
)
from policy.cpu.qos import QoSConfig, QoSError
from policy.cpu.reference import NUMA_BIND_RESULT_KEY
from policy.cpu.rnb import non_actual_numas
from policy.decision import Decision
from policy.state.cpu_state import CPUState
from policy.state.pressure import PressureHistory
from policy.state.pressure.events import SuppressionTimersSet
from policy.topology.cpuset import CPUSet

__all__ = [
    "NON_BOUND",
    "NUMASuppressionInputs",
    "ReclaimPart",
    "ReclaimSample",
    "evict_pods_by_numa",
    "numa_binding_result",
    "numa_reclaim_cgroups",
    "reclaim_parts",
]

#: The part of the pool no RNB container is bound to (``commonstate.FakedNUMAID``).
NON_BOUND: Final = -1
#: ``numaBindingReclaimRelativeRootCgroupPathSeparator``.
_NUMA_CGROUP_SEPARATOR: Final = "-"


@dataclass(frozen=True, slots=True)
class ReclaimSample:
    """What the metrics said of one part (``GetReclaimMetrics``' inputs).

    Attributes:
        pool_usage: the per-core usage ratios of the part's CPUs, summed
            (``AggregateCoreMetric(cpus, cpu.usage.ratio, sum)``), in CPUs.
        cgroup_usage: the reclaim cgroup's CPU usage (``cpu.usage.cgroup``), in CPUs.
        cfs_quota: its ``cpu.quota.cgroup`` as read (microseconds; ``<= 0``: none).
        cfs_period: its ``cpu.period.cgroup`` as read (microseconds).
    """

    pool_usage: float
    cgroup_usage: float
    cfs_quota: float
    cfs_period: float

    def supply(self, cpus: int) -> float:
        """``ReclaimedCoresSupply`` of a part of ``cpus`` CPUs (the module docstring)."""
        quota = self.cfs_quota
        if quota > 0 and self.cfs_period > 0:
            quota = quota / self.cfs_period
        supply = max(float(cpus) - self.pool_usage, 0.0) + self.cgroup_usage
        return min(supply, quota) if quota > 0 else supply

    def to_json(self) -> dict[str, float]:
        return {
            "pool_usage": self.pool_usage,
            "cgroup_usage": self.cgroup_usage,
            "cfs_quota": self.cfs_quota,
            "cfs_period": self.cfs_period,
        }


@dataclass(frozen=True, slots=True)
class ReclaimPart:
    """One part of the reclaim pool and its sample.

    Attributes:
        numa: :data:`NON_BOUND` or the NUMA node.
        cpus: the part's CPU count.
        sample: its metrics; None when they could not be read, with ``missing`` saying why.
        missing: why there is no sample (the reference's metric error).
    """

    numa: int
    cpus: int
    sample: ReclaimSample | None
    missing: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "numa": self.numa,
            "cpus": self.cpus,
            "sample": None if self.sample is None else self.sample.to_json(),
            "missing": self.missing,
        }


@dataclass(frozen=True, slots=True)
class NUMASuppressionInputs:
    """The v0.5.47 ``GetEvictPods`` inputs.

    Attributes:
        reclaim_pool_size: CPUs of the ``reclaim`` pool; None when the state has none.
        parts: the non-bound part first, then the judged NUMA parts by NUMA id.
        active_pods: the request's pods, in request order.
    """

    reclaim_pool_size: int | None
    parts: tuple[ReclaimPart, ...]
    active_pods: tuple[ActivePod, ...]

    def to_json(self) -> dict[str, Any]:
        """The inputs as plain values (a journal record's cause)."""
        return {
            "reclaim_pool_size": self.reclaim_pool_size,
            "parts": [p.to_json() for p in self.parts],
            "active_pods": [p.to_json() for p in self.active_pods],
        }

    @classmethod
    def from_json(cls, value: object, where: str = "inputs") -> NUMASuppressionInputs:
        """Read :meth:`to_json`'s form.

        Raises:
            InputError: malformed; the message names the field.
        """
        obj = _map(value, where, ("reclaim_pool_size", "parts", "active_pods"))
        size = obj.get("reclaim_pool_size")
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
            raise InputError(f"{where}.reclaim_pool_size: expected a CPU count >= 0 or null")
        parts_raw = obj.get("parts", [])
        if not isinstance(parts_raw, list):
            raise InputError(f"{where}.parts: expected a list, got {type(parts_raw).__name__}")
        parts = tuple(_part(raw, f"{where}.parts[{i}]") for i, raw in enumerate(parts_raw))
        pods = active_pods_from_json(obj.get("active_pods", []), f"{where}.active_pods")
        return cls(size, parts, pods)


def _part(raw: object, where: str) -> ReclaimPart:
    obj = _map(raw, where, ("numa", "cpus", "sample", "missing"))
    numa, cpus = obj.get("numa"), obj.get("cpus")
    if isinstance(numa, bool) or not isinstance(numa, int) or numa < NON_BOUND:
        raise InputError(f"{where}.numa: expected -1 or a NUMA id, got {numa!r:.40}")
    if isinstance(cpus, bool) or not isinstance(cpus, int) or cpus < 0:
        raise InputError(f"{where}.cpus: expected a CPU count >= 0, got {cpus!r:.40}")
    missing = obj.get("missing", "")
    if not isinstance(missing, str):
        raise InputError(f"{where}.missing: expected a string")
    sample_raw = obj.get("sample")
    if sample_raw is None:
        return ReclaimPart(numa, cpus, None, missing)
    keys = ("pool_usage", "cgroup_usage", "cfs_quota", "cfs_period")
    s = _map(sample_raw, f"{where}.sample", keys)
    values = [number(s.get(k), f"{where}.sample.{k}") for k in keys]
    return ReclaimPart(numa, cpus, ReclaimSample(*values), missing)


def _map(value: object, where: str, keys: tuple[str, ...]) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InputError(f"{where}: expected a map, got {type(value).__name__}")
    unknown = sorted(str(k) for k in set(value) - set(keys))
    if unknown:
        raise InputError(f"{where}: unknown keys {unknown}; known: {list(keys)}")
    return value


# -- the parts, from the CPU state -----------------------------------------------------------


def numa_reclaim_cgroups(root: str, numas: Collection[int]) -> dict[int, str]:
    """``GetNUMABindingReclaimRelativeRootCgroupPaths``: each NUMA node's reclaim cgroup,
    relative to the cgroup root (``/kubepods/besteffort-1``)."""
    return {numa: f"{root}{_NUMA_CGROUP_SEPARATOR}{numa}" for numa in sorted(numas)}


def reclaim_parts(
    state: CPUState, numas_with_cgroup: Collection[int]
) -> tuple[tuple[int, CPUSet], ...]:
    """The parts to sample, non-bound first (the module docstring): ``(numa, cpus)``.

    Args:
        state: the CPU state; its ``reclaim`` pool exists.
        numas_with_cgroup: the NUMA nodes whose own reclaim cgroup exists.
    """
    pool = state.pool_cpus("reclaim") or CPUSet()
    masks = state.topology.numa_masks()
    non_bound = sum(masks[n] for n in non_actual_numas(state))
    parts = [(NON_BOUND, CPUSet.from_mask(pool.mask & non_bound))]
    for numa in sorted(numas_with_cgroup):
        parts.append((numa, CPUSet.from_mask(pool.mask & masks.get(numa, 0))))
    return tuple(parts)


# -- the decision ----------------------------------------------------------------------------


def numa_binding_result(qos: QoSConfig, pod: ActivePod) -> int:
    """``GetActualNUMABindingResult``: the NUMA of the pod's binding result annotation, or
    :data:`NON_BOUND` without one.

    Raises:
        PodError: the annotation is no integer, or the pod asks for NUMA binding and has none
            ("numa binding result not found").
    """
    text = pod.annotations.get(NUMA_BIND_RESULT_KEY)
    if text is not None:
        try:
            return _go_atoi(text)
        except ValueError:
            raise PodError(
                f'strconv.Atoi: parsing "{text:.40}": invalid syntax (pod {pod.uniq_key})'
            ) from None
    if _asks_numa_binding(qos, pod.annotations):
        raise PodError(f"numa binding result not found (pod {pod.uniq_key})")
    return NON_BOUND


def _go_atoi(text: str) -> int:
    """``strconv.Atoi``: an optional sign and decimal digits only."""
    digits = text[1:] if text[:1] in ("+", "-") else text
    if not digits.isascii() or not digits.isdigit():
        raise ValueError(text)
    return int(text)


def _asks_numa_binding(qos: QoSConfig, annotations: Mapping[str, str]) -> bool:
    """``IsPodNumaBinding``: the memory enhancement (or its alias) says ``numa_binding``."""
    pairs = enhancement_pairs(qos, annotations, MEMORY_ENHANCEMENT_KEY)
    return pairs.get(NUMA_BINDING_KEY) == "true"


@dataclass(frozen=True, slots=True)
class _Candidate:
    index: int
    pod: ActivePod
    request: Fraction
    numa: int | None  # None: its binding result could not be read


def evict_pods_by_numa(
    history: PressureHistory,
    inputs: NUMASuppressionInputs,
    settings: PressureSettings,
    now: float,
    qos: QoSConfig | None = None,
) -> Decision[EvictPodsAnswer]:
    """``GetEvictPods`` of the suppression plugin at v0.5.47 (the module docstring's steps).

    Returns:
        The offers and, when the timers change or a pod is offered, one
        ``SuppressionTimersSet``; with ``error`` set when a part had no metrics (its events
        still to commit).

    Raises:
        SuppressionError: the state has no reclaim pool.
        PodError: a pod's request is not a Kubernetes quantity.
    """
    qos = qos or QoSConfig()
    # 1. As at v0.5.3: early answers that keep the timers, then the reclaimed pods in order.
    if not settings.enable_suppression_eviction:
        return Decision(events=(), reply=EvictPodsAnswer())
    if inputs.reclaim_pool_size is None:
        raise SuppressionError(f"get reclaim pool failed: {POOL_NOT_FOUND}")
    if inputs.reclaim_pool_size == 0:
        return Decision(
            events=(), reply=EvictPodsAnswer(), warnings=("reclaim pool set size is empty",)
        )
    warnings: list[str] = []
    reclaimed: list[tuple[int, ActivePod]] = []
    for index, pod in enumerate(inputs.active_pods):
        try:
            if is_reclaimed(qos, pod):
                reclaimed.append((index, pod))
        except QoSError as err:
            warnings.append(f"filter pod {pod.name} err: {err}")
    if not reclaimed:
        return Decision(events=(), reply=EvictPodsAnswer(), warnings=tuple(warnings))
    # 2. Each pod's binding result; one that cannot be read is in no part.
    candidates = []
    for index, pod in reclaimed:
        try:
            numa: int | None = numa_binding_result(qos, pod)
        except PodError as err:
            warnings.append(f"filter pod {pod.name} err: {err}")
            numa = None
        candidates.append(_Candidate(index, pod, pod_cpu_request(pod), numa))
    ordered = _order(candidates)
    # 3. The parts in turn, on one set of timers.
    since = dict(history.tolerance_since)
    offers: list[tuple[str, EvictOffer]] = []
    for part in inputs.parts:
        if part.sample is None:
            # The call fails: nothing is offered, the timers changed so far stay changed.
            error = SuppressionError(f"get reclaim metrics failed: {part.missing}")
            return _decide(history, since, [], warnings, error)
        members = [c for c in ordered if c.numa == part.numa]
        supply = part.sample.supply(part.cpus)
        judge_part(members, supply, settings=settings, qos=qos, now=now, since=since, offers=offers,
               warnings=warnings)  # fmt: skip
    # 4. Timers of pods that are no longer reclaimed.
    keys = {c.pod.uniq_key for c in ordered}
    since = {key: t for key, t in since.items() if key in keys}
    return _decide(history, since, offers, warnings, None, grace_period_s=settings.grace_period_s)


def _order(candidates: list[_Candidate]) -> list[_Candidate]:
    """Larger request first, then lower priority, then ``namespace/name`` descending (as
    ``policy.cpu.pressure.suppression.suppression_order``)."""
    by_key = sorted(candidates, key=lambda c: c.pod.uniq_key, reverse=True)
    by_priority = sorted(by_key, key=lambda c: c.pod.effective_priority)
    return sorted(by_priority, key=lambda c: c.request, reverse=True)


def _decide(
    history: PressureHistory,
    since: dict[str, float],
    offers: list[tuple[str, EvictOffer]],
    warnings: list[str],
    error: SuppressionError | None,
    *,
    grace_period_s: int = -1,
) -> Decision[EvictPodsAnswer]:
    """The answer, and one event when the timers changed or a pod was offered."""
    events: tuple[SuppressionTimersSet, ...] = ()
    if offers or since != dict(history.tolerance_since):
        evicted = tuple((key, offer.reason) for key, offer in offers)
        events = (SuppressionTimersSet(since=tuple(sorted(since.items())), evicted=evicted),)
    grace = grace_period_s if grace_period_s > 0 else None
    answer = EvictPodsAnswer(tuple(offer for _, offer in offers), grace)
    return Decision(events=events, reply=answer, error=error, warnings=tuple(warnings))
