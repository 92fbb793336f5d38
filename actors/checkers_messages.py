"""The Checkers' messages and values: a tick for one handler, a fetch done, the view of what the
handlers found, their settings, and the reference's handler names (spec cpu-policy §12.1;
``actors.checkers`` serves them).

Tickers *tell* ``CheckerTick`` and the pod list publisher ``PodListFetched``; ``GetCheckersView``
is asked (tests, metrics). Everything here is a frozen value, shared between threads.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from policy.cpu.cpuset_check import CpusetVerdict
from policy.cpu.residual_check import ResidualEvidence

__all__ = [
    "CHECK_CPUSET",
    "CLEAR_RESIDUAL_STATE",
    "HEARTBEAT",
    "SYNC_CPU_IDLE",
    "CheckerSettings",
    "CheckerTick",
    "CheckersView",
    "GetCheckersView",
    "PodListFetched",
]

#: The reference's handler names (§12.1 step 2) and the heartbeat (step 1).
CLEAR_RESIDUAL_STATE = "qrm_cpu_plugin_dynamic_clear_residual_state"
CHECK_CPUSET = "qrm_cpu_plugin_dynamic_check_cpuset"
SYNC_CPU_IDLE = "qrm_cpu_plugin_dynamic_sync_cpu_idle"
HEARTBEAT = "heartbeat"


@dataclass(frozen=True, slots=True)
class CheckerTick:
    """Run one handler at ``now`` (wall time, seconds since the epoch)."""

    handler: str
    now: float


@dataclass(frozen=True, slots=True)
class PodListFetched:
    """The publisher has just fetched the pod list (well or not): run the pod handlers due."""

    now: float


@dataclass(frozen=True, slots=True)
class GetCheckersView:
    """Ask for the ``CheckersView`` (tests, status pages)."""


@dataclass(frozen=True, slots=True)
class CheckerSettings:
    """What the handlers are configured with.

    Attributes:
        residual_sightings: consecutive sightings before a pod's state goes (§12.4).
        residual_period_s: clearResidualState's period.
        cpuset_period_s: checkCPUSet's period.
        sync_cpu_idle: whether syncCPUIdle runs.
        enable_cpu_idle: the value it writes.
        reclaim_cgroup_path: where it writes.
    """

    residual_sightings: int = 10
    residual_period_s: float = 30.0
    cpuset_period_s: float = 10.0
    sync_cpu_idle: bool = False
    enable_cpu_idle: bool = False
    reclaim_cgroup_path: str = "/kubepods/besteffort"


@dataclass(frozen=True, slots=True)
class CheckersView:
    """What the handlers last found (immutable; read by the metrics from another thread).

    Attributes:
        residual: the residual evidence after the last round.
        residual_removed: pods removed as residual since start.
        cpuset: the last checkCPUSet verdict, or None before the first.
        heartbeat_at: wall time of the last heartbeat.
        errors: handler → its last error (None: Ready).
    """

    residual: ResidualEvidence = field(default_factory=ResidualEvidence)
    residual_removed: int = 0
    cpuset: CpusetVerdict | None = None
    heartbeat_at: float | None = None
    errors: tuple[tuple[str, str | None], ...] = ()
