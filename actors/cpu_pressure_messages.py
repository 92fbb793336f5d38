"""Commands the CPU pressure actor serves (spec cpu-policy §12.7; katalyst-core v0.5.3
``cpueviction``; DESIGN.md "Actors and messages").

The ticker tells ``CollectLoad`` every ``--eviction-load-sync-period`` (30 s by default; the
load plugin's ``collectMetrics`` loop). The eviction-plugin gRPC servers of
``cpu-pressure-load-plugin`` and ``cpu-pressure-suppression-plugin`` convert each RPC to one
command and ``ask`` the actor with the RPC's remaining deadline; the replies are the policy's
values (``policy.cpu.pressure.answers``), which the wire layer turns into protobuf:

===================================  ========================================================
command                              reply
===================================  ========================================================
``CollectLoad(now)``                 ``CollectReport`` (never raises: a tick is told)
``LoadThresholdMet()``               ``ThresholdMetAnswer`` (load plugin)
``LoadTopEvictionPods(pods, top_n)`` ``TopEvictionAnswer`` (load plugin)
``SuppressionEvictPods(pods)``       ``EvictPodsAnswer`` (suppression plugin)
``GetPressureState()``               ``PressureView`` (health, metrics, tests)
===================================  ========================================================

The RPCs each plugin answers with nothing (the load plugin's ``GetEvictPods``, the
suppression plugin's ``ThresholdMet`` and ``GetTopEvictionPods``, both ``GetToken``) are
answered by the wire layer without asking, as the reference's plugins return empty answers.

Every command is served on the actor's one mailbox, so the rings, the eviction pool and the
timers are read and written in one order with no lock (the reference guards them with a
mutex and a ``sync.Map``). A decision's events are committed *before* it is answered; if the
commit fails the command raises ``PressureUnavailable``, nothing is answered from it, and the
agent asks again at its next poll.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from actors.store_messages import CommitRefused
from policy.cpu.pressure import ActivePod
from policy.state.pressure import PressureHistory

__all__ = [
    "CollectLoad",
    "GetPressureState",
    "LoadThresholdMet",
    "LoadTopEvictionPods",
    "PressureCommand",
    "PressureUnavailable",
    "PressureView",
    "SuppressionEvictPods",
]


class PressureUnavailable(CommitRefused):
    """A decision's events could not be made durable (or the state could not be read): nothing
    was answered from it. A ``CommitRefused``, so the wire layer answers UNAVAILABLE."""


@dataclass(frozen=True, slots=True)
class CollectLoad:
    """One load collection at ``now`` (``collectMetrics``)."""

    now: float


@dataclass(frozen=True, slots=True)
class LoadThresholdMet:
    """``ThresholdMet`` of ``cpu-pressure-load-plugin``."""


@dataclass(frozen=True, slots=True)
class LoadTopEvictionPods:
    """``GetTopEvictionPods`` of ``cpu-pressure-load-plugin``: the request's pods and topN."""

    active_pods: tuple[ActivePod, ...]
    top_n: int


@dataclass(frozen=True, slots=True)
class SuppressionEvictPods:
    """``GetEvictPods`` of ``cpu-pressure-suppression-plugin``: the request's pods."""

    active_pods: tuple[ActivePod, ...]


@dataclass(frozen=True, slots=True)
class GetPressureState:
    """Read the section and the counters."""


#: Any command the actor serves.
PressureCommand = (
    CollectLoad | LoadThresholdMet | LoadTopEvictionPods | SuppressionEvictPods | GetPressureState
)


@dataclass(frozen=True, slots=True)
class PressureView:
    """The durable ``cpu_pressure`` section, its snapshot's sequence and the counters.

    Attributes:
        history: the section.
        seq: the sequence number of the snapshot it is from.
        counters: plain counters by name (``collections_total``, ``threshold_met_total``, …).
        threshold_met: ``load_pressure_threshold_met_count`` by (pool, threshold type).
    """

    history: PressureHistory
    seq: int
    counters: Mapping[str, int] = field(default_factory=dict)
    threshold_met: Mapping[tuple[str, str], int] = field(default_factory=dict)
