"""A deterministic NUMA metric source for tests and the demo (spec memory-balancer §4.1).

Each NUMA node has a *profile*: its read latency and read+write bandwidth. The simulator returns
exactly those numbers at every round, so a test or the demo decides what the balancer sees:

    sim = SimulatedNumaMetrics.quiet([0, 1, 2, 3])            # latency 40, bandwidth 100
    sim.put_under_pressure(0)                                  # latency 90, bandwidth 900
    sim.sample([0, 1, 2, 3])[0]  # NumaMetrics(read_latency=90.0, read_write_bandwidth=900.0)
    sim.relieve(0)                                             # back to its quiet profile

The default pressure (latency 90 over the force threshold 80, bandwidth 900 against a quiet
100: a ratio of 1, level ``high``) makes a round force-balance from that node with the
reference's default configuration (§3, §7.4, §7.6). ``make_unreadable`` simulates a collector
that lost a node (its metrics are ``MissingSample``, so the round fails, §7.1).

The demo changes profiles from its own thread while the balancer samples from another, so the
profiles are guarded by a lock; every read returns a consistent snapshot.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from policy.balance import MissingSample, NumaMetrics

__all__ = [
    "PRESSURE_BANDWIDTH",
    "PRESSURE_LATENCY",
    "QUIET_BANDWIDTH",
    "QUIET_LATENCY",
    "NumaProfile",
    "SimulatedNumaMetrics",
]

QUIET_LATENCY = 40.0
QUIET_BANDWIDTH = 100.0
PRESSURE_LATENCY = 90.0
PRESSURE_BANDWIDTH = 900.0


@dataclass(frozen=True, slots=True)
class NumaProfile:
    """What one NUMA node reports: read latency and read+write bandwidth."""

    read_latency: float
    read_write_bandwidth: float

    def __post_init__(self) -> None:
        for what, value in (
            ("read latency", self.read_latency),
            ("bandwidth", self.read_write_bandwidth),
        ):
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"simulated {what} {value!r} must be a non-negative number")


class SimulatedNumaMetrics:
    """The ``NumaMetricSource`` port on fixed, settable per-node profiles.

    Args:
        profiles: NUMA id → its quiet profile. A node without one has no metrics (missing).

    Raises:
        ValueError: a profile is not a non-negative number.
    """

    def __init__(self, profiles: Mapping[int, NumaProfile]) -> None:
        self._lock = threading.Lock()
        self._quiet = dict(profiles)
        self._current = dict(profiles)
        self._unreadable: dict[int, str] = {}

    @classmethod
    def quiet(
        cls,
        numa_ids: Iterable[int],
        read_latency: float = QUIET_LATENCY,
        read_write_bandwidth: float = QUIET_BANDWIDTH,
    ) -> SimulatedNumaMetrics:
        """Every node at the same quiet profile (no pressure with the default thresholds)."""
        return cls({n: NumaProfile(read_latency, read_write_bandwidth) for n in numa_ids})

    def set_profile(self, numa_id: int, profile: NumaProfile) -> None:
        """Report ``profile`` for the node from now on (its quiet profile is unchanged)."""
        with self._lock:
            self._current[numa_id] = profile

    def put_under_pressure(
        self,
        numa_id: int,
        read_latency: float = PRESSURE_LATENCY,
        read_write_bandwidth: float = PRESSURE_BANDWIDTH,
    ) -> None:
        """Raise the node's latency and bandwidth (defaults: a force balance at level high).

        Raises:
            KeyError: the node has no profile.
        """
        if numa_id not in self._quiet:
            raise KeyError(f"NUMA node {numa_id} is not simulated (have {sorted(self._quiet)})")
        self.set_profile(numa_id, NumaProfile(read_latency, read_write_bandwidth))

    def relieve(self, numa_id: int) -> None:
        """Back to the node's quiet profile, readable again."""
        with self._lock:
            self._unreadable.pop(numa_id, None)
            if numa_id in self._quiet:
                self._current[numa_id] = self._quiet[numa_id]

    def make_unreadable(self, numa_id: int, reason: str = "simulated collector failure") -> None:
        """The node's metrics are missing, with ``reason``, until ``relieve``."""
        with self._lock:
            self._unreadable[numa_id] = reason

    def profiles(self) -> dict[int, NumaProfile]:
        """What each node reports now."""
        with self._lock:
            return dict(self._current)

    def sample(self, numa_ids: Sequence[int]) -> Mapping[int, NumaMetrics]:
        """Every requested node's current profile (``NumaMetricSource``)."""
        with self._lock:
            current = dict(self._current)
            unreadable = dict(self._unreadable)
        out: dict[int, NumaMetrics] = {}
        for numa in numa_ids:
            if numa in unreadable:
                missing = MissingSample(unreadable[numa])
                out[numa] = NumaMetrics(missing, missing)
            elif numa not in current:
                missing = MissingSample(f"NUMA node {numa} is not simulated")
                out[numa] = NumaMetrics(missing, missing)
            else:
                profile = current[numa]
                out[numa] = NumaMetrics(profile.read_latency, profile.read_write_bandwidth)
        return out
