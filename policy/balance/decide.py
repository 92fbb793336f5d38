"""The memory balancer's decisions: one pure function per step, each returning a ``Decision``
(memory-balancer §1.1, §6.2, §8, §9.1; DESIGN.md "Every decision has one shape").

The MemoryBalancer calls these with its durable balance section and the inputs it gathered
through its ports; it commits ``decision.events``, carries out ``decision.effects`` and
answers with ``decision.reply``. These functions own the round machine
(``machines.balance_round``): each fires the machine's trigger from the state the durable
section is in (``policy.balance.lifecycle``), with guards answered by the planner's own rules,
and builds the events the fired transition names. Nothing here reads a clock, a file or a
socket, and nothing mutates the section passed in.

One tick (§1.1) is a round, then the ``GetAdvices`` step:

* ``skip_round(section, now)``: the machine's ``start`` before anything is read. Within the
  cool-down it goes to ``skipped`` and this is the round's decision: nothing computed, stored
  or measured (§6.2 step 2). Otherwise None: the round reads its inputs.
* ``round_reads_pods(section, inputs)``: whether a round on the metrics alone found pressure
  to act on, so that the pods (every pod's cgroup: the costly read) can change its outcome.
  The reference, too, lists pods only from step 7 on (§7). ``round_without_pods`` answers
  the same question with the round's decision when the pods cannot change it, planned once.
* ``balance_round(section, inputs)``: ``start`` then ``conclude`` (``BalanceRoundRecorded``,
  the record stored as ``current``) or ``fail`` (``BalanceRoundFailed``, ``current`` kept,
  O8). Each event carries the round's ``RoundInputs.to_json()``: the round can be re-run from
  the journal alone (``policy.balance.rerun``).
* ``unreadable_round(section, now, error)``: ``fail`` for a round whose inputs could not be
  read (a port failed, or gave a value the inputs refuse): journaled with its time and reason.
* ``get_advices(section, request)``: ``take_advice``: the current record's advice, at most once
  (§8). From the tick, the effect is the migration qrmd's executor carries out (§11).

And the eviction plugin's poll: ``get_evict_pods(section, request)``: ``take_eviction``: the
current record's offers, at most once, consumed even when no pod matched (§9.1, O10).

Every "taken" event applies through the section's one update (``policy.balance.section``), so
what a decision answers and what the journal replays cannot differ.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

from machines import balance_round as machine
from machines.lifecycle import Step
from policy.balance.advice import MemoryAdvice, advice_for
from policy.balance.events import (
    BalanceAdviceTaken,
    BalanceEvent,
    BalanceEvictionTaken,
    BalanceRoundFailed,
    BalanceRoundRecorded,
)
from policy.balance.eviction import EvictOffer
from policy.balance.inputs import RoundInputs
from policy.balance.lifecycle import balancer_window, has_pods_to_move, record_machine_state
from policy.balance.record import BalanceInfo, BalanceStatus
from policy.balance.round import RoundOutcome, RoundResult, in_cool_down, run_round
from policy.balance.section import BalancerState, take_eviction
from policy.decision import Decision, Effect

__all__ = [
    "AdviceRequest",
    "EvictionRequest",
    "MigrateMemory",
    "RoundReply",
    "balance_round",
    "get_advices",
    "get_evict_pods",
    "round_reads_pods",
    "round_without_pods",
    "skip_round",
    "unreadable_round",
]

#: The reason of a round whose inputs could not be read starts with this (§7.12).
UNREADABLE_INPUTS = "cannot read the round's inputs"


@dataclass(frozen=True, slots=True)
class RoundReply:
    """What one round decided.

    Attributes:
        result: skipped (cool-down), failed (record discarded) or stored (§6.2).
        record: the computed record, the failed one too (for the log and the metric); None
            when skipped.
        window: the windows machine's state when the round began (``open``,
            ``cooling_down`` or ``ping_pong_window``, §6.3).
        state: the round machine's state the round ended in (``skipped``, ``discarded``,
            ``no_balance``, ``prepare_failed`` or ``prepare_success``).
    """

    result: RoundResult
    record: BalanceInfo | None
    window: str
    state: str

    @property
    def error(self) -> str:
        """A failed round's reason; empty otherwise."""
        if self.result is RoundResult.FAILED and self.record is not None:
            return self.record.failed_reason
        return ""


@dataclass(frozen=True, slots=True)
class MigrateMemory(Effect):
    """Carry out an emitted advice: migrate the named containers' memory (§11)."""

    advice: MemoryAdvice


@dataclass(frozen=True, slots=True)
class AdviceRequest:
    """One ``GetAdvices`` step.

    Attributes:
        now: the time of the step.
        from_tick: the advisor loop's own step (§1.1), whose advice qrmd's executor carries
            out; False: an external ``GetAdvices`` caller is handed the advice instead.
    """

    now: float
    from_tick: bool

    def to_cause(self) -> dict[str, Any]:
        """The journal cause's inputs: ``{"command": "Tick"|"GetAdvices", "now"}``."""
        return {"command": "Tick" if self.from_tick else "GetAdvices", "now": self.now}


@dataclass(frozen=True, slots=True)
class EvictionRequest:
    """One ``GetEvictPods`` poll: the request's active pod UIDs, in request order (§9.1)."""

    active_pod_uids: tuple[str, ...]
    now: float

    def to_cause(self) -> dict[str, Any]:
        """The journal cause's inputs: ``{"command": "GetEvictPods", "now", "active_pod_uids"}``."""
        return {
            "command": "GetEvictPods",
            "now": self.now,
            "active_pod_uids": list(self.active_pod_uids),
        }


def skip_round(section: BalancerState, now: float) -> Decision[RoundReply] | None:
    """The round at ``now`` if it is decided before anything is read (§6.2 step 2).

    Args:
        section: the durable balance section.
        now: the round's time.

    Returns:
        Within the cool-down after the last emitted advice, the skipped round's decision (no
        events); otherwise None: the machine's ``start`` leads to ``preparing`` and the round
        reads its inputs.
    """
    start = _start(in_cool_down(section.last, now))
    if start.dest != machine.SKIPPED:
        return None
    return _skipped(section, now, start)


def round_reads_pods(section: BalancerState, inputs: RoundInputs) -> bool:
    """Whether the round must read the pods before it is decided.

    A round without pressure after regulation (§7.4, §7.7), skipped or failed on its metrics
    stops before it lists a pod, so its outcome does not depend on them: its journaled inputs
    leave them out and still re-run to the same record.

    Args:
        section: the durable balance section.
        inputs: the round's inputs without pods.

    Raises:
        BalanceError: ``inputs.last`` is not the section's last emitted round.
    """
    _, outcome = run_round(section, inputs)
    return _reads_pods(outcome)


def round_without_pods(section: BalancerState, inputs: RoundInputs) -> Decision[RoundReply] | None:
    """The round decided on its metrics alone, when the pods cannot change it; None when it
    must read them (``round_reads_pods``).

    One plan for both answers: a quiet round (most rounds) is planned once, and the decision
    is ``balance_round(section, inputs)``'s, the one a re-run of its journaled inputs makes.

    Raises:
        BalanceError: ``inputs.last`` is not the section's last emitted round.
    """
    _, outcome = run_round(section, inputs)
    if _reads_pods(outcome):
        return None
    return _round_decision(section, inputs, outcome)


def _reads_pods(outcome: RoundOutcome) -> bool:
    return outcome.record is not None and outcome.record.need_balance


def balance_round(section: BalancerState, inputs: RoundInputs) -> Decision[RoundReply]:
    """One balance round (``Reconcile``, §6.2) on everything it read.

    Args:
        section: the durable balance section.
        inputs: the round's inputs; ``inputs.last`` must be ``section.last`` and
            ``inputs.now`` is the round's time.

    Returns:
        Skipped within the cool-down (no events); a failed round's ``BalanceRoundFailed``; or
        the stored record's ``BalanceRoundRecorded``. The reply names the machine state the
        round ended in.

    Raises:
        BalanceError: ``inputs.last`` is not the section's last emitted round, so the round a
            journal would record is not the round that ran.
    """
    _, outcome = run_round(section, inputs)
    return _round_decision(section, inputs, outcome)


def _round_decision(
    section: BalancerState, inputs: RoundInputs, outcome: RoundOutcome
) -> Decision[RoundReply]:
    """``balance_round``'s decision from the planner's ``outcome`` on ``inputs``."""
    record = outcome.record
    # The planner skips by the cool-down rule and then has no record; that answers the
    # machine's ``in_cool_down`` guard, so the two cannot disagree.
    start = _start(record is None)
    if record is None:
        return _skipped(section, inputs.now, start)
    window = balancer_window(section.last, inputs.now)
    if outcome.result is RoundResult.FAILED:
        step = _fire(machine.PREPARING, "fail")
        failed = BalanceRoundFailed(inputs.plain(), outcome.error)
        reply = RoundReply(outcome.result, record, window, step.dest)
        return Decision(_events(step, failed), reply)
    step = _conclude(record.need_balance, has_pods_to_move(record))
    recorded = BalanceRoundRecorded(record, inputs.plain())
    return Decision(_events(step, recorded), RoundReply(outcome.result, record, window, step.dest))


def unreadable_round(section: BalancerState, now: float, error: str) -> Decision[RoundReply]:
    """A round whose inputs could not be read fails (§7.12), as a missing metric does.

    Args:
        section: the durable balance section.
        now: the round's time.
        error: why the inputs could not be read.

    Returns:
        ``BalanceRoundFailed`` with the time as its inputs (that is all the round read), and
        a ``prepareFailed`` record that holds nothing but the reason, measured like any failed
        round (§12) and never stored (O8).
    """
    reason = f"{UNREADABLE_INPUTS}: {error}"
    record = BalanceInfo(now, status=BalanceStatus.PREPARE_FAILED, failed_reason=reason)
    step = _fire(machine.PREPARING, "fail")
    window = balancer_window(section.last, now)
    reply = RoundReply(RoundResult.FAILED, record, window, step.dest)
    return Decision(_events(step, BalanceRoundFailed({"now": now}, reason)), reply)


def get_advices(section: BalancerState, request: AdviceRequest) -> Decision[MemoryAdvice | None]:
    """``GetAdvices`` (§8): the current record's advice, at most once.

    Args:
        section: the durable balance section.
        request: when, and whether qrmd's executor carries the advice out (the tick's step).

    Returns:
        With an advice not yet taken: ``BalanceAdviceTaken`` (the record is marked
        ``balanceExecuted`` and becomes ``last``, starting the cool-down), the advice as the
        reply and, from the tick, ``MigrateMemory`` as the effect. Otherwise nothing.
    """
    current = section.current
    source = record_machine_state(current)
    if current is None or source is None or not _may("take_advice", source):
        return Decision((), None)
    advice = advice_for(current)
    step = machine.round_lifecycle().step(source, "take_advice", {"has_advice": advice is not None})
    if step is None or advice is None:
        return Decision((), None)
    effects = (MigrateMemory(advice),) if request.from_tick else ()
    events = _events(step, BalanceAdviceTaken(current.detect_time))
    return Decision(events, advice, effects=effects)


def get_evict_pods(
    section: BalancerState, request: EvictionRequest
) -> Decision[tuple[EvictOffer, ...]]:
    """``GetEvictPods`` (§9.1): the current record's eviction offers, at most once.

    Args:
        section: the durable balance section.
        request: the request's active pods.

    Returns:
        With a current record whose offer was not taken: ``BalanceEvictionTaken`` whether or
        not a pod matched (O10), and the offers (``offer.active_index`` is the position in
        ``active_pod_uids`` of the pod to return). Otherwise nothing.
    """
    current = section.current
    source = record_machine_state(current)
    if current is None or source is None or not _may("take_eviction", source):
        return Decision((), ())
    step = _fire(source, "take_eviction")
    _, offers = take_eviction(section, request.active_pod_uids)
    return Decision(_events(step, BalanceEvictionTaken(current.detect_time)), offers)


# -- the round machine -------------------------------------------------------------------


def _skipped(section: BalancerState, now: float, start: Step) -> Decision[RoundReply]:
    window = balancer_window(section.last, now)
    return Decision((), RoundReply(RoundResult.SKIPPED, None, window, start.dest))


@cache
def _start(cooling_down: bool) -> Step:
    """``start``: skipped within the cool-down, else preparing (§6.2 step 2). Kept per
    answer, as ``_step``: every tick fires it, twice when the round is computed."""
    return _fire(machine.SCHEDULED, "start", {"in_cool_down": cooling_down})


@cache
def _conclude(needs_balance: bool, has_pods_to_move: bool) -> Step:
    """``conclude``: where a stored round's record leaves the machine (kept per answer)."""
    guards = {"needs_balance": needs_balance, "has_pods_to_move": has_pods_to_move}
    return _fire(machine.PREPARING, "conclude", guards)


def _fire(source: str, trigger: str, guards: Mapping[str, bool] | None = None) -> Step:
    """The step ``trigger`` takes from ``source``, where the table has a transition for every
    answer of the guards (``tests/machines/test_balance_round.py``).

    Raises:
        LookupError: the table refused every answer: it lost a transition the façade needs.
    """
    answers = () if guards is None else tuple(sorted((g, bool(a)) for g, a in guards.items()))
    step = _step(source, trigger, answers)
    if step is None:
        raise LookupError(f"balance round: {trigger!r} from {source!r} refused with {guards}")
    return step


@cache
def _step(source: str, trigger: str, guards: tuple[tuple[str, bool], ...]) -> Step | None:
    """The table's step, once per answer: the table is fixed and a ``Step`` read-only, and a
    quiet round fires three (``start`` twice, ``conclude``) where its planning is ~50 us."""
    return machine.round_lifecycle().step(source, trigger, dict(guards) or None)


@cache
def _may(trigger: str, source: str) -> bool:
    """Whether the table lets ``trigger`` fire from ``source``; once per pair, the table being
    fixed (every tick asks it of the current record, for ``take_advice``)."""
    return trigger in machine.ROUND.triggers_from(source)


def _events(step: Step, *built: BalanceEvent) -> tuple[BalanceEvent, ...]:
    """The events the fired transition names, in its order, from the ones the step built.

    Raises:
        KeyError: the table names an event the step did not build.
    """
    by_name = {type(event).__name__: event for event in built}
    return tuple(by_name[name] for name in step.events)
