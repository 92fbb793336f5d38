"""The load pressure plugin, ``cpu-pressure-load-plugin`` (katalyst-core v0.5.3
``cpueviction/strategy/pressure_load.go``, normative for this component; spec cpu-policy §12.7).

Three decisions of ``(history, inputs, settings, now) -> Decision``:

``collect_load`` (``collectMetrics``, every ``--eviction-load-sync-period``):
  1. Load eviction disabled: drop every ring (the reference resets its history), done.
  2. Drop the rings of entries the CPU state no longer holds.
  3. For each container of a pool not skipped: push its load to its own ring and add it to
     its pool's sum. qrmd departs here: the reference skips a container whose metric it
     cannot read and still pushes the pool's partial sum, which counts the missing load as
     zero; qrmd pushes no sample for that pool this time and says why (a warning).
  4. For each pool entry not skipped that has a sum: push ``(sum, bounds)`` to its ring. The
     bounds are ``lower = size``, ``upper = size × ratio``; with the advised bounds
     (``enable-reclaim`` and no CPU reserved for allocation) they are ``lower = sum + 1``,
     ``upper = lower × ratio`` (never met while the pools can grow), or, once the shared
     pools' sizes add up to their limit, ``lower = 1``, ``upper = size × ratio``.

``threshold_met`` (``ThresholdMet``):
  Each pool ring not skipped and not an isolation pool is judged: ``over / ring size`` (the
  ring's size, not its filled length: a ring fills before it can be met) ``>=`` the
  percentage. The first HARD pool is answered and becomes the eviction pool; otherwise the
  eviction pool is cleared and the last SOFT pool, if any, is answered. The reference walks a
  Go map, in random order; qrmd walks pool names in order, so "first" and "last" are by
  name, and a SOFT answer carries that pool's ratio (the reference's carries whichever pool
  it happened to judge last).

``top_eviction_pods`` (``GetTopEvictionPods``):
  With load eviction enabled, an eviction pool and active pods: the candidates are the pods
  with a container in the eviction pool, scanning ``spec.containers`` in order and stopping
  at the first container the state does not hold (a pod whose first container is unknown to
  the state is no candidate even if a later one is in the pool: the reference's filter
  returns at the first unknown container). Within the cool-down none is offered; else the
  cool-down restarts, the candidates are ranked by their containers' summed ring loads,
  highest first (ties keep request order; Go's ``sort.Slice`` leaves them unspecified), the
  first ``topN`` offered and the eviction pool cleared. A grace period ``>= 0`` goes with
  them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from policy.cpu.pressure.answers import Condition, ThresholdMetAnswer, TopEvictionAnswer
from policy.cpu.pressure.inputs import LoadInputs, TopInputs
from policy.cpu.pressure.settings import EVICTION_SCOPE_LOAD, PressureSettings
from policy.decision import Decision, Event
from policy.errors import PolicyError
from policy.state.pressure import ContainerKey, LoadSample, PressureHistory
from policy.state.pressure.events import (
    LoadEvictionOffered,
    LoadEvictionPoolSet,
    LoadHistoryCleared,
    LoadSamplesCollected,
)

__all__ = [
    "ISOLATION_POOL_PREFIX",
    "CollectReport",
    "collect_load",
    "threshold_met",
    "top_eviction_pods",
]

#: ``state.PoolNamePrefixIsolation``: such pools are sampled but never judged.
ISOLATION_POOL_PREFIX = "isolation"


@dataclass(frozen=True, slots=True)
class CollectReport:
    """What one collection pushed.

    Attributes:
        pools: pool → the sample pushed to its ring.
        unsampled_pools: pools with containers but no sample this time (a missing load).
        under_pressure: the shared pools reached their limit (advised bounds only).
        advised: the advised bounds were used.
        shared_pools_limit: the limit the shared pools were judged against
            (``accumulateSharedPoolsLimit``, derived from the CPU state by the daemon, given by
            a plan); None unless the advised bounds were used.
        shared_pools_size: the summed sizes of the pools not skipped, compared with the limit;
            None unless the advised bounds were used.
    """

    pools: dict[str, LoadSample] = field(default_factory=dict)
    unsampled_pools: tuple[str, ...] = ()
    under_pressure: bool = False
    advised: bool = False
    shared_pools_limit: int | None = None
    shared_pools_size: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The report as plain values."""
        return {
            "pools": {
                pool: {"value": s.value, "upper_bound": s.upper_bound, "lower_bound": s.lower_bound}
                for pool, s in self.pools.items()
            },
            "unsampled_pools": list(self.unsampled_pools),
            "under_pressure": self.under_pressure,
            "advised": self.advised,
            "shared_pools_limit": self.shared_pools_limit,
            "shared_pools_size": self.shared_pools_size,
        }


def collect_load(
    history: PressureHistory, inputs: LoadInputs, settings: PressureSettings, now: float
) -> Decision[CollectReport]:
    """One load collection at ``now`` (the module docstring's steps).

    Raises:
        PolicyError: the advised bounds are in use but ``inputs.shared_pools_limit`` is None.
    """
    # 1. Disabled: forget every sample.
    if not settings.enable_load_eviction:
        cleared = bool(history.pool_rings or history.container_rings)
        return Decision(
            events=(LoadHistoryCleared("disabled"),) if cleared else (), reply=CollectReport()
        )
    skip = settings.skip_pools
    pool_map = inputs.pool_map
    # 2. What the state no longer holds.
    live: list[ContainerKey] = [(c.pod_uid, c.container) for c in pool_map.containers]
    live += [(pool, "") for pool in pool_map.pools]
    expired = history.expired_rings(live)
    # 3. Containers.
    containers: list[tuple[str, str, LoadSample]] = []
    sums: dict[str, float] = {}
    missing: dict[str, list[str]] = {}
    for c in sorted(pool_map.containers, key=lambda c: (c.pod_uid, c.container)):
        if not c.pool or c.pool in skip:
            continue
        load = inputs.loads.get((c.pod_uid, c.container))
        if load is None:
            why = inputs.missing.get((c.pod_uid, c.container))
            who = f"{c.pod_uid}/{c.container}" + (f" ({why})" if why else "")
            missing.setdefault(c.pool, []).append(who)
            continue
        containers.append((c.pod_uid, c.container, LoadSample(now, load)))
        sums[c.pool] = sums.get(c.pool, 0.0) + load
    # 4. Pools.
    advised = settings.uses_advised_threshold
    limit = size_sum = None
    if advised:
        limit, size_sum = _shared_pools(inputs, settings)
    under_pressure = limit is not None and size_sum is not None and size_sum >= limit
    pools: dict[str, LoadSample] = {}
    for pool in sorted(pool_map.pools):
        if pool in skip or pool not in sums or pool in missing:
            continue
        pools[pool] = _pool_sample(now, sums[pool], pool_map.pools[pool], settings, under_pressure)
    warnings = tuple(
        f"pool {pool}: no {EVICTION_SCOPE_LOAD} sample for {', '.join(who)}; "
        "the pool is not sampled this time"
        for pool, who in sorted(missing.items())
    )
    report = CollectReport(pools, tuple(sorted(missing)), under_pressure, advised, limit, size_sum)
    if not (containers or pools or expired or missing):
        # Nothing sampled, dropped or missing: an idle node journals nothing every period. (A
        # missing load is journaled: the record says which pool went unjudged, and why.)
        return Decision(events=(), reply=report, warnings=warnings)
    event = LoadSamplesCollected(
        time=now,
        ring_size=settings.load_metric_ring_size,
        expired=expired,
        containers=tuple(containers),
        pools=tuple(pools.items()),
    )
    return Decision(events=(event,), reply=report, warnings=warnings)


def _shared_pools(inputs: LoadInputs, settings: PressureSettings) -> tuple[int, int]:
    """``checkSharedPressureByPoolSize``'s two sides: the shared pools' limit and the summed
    sizes of the pools not skipped (the pools are full when the sum reaches the limit)."""
    if inputs.shared_pools_limit is None:
        raise PolicyError(
            "the load plugin uses the advised bounds (enable-reclaim with no CPU reserved for "
            "allocation) but the shared pools' limit was not given"
        )
    pools = inputs.pool_map.pools
    size_sum = sum(n for pool, n in pools.items() if pool not in settings.skip_pools)
    return inputs.shared_pools_limit, size_sum


def _pool_sample(
    now: float, load: float, size: int, settings: PressureSettings, under_pressure: bool
) -> LoadSample:
    """``collectPoolLoad``: the pool's sum with the bounds it is judged by."""
    ratio = settings.load_upper_bound_ratio
    if not settings.uses_advised_threshold:
        return LoadSample(now, load, upper_bound=size * ratio, lower_bound=float(size))
    if under_pressure:
        # Soft over must be met once the shared pools cannot grow any more.
        return LoadSample(now, load, upper_bound=size * ratio, lower_bound=1.0)
    # Never met while they can: the advisor grows the pool instead.
    lower = load + 1
    return LoadSample(now, load, upper_bound=lower * ratio, lower_bound=lower)


def threshold_met(
    history: PressureHistory, settings: PressureSettings, now: float
) -> Decision[ThresholdMetAnswer]:
    """``ThresholdMet``: judge each pool's ring (the module docstring). Never raises."""
    del now
    if not settings.enable_load_eviction:
        return Decision(events=(), reply=ThresholdMetAnswer())
    percentage = settings.load_threshold_met_percentage
    soft: tuple[str, float] | None = None
    for pool in sorted(history.pool_rings):
        if pool in settings.skip_pools or pool.startswith(ISOLATION_POOL_PREFIX):
            continue
        ring = history.pool_rings[pool]
        soft_count, hard_count = ring.over_counts()
        soft_ratio, hard_ratio = soft_count / ring.max_len, hard_count / ring.max_len
        if hard_ratio >= percentage:
            events = _set_pool(history, pool)
            return Decision(events=events, reply=_met("HARD_MET", hard_ratio, settings, pool))
        if soft_ratio >= percentage:
            soft = (pool, soft_ratio)
    events = _set_pool(history, "")
    if soft is None:
        return Decision(events=events, reply=ThresholdMetAnswer())
    return Decision(events=events, reply=_met("SOFT_MET", soft[1], settings, soft[0]))


def _set_pool(history: PressureHistory, pool: str) -> tuple[Event, ...]:
    # Journaled only when it changes: the agent asks every 5 s.
    return () if history.eviction_pool == pool else (LoadEvictionPoolSet(pool),)


def _met(kind: str, ratio: float, settings: PressureSettings, pool: str) -> ThresholdMetAnswer:
    return ThresholdMetAnswer(
        threshold_value=ratio,
        observed_value=settings.load_threshold_met_percentage,
        threshold_operator="GREATER_THAN",
        met_type=kind,
        eviction_scope=EVICTION_SCOPE_LOAD,
        condition=Condition(),
        pool=pool,
    )


def top_eviction_pods(
    history: PressureHistory, inputs: TopInputs, settings: PressureSettings, now: float
) -> Decision[TopEvictionAnswer]:
    """``GetTopEvictionPods`` at ``now`` (the module docstring). Never raises."""

    def none(why: str = "") -> Decision[TopEvictionAnswer]:
        # The reference logs why it answers nothing; the caller logs these.
        return Decision(events=(), reply=TopEvictionAnswer(), warnings=(why,) if why else ())

    if not inputs.active_pods:
        return none("got empty active pods list")
    if not settings.enable_load_eviction:
        return none()
    pool = history.eviction_pool
    if not pool:
        return none("evictionPoolName doesn't exist, skip eviction")
    owners = inputs.pool_map.owners()
    candidates = [
        pod
        for pod in inputs.active_pods
        if _first_known_in(owners, pod.uid, pod.container_names, pool)
    ]
    if not candidates:
        return none(f"got empty candidate pods list for eviction pool {pool}")
    last = history.last_eviction_time
    if last is not None and now - last < settings.load_eviction_cool_down_s:
        return none(
            f"in eviction cool-down time, skip eviction: last eviction {now - last:g} s ago, "
            f"cool-down {settings.load_eviction_cool_down_s:g} s"
        )
    ranked = sorted(
        candidates, key=lambda pod: -history.pod_load_total(pod.uid, pod.container_names)
    )
    chosen = tuple(pod.uid for pod in ranked[: max(inputs.top_n, 0)])
    grace = settings.grace_period_s if settings.grace_period_s >= 0 else None
    return Decision(
        events=(LoadEvictionOffered(now, pool, chosen),),
        reply=TopEvictionAnswer(chosen, grace, pool),
    )


def _first_known_in(
    owners: dict[tuple[str, str], str], pod_uid: str, containers: tuple[str, ...], pool: str
) -> bool:
    """The reference's candidate filter: the first container the state knows decides, and
    an unknown container ends the scan with "no"."""
    for name in containers:
        owner = owners.get((pod_uid, name))
        if owner is None:
            return False
        if owner == pool:
            return True
    return False
