"""Where a balancer stands in its machines (``machines.balance_round``; memory-balancer §6.3).

The balance section stores records, not machine states: a record's state in the round machine
follows from its status and its two flags, and the windows machine's state from the last
emitted record's detect time and the time now. Deriving both from the durable section is how
the machines resume after a restart, with nothing extra to journal.
"""

from __future__ import annotations

from machines import balance_round as machine
from policy.balance.numas import in_ping_pong_window, nanos
from policy.balance.record import BalanceInfo
from policy.balance.round import in_cool_down

__all__ = ["balancer_window", "has_pods_to_move", "record_machine_state"]


def balancer_window(last: BalanceInfo | None, now: float) -> str:
    """The windows machine's state at ``now`` (§6.3): emitting ``last``'s advice put it in
    the cool-down; one ``tick`` at ``now`` moves it on as far as the time passed allows.

    The guards are the planner's own rules (``in_cool_down``, ``in_ping_pong_window``), so the
    machine cannot drift from what the round decides."""
    if last is None:
        return machine.OPEN
    guards = {
        "ping_pong_window_passed": not in_ping_pong_window(last, nanos(now)),
        "balance_interval_passed": not in_cool_down(last, now),
    }
    step = machine.windows_lifecycle().step(machine.COOLING_DOWN, "tick", guards)
    return machine.COOLING_DOWN if step is None else step.dest


def has_pods_to_move(record: BalanceInfo) -> bool:
    """The round machine's ``has_pods_to_move`` guard: destinations and balance pods, or a pod
    to evict (§7.11)."""
    return bool(record.dest_numas and record.balance_pods) or bool(record.evict_pods)


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
    return machine.PREPARE_SUCCESS if has_pods_to_move(record) else machine.PREPARE_FAILED
