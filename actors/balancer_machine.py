"""Where a balancer stands in its machines (``machines.balance_round``; memory-balancer §6.3).

The balance section stores records, not machine states: a record's state in the round machine
follows from its status and its two flags, and the windows machine's state from the last
emitted record's detect time and the time now. Deriving both from the durable state is how
the machines resume after a restart, with nothing extra to journal.

``BalancerPorts`` bundles what the MemoryBalancer reads and whom it hands advices to.
"""

from __future__ import annotations

from dataclasses import dataclass

from actors.balancer_inputs import PodsProvider
from actors.ports.balancer import ContainerMemoryReader, NumaDistanceSource, NumaMetricSource
from actors.ports.migration import AdviceExecutor
from machines import balance_round as machine
from policy.balance import BalanceInfo, in_cool_down
from policy.balance.gojson import to_nanos
from policy.balance.numas import in_ping_pong_window

__all__ = ["BalancerPorts", "balancer_window", "record_machine_state"]


@dataclass(frozen=True, slots=True)
class BalancerPorts:
    """What the balancer reads and whom it hands advices to.

    Attributes:
        metrics: per-NUMA latency and bandwidth (§4.1).
        distances: the NUMA distance lists, read once at start (§4.4).
        memory: per-container anonymous memory per NUMA (§4.2).
        pods: the pods in pools, from the StateStore's CPU snapshot (§4.5).
        executor: carries out emitted advices (§11); None: advices are only journaled.
    """

    metrics: NumaMetricSource
    distances: NumaDistanceSource
    memory: ContainerMemoryReader
    pods: PodsProvider
    executor: AdviceExecutor | None = None


def balancer_window(last: BalanceInfo | None, now: float) -> str:
    """The windows machine's state at ``now`` (§6.3): emitting ``last``'s advice put it in
    the cool-down; one ``tick`` at ``now`` moves it on as far as the time passed allows.

    The guards are the planner's own rules (``in_cool_down``, ``in_ping_pong_window``), so the
    machine cannot drift from what the round decides."""
    if last is None:
        return machine.OPEN
    guards = {
        "ping_pong_window_passed": not in_ping_pong_window(last, to_nanos(now)),
        "balance_interval_passed": not in_cool_down(last, now),
    }
    step = machine.windows_lifecycle().step(machine.COOLING_DOWN, "tick", guards)
    return machine.COOLING_DOWN if step is None else step.dest


def record_machine_state(record: BalanceInfo | None) -> str | None:
    """The round-machine state of a stored record (None without one), from its status and
    flags: this is how the machine resumes from a state replayed from the journal."""
    if record is None:
        return None
    if record.balance_executed and record.evict_executed:
        return machine.ADVICE_AND_EVICTION_TAKEN
    if record.balance_executed:
        return machine.ADVICE_TAKEN
    if record.evict_executed:
        return machine.EVICTION_TAKEN
    if not record.need_balance:
        return machine.NO_BALANCE
    has_pods = bool(record.dest_numas and record.balance_pods) or bool(record.evict_pods)
    return machine.PREPARE_SUCCESS if has_pods else machine.PREPARE_FAILED
