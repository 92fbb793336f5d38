"""The CPU pressure eviction plugins' memory: load rings, the eviction pool, tolerance timers.

This reproduces what the reference keeps in its two plugin objects
(``cpueviction/strategy/pressure_load.go``, ``pressure_load_metric.go`` and
``pressure_suppression.go`` at katalyst-core v0.5.3):

* **load rings** (``MetricRing``): per pool, the last ``max_len`` pool samples (time, summed
  container load, the bounds it was judged by); per container, its own load samples, summed
  to rank eviction candidates. A ring keeps the size it was created with: a later change of
  ``--eviction-load-metric-ring-size`` applies to rings created after it, as in the
  reference (``pushMetric`` creates a ring once). A push with the same time as the newest
  sample is ignored (``MetricRing.Push``).
* **the eviction pool**: the pool a HARD_MET ``ThresholdMet`` named, read and cleared by the
  next ``GetTopEvictionPods`` (``evictionPoolName``; ``""`` is "none", the reference's
  ``FakedContainerName``).
* **the last eviction time** that starts the load plugin's cool-down (``lastEvictionTime``).
* **tolerance timers**: per reclaimed pod (``namespace/name``), since when the reclaim pool's
  suppression rate has exceeded the pod's tolerance (``lastToleranceTime``).

The values are immutable; each change is a new value. The reference's rings are slots with a
moving index; a tuple of the newest ``max_len`` samples, oldest first, is the same sequence.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import TypeVar

import immutables

from policy.errors import StateError

__all__ = [
    "ContainerKey",
    "LoadSample",
    "MetricRing",
    "PressureHistory",
]

#: A container's ring key: (pod UID, container name). A pool's ring is ``(pool name, "")``,
#: as the reference keys its pool entries by pool name and the faked container name ``""``.
ContainerKey = tuple[str, str]

K = TypeVar("K")


@dataclass(frozen=True, slots=True)
class LoadSample:
    """One sample of a ring (``MetricSnapshot``).

    Attributes:
        time: when it was collected, seconds since the epoch.
        value: the load (a pool's: the sum of its containers' loads).
        upper_bound: above it, the sample is over the hard threshold (pool samples only).
        lower_bound: above it, over the soft threshold; ``0`` means "not judged" (container
            samples, and ``Count`` skips a sample whose lower bound is not positive).
    """

    time: float
    value: float
    upper_bound: float = 0.0
    lower_bound: float = 0.0

    @property
    def is_soft_over(self) -> bool:
        """Counted as over the soft threshold (``MetricRing.Count``)."""
        return self.lower_bound > 0 and self.value > self.lower_bound

    @property
    def is_hard_over(self) -> bool:
        """Counted as over the hard threshold; only a judged sample is (``Count``)."""
        return self.lower_bound > 0 and self.value > self.upper_bound


@dataclass(frozen=True, slots=True)
class MetricRing:
    """The newest ``max_len`` samples, oldest first (``MetricRing``)."""

    max_len: int
    samples: tuple[LoadSample, ...] = ()

    def __post_init__(self) -> None:
        # The reference's ring of size 0 divides by zero on its first push.
        if self.max_len < 1:
            raise StateError(f"a metric ring holds at least 1 sample, not {self.max_len}")
        if len(self.samples) > self.max_len:
            raise StateError(
                f"a metric ring of size {self.max_len} cannot hold {len(self.samples)} samples"
            )

    def push(self, sample: LoadSample) -> MetricRing:
        """The ring with ``sample`` as its newest, the oldest dropped when full; unchanged when
        the newest sample has the same time (``Push``: one collection is pushed once)."""
        if self.samples and self.samples[-1].time == sample.time:
            return self
        return replace(self, samples=(*self.samples, sample)[-self.max_len :])

    def total(self) -> float:
        """The sum of the samples' values (``Sum``)."""
        return sum(sample.value for sample in self.samples)

    def over_counts(self) -> tuple[int, int]:
        """``(soft over, hard over)`` sample counts (``Count``)."""
        soft = sum(1 for sample in self.samples if sample.is_soft_over)
        hard = sum(1 for sample in self.samples if sample.is_hard_over)
        return soft, hard

    @property
    def latest(self) -> LoadSample | None:
        """The newest sample, or None for an empty ring."""
        return self.samples[-1] if self.samples else None


@dataclass(frozen=True, slots=True)
class PressureHistory:
    """The ``cpu_pressure`` state section: everything both plugins remember between calls.

    Attributes:
        pool_rings: pool name → its load ring.
        container_rings: (pod UID, container) → that container's load ring.
        eviction_pool: the pool the last HARD_MET named, ``""`` for none.
        last_eviction_time: when the load plugin last offered candidates, or None (never).
        tolerance_since: ``namespace/name`` of a reclaimed pod → since when it has been over
            its suppression tolerance.
    """

    pool_rings: immutables.Map[str, MetricRing] = field(default_factory=immutables.Map)
    container_rings: immutables.Map[ContainerKey, MetricRing] = field(
        default_factory=immutables.Map
    )
    eviction_pool: str = ""
    last_eviction_time: float | None = None
    tolerance_since: immutables.Map[str, float] = field(default_factory=immutables.Map)

    # -- load rings ---------------------------------------------------------------------------

    def expired_rings(self, live: Iterable[ContainerKey]) -> tuple[ContainerKey, ...]:
        """The rings of entries no longer in the CPU state (``clearExpiredMetricsHistory``),
        pools as ``(pool, "")``, in order.

        Args:
            live: every (entry, container) the CPU state holds now, pools as ``(pool, "")``.
        """
        alive = frozenset(live)
        keys = [*self.container_rings, *((pool, "") for pool in self.pool_rings)]
        return tuple(sorted(key for key in set(keys) if key not in alive))

    def with_load_samples(
        self,
        ring_size: int,
        expired: Iterable[ContainerKey],
        containers: Mapping[ContainerKey, LoadSample],
        pools: Mapping[str, LoadSample],
    ) -> PressureHistory:
        """One collection (``collectMetrics``): drop the expired rings, then push.

        Args:
            ring_size: the size of a ring created now.
            expired: the rings to drop (``expired_rings``), pools as ``(pool, "")``.
            containers: each sampled container's load.
            pools: each sampled pool's summed load with its bounds.

        Raises:
            StateError: ``ring_size`` is below 1.
        """
        gone = frozenset(expired)
        container_rings = _prune(self.container_rings, gone)
        pool_rings = _prune(self.pool_rings, frozenset(e for e, c in gone if c == ""))
        for key, sample in containers.items():
            container_rings = container_rings.set(
                key, container_rings.get(key, MetricRing(ring_size)).push(sample)
            )
        for pool, sample in pools.items():
            ring = pool_rings.get(pool, MetricRing(ring_size))
            pool_rings = pool_rings.set(pool, ring.push(sample))
        return replace(self, pool_rings=pool_rings, container_rings=container_rings)

    def without_load_history(self) -> PressureHistory:
        """Every ring dropped (load eviction disabled, or a restart: the reference keeps its
        rings in memory only). The eviction pool and the cool-down are kept, as they are."""
        return replace(self, pool_rings=immutables.Map(), container_rings=immutables.Map())

    def pod_load_total(self, pod_uid: str, containers: Iterable[str]) -> float:
        """The summed ring values of a pod's containers that have a ring
        (``getMetricHistorySumForPod``)."""
        total = 0.0
        for name in containers:
            ring = self.container_rings.get((pod_uid, name))
            if ring is not None:
                total += ring.total()
        return total

    # -- the eviction pool, the cool-down, the tolerance timers ---------------------------------

    def with_eviction_pool(self, pool: str) -> PressureHistory:
        """The eviction pool set (a pool name) or cleared (``""``)."""
        return replace(self, eviction_pool=pool)

    def with_eviction_offered(self, now: float) -> PressureHistory:
        """Candidates were offered at ``now``: the cool-down starts and the pool is cleared."""
        return replace(self, last_eviction_time=now, eviction_pool="")

    def with_tolerance_since(self, since: Mapping[str, float]) -> PressureHistory:
        """The tolerance timers replaced by ``since``."""
        return replace(self, tolerance_since=immutables.Map(since))


def _prune(
    rings: immutables.Map[K, MetricRing], expired: frozenset[K]
) -> immutables.Map[K, MetricRing]:
    gone = [key for key in rings if key in expired]
    if not gone:
        return rings
    mutable = rings.mutate()
    for key in gone:
        del mutable[key]
    return mutable.finish()
