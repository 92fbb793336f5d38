"""The NUMA metric source ``--numa-metrics-source simulated[:pressure=N]`` selects: fixed
per-node figures, for trying the memory balancer on a node without a collector (spec
memory-balancer §4.1).

Each NUMA node has a *profile*, its read latency and read+write bandwidth, and reports exactly
that at every round. Quiet is latency 40 and bandwidth 100; pressure is latency 90 over the
force threshold 80 and bandwidth 900 against a quiet 100 (a ratio of 1, level ``high``), so a
round force-balances from that node with the reference's default configuration (§3, §7.4,
§7.6). The daemon raises the latency of the ``pressure=N`` nodes above the threshold *in force*
instead (vendor-aware, ``qrmd.balancer.subsystem``).

The figures never change while the daemon runs: nothing outside the process can reach them.
So each node's ``NumaMetrics`` is made at its first read and answered again at every round
after (it is immutable), instead of one new value per node per round; and the answer to a
round's request, the same nodes every round, is made once too and handed out as a copy (a
plain dict: copying one costs a tenth of copying a read-only view, which the round does).
The settable stand-in that tests, benchmarks and simulations drive from their own thread
(``put_under_pressure``, ``relieve``, ``make_unreadable``) is
``qrmd.sim.host.metrics.SimulatedNumaMetrics``; it answers through this source, so both report
a node the same way. The daemon never imports ``qrmd.sim``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from policy.balance import MissingSample, NumaMetrics

__all__ = [
    "PRESSURE_BANDWIDTH",
    "PRESSURE_LATENCY",
    "QUIET_BANDWIDTH",
    "QUIET_LATENCY",
    "FixedNumaMetrics",
    "NumaProfile",
    "quiet_profiles",
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


def quiet_profiles(
    numa_ids: Iterable[int],
    read_latency: float = QUIET_LATENCY,
    read_write_bandwidth: float = QUIET_BANDWIDTH,
) -> dict[int, NumaProfile]:
    """Every node at the same quiet profile (no pressure with the default thresholds)."""
    return {n: NumaProfile(read_latency, read_write_bandwidth) for n in numa_ids}


class FixedNumaMetrics:
    """The ``NumaMetricSource`` port on per-node profiles that stay as built.

    Args:
        profiles: NUMA id → its profile. A node without one has no metrics (missing).
        unreadable: NUMA id → why its metrics are missing (a collector that lost the node).
    """

    def __init__(
        self, profiles: Mapping[int, NumaProfile], unreadable: Mapping[int, str] | None = None
    ) -> None:
        self._profiles = dict(profiles)
        self._unreadable = dict(unreadable or {})
        # What each node read so far reports, kept: the figures never change (module docstring).
        self._samples: dict[int, NumaMetrics] = {}
        # The last request's nodes in order and the answer to it (module docstring).
        self._answer: tuple[tuple[int, ...], dict[int, NumaMetrics]] = ((), {})

    @classmethod
    def quiet(
        cls,
        numa_ids: Iterable[int],
        read_latency: float = QUIET_LATENCY,
        read_write_bandwidth: float = QUIET_BANDWIDTH,
    ) -> FixedNumaMetrics:
        """Every node at the same quiet profile (no pressure with the default thresholds)."""
        return cls(quiet_profiles(numa_ids, read_latency, read_write_bandwidth))

    def under_pressure(
        self,
        numa_ids: Iterable[int],
        read_latency: float = PRESSURE_LATENCY,
        read_write_bandwidth: float = PRESSURE_BANDWIDTH,
    ) -> FixedNumaMetrics:
        """The same source with ``numa_ids`` at a raised latency and bandwidth.

        Raises:
            KeyError: a node has no profile.
        """
        profiles = dict(self._profiles)
        for numa in numa_ids:
            if numa not in profiles:
                raise KeyError(f"NUMA node {numa} is not simulated (have {sorted(profiles)})")
            profiles[numa] = NumaProfile(read_latency, read_write_bandwidth)
        return FixedNumaMetrics(profiles, self._unreadable)

    def profiles(self) -> dict[int, NumaProfile]:
        """What each node reports."""
        return dict(self._profiles)

    def sample(self, numa_ids: Sequence[int]) -> Mapping[int, NumaMetrics]:
        """Every requested node's profile (``NumaMetricSource``), a copy the caller may keep."""
        request = tuple(numa_ids)
        asked, answer = self._answer
        if request != asked:
            answer = self._sampled(request)
            self._answer = (request, answer)
        return dict(answer)

    def _sampled(self, numa_ids: Sequence[int]) -> dict[int, NumaMetrics]:
        """Each node's sample, made at its first read."""
        known = self._samples
        out: dict[int, NumaMetrics] = {}
        for numa in numa_ids:
            sampled = known.get(numa)
            if sampled is None:
                sampled = known[numa] = self._sample_of(numa)
            out[numa] = sampled
        return out

    def _sample_of(self, numa: int) -> NumaMetrics:
        """What the node reports: its profile, or why it has none."""
        if numa in self._unreadable:
            missing = MissingSample(self._unreadable[numa])
            return NumaMetrics(missing, missing)
        if numa not in self._profiles:
            missing = MissingSample(f"NUMA node {numa} is not simulated")
            return NumaMetrics(missing, missing)
        profile = self._profiles[numa]
        return NumaMetrics(profile.read_latency, profile.read_write_bandwidth)
