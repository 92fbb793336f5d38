"""The MemoryBalancer: balance rounds on ticks, advice and eviction served once (memory-balancer
§1.1, §6, §8, §9, §12, §13; DESIGN.md "Actors and messages", the commit protocol step 4).

The balancer owns the ``balance`` section of the state (``current`` and ``last``). Like the
Allocator it decides on the durable state it holds, commits the events, adopts the snapshot
the store answers with, and only then acts or answers; the balance round machine
(``machines.balance_round``) decides which event each step commits, with guards answered from
the planner's outcome. One mailbox serialises every read and write of ``current``, ``last``
and their flags, which fixes the reference's unlocked reads of ``last`` (§13, O16).

* ``Tick(now)``: one advisor-loop iteration (§1.1). The windows machine says where ``now``
  falls after the last emitted round (cool-down, ping-pong window, open), which answers the
  round's ``in_cool_down`` guard. ``start``: within the cool-down the round is skipped and
  nothing is committed; else the inputs are read from the ports and the round
  planned; ``fail`` commits ``BalanceRoundFailed`` (inputs and reason; ``current`` kept, O8),
  ``conclude`` commits ``BalanceRoundRecorded`` (record and inputs). Then, even after a failed
  round, the ``GetAdvices`` step: an advice not yet taken is planned by the executor,
  ``BalanceAdviceTaken`` is committed with the plan in its cause, and the plan is started.
  A tick never raises (the ticker ``tell``s it): problems are in its ``RoundReport``.
* ``GetAdvices``: the same step for an external consumer, answering the advice as advisor
  extra entries; no execution.
* ``GetEvictPods(uids)``: the current record's offers; ``BalanceEvictionTaken`` is committed
  before answering, even when nothing matched (O10).
* A commit that is refused leaves the state as it was: a "taken" command raises
  ``BalancerUnavailable``, so nothing is handed out that the journal does not hold. A commit
  with no answer may still land, so the next command re-reads the durable state first.

``MemoryBalancerCore`` is the behaviour, driven directly by unit tests; ``MemoryBalancerActor``
is the thin pykka shell around it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import pykka

from actors.balancer_inputs import container_ids_of, metric_inputs, with_pods
from actors.balancer_machine import BalancerPorts, balancer_window, record_machine_state
from actors.balancer_messages import (
    BalancerCommand,
    BalancerUnavailable,
    BalancerView,
    GetAdvices,
    GetBalancerState,
    GetEvictPods,
    GetToken,
    GetTopEvictionPods,
    RoundReport,
    ThresholdMet,
    Tick,
)
from actors.balancer_metrics import BalancerMetrics
from actors.ports.commit import AdoptedSnapshot, CommitOutcomeUnknown, Committer
from actors.ports.migration import MigrationMode, MigrationPlan
from actors.store_messages import CommitRefused, Snapshot
from machines import balance_round as machine
from policy.balance import (
    BalanceError,
    BalanceInfo,
    BalancerConfig,
    BalancerState,
    BalanceStatus,
    EvictOffer,
    MemoryAdvice,
    RoundInputs,
    RoundResult,
    ThresholdMetAnswer,
    advice_for,
    in_cool_down,
    reconcile,
    take_advice,
    take_eviction,
    threshold_met,
    token,
    top_eviction_pods,
)
from policy.balance.advice import ExtraMemoryAdvice, extra_entries
from policy.balance.events import (
    BalanceAdviceTaken,
    BalanceEvent,
    BalanceEvictionTaken,
    BalanceRoundFailed,
    BalanceRoundRecorded,
)

__all__ = ["BalancerPorts", "MemoryBalancerActor", "MemoryBalancerCore"]

_log = logging.getLogger(__name__)


class MemoryBalancerCore:
    """Serves the balancer's commands on the durable state; see the module docstring.

    Args:
        snapshot: the durable state to start from (the StateStore's, after recovery); its
            ``balance`` section holds ``current`` and ``last``.
        committer: where events are made durable.
        ports: the metric, distance, memory and pod sources and the executor.
        config: the balancer's configuration (§3).
        cpu_vendor: the CPUID vendor string, for vendor-aware values (§3.1).
        now_fn: the wall clock, seconds since the epoch (the cause of RPC-driven commits).

    Raises:
        ValueError: the distances cannot be read (start-up fails, §4.4).
    """

    def __init__(
        self,
        snapshot: Snapshot,
        committer: Committer,
        ports: BalancerPorts,
        config: BalancerConfig,
        *,
        now_fn: Callable[[], float],
        cpu_vendor: str = "",
    ) -> None:
        self._durable = AdoptedSnapshot(committer, snapshot)
        self.metrics = BalancerMetrics()
        self._ports = ports
        self._config = config
        self._cpu_vendor = cpu_vendor
        self._now = now_fn
        self._distances = dict(ports.distances.distances())
        self._lifecycle = machine.round_lifecycle()
        # Container IDs of the pods of the last computed round, for the executor.
        self._container_ids: dict[tuple[str, str], str] = {}

    @property
    def snapshot(self) -> Snapshot:
        """The durable state this actor holds (the store's last answer)."""
        return self._durable.snapshot

    @property
    def state(self) -> BalancerState:
        """The durable balance section."""
        return self.snapshot.state.balance

    def handle(self, command: BalancerCommand) -> Any:
        """Serve one command: the balancer's single dispatch.

        Returns:
            The command's reply (``actors.balancer_messages``).

        Raises:
            BalancerUnavailable: a "taken" event could not be made durable; nothing taken.
            TypeError: ``command`` is not a balancer command.
        """
        match command:
            case Tick(now):
                return self.tick(now)
            case GetAdvices():
                return self.get_advices()
            case GetEvictPods(active_pod_uids):
                return self.get_evict_pods(active_pod_uids)
            case ThresholdMet():
                return self.threshold_met()
            case GetTopEvictionPods():
                return top_eviction_pods()
            case GetToken():
                return token()
            case GetBalancerState():
                return self.view()
        raise TypeError(f"the MemoryBalancer has no command {type(command).__name__}")

    # -- the advisor loop ------------------------------------------------------------------

    def tick(self, now: float) -> RoundReport:
        """One advisor-loop iteration: a round, then the ``GetAdvices`` step (§1.1).

        Never raises: what went wrong is the report's ``error``.
        """
        self.metrics.ticks_total += 1
        try:
            self._resync_if_stale()
        except BalancerUnavailable as err:
            return RoundReport(now, RoundResult.FAILED, error=str(err))
        try:
            report = self._round(now)
        except Exception as err:
            # A tick is told, not asked: an escaping error would stop the actor. A bug in a
            # round must cost that round only.
            _log.exception("balance round at %s failed unexpectedly", now)
            report = RoundReport(now, RoundResult.FAILED, error=f"internal error: {err!r}")
        try:
            advice, plan = self._take_advice(now, "Tick", execute=True)
        except BalancerUnavailable as err:
            return replace(report, error=_join(report.error, str(err)))
        except Exception as err:
            # Same reason: an executor that breaks its "never raises" must not stop the actor.
            _log.exception("balance advice at %s failed unexpectedly", now)
            return replace(report, error=_join(report.error, f"internal error: {err!r}"))
        return replace(report, advice=advice, execution=None if plan is None else plan.to_json())

    def _round(self, now: float) -> RoundReport:
        """``Reconcile`` (§6.2): skip, or plan and commit the round."""
        state = self.state
        window = balancer_window(state.last, now)
        # The planner skips by its own rule (``plan_round``); the two must agree.
        cool_down = in_cool_down(state.last, now)
        if cool_down != (window == machine.COOLING_DOWN):
            _log.error("window %s disagrees with the planner's cool-down at %s", window, now)
        start = self._lifecycle.step(machine.SCHEDULED, "start", {"in_cool_down": cool_down})
        assert start is not None  # "start" has a transition for either answer
        if start.dest == machine.SKIPPED:
            # §6.2 step 2: "balance occurs recently"; nothing computed, stored or measured.
            self.metrics.rounds_skipped_total += 1
            _log.debug("balance occurs recently, round at %s skipped", now)
            return RoundReport(now, RoundResult.SKIPPED, window=window)
        return replace(self._compute(now, state), window=window)

    def _compute(self, now: float, state: BalancerState) -> RoundReport:
        """§6.2 steps 3-6: read the inputs, plan, and commit the outcome.

        The round is planned on the metrics alone first. Only if it found pressure to act on
        are the pods read (every pod's cgroup: the costly part) and the round planned again
        with them; otherwise the pods could not change the outcome, so the journaled inputs
        leave them out and still recompute to the same record.
        """
        try:
            inputs = metric_inputs(
                now=now,
                distances=self._distances,
                metrics=self._ports.metrics,
                config=self._config,
                cpu_vendor=self._cpu_vendor,
                last=state.last,
            )
            new_state, outcome = reconcile(state, inputs)
            if outcome.record is not None and outcome.record.need_balance:
                inputs = self._with_pods(inputs)
                new_state, outcome = reconcile(state, inputs)
        except Exception as err:
            # A port that fails (the store gone, a value the inputs refuse) fails the round,
            # as a missing metric does (§7.12); the next tick tries again.
            if not isinstance(err, BalanceError):
                _log.exception("balance round at %s cannot read its inputs", now)
            reason = f"cannot read the round's inputs: {err}"
            # Measured like any failed round (§12): a record with nothing but the reason.
            failed = BalanceInfo(now, status=BalanceStatus.PREPARE_FAILED, failed_reason=reason)
            self.metrics.count_round(failed)
            return self._fail(now, {"now": now}, reason, failed)
        record = outcome.record
        assert record is not None  # not skipped: the cool-down was answered above
        self.metrics.count_round(record)
        _log.info("numa memory balance round: %s", record.to_json_text())
        if outcome.result is RoundResult.FAILED:
            return self._fail(now, inputs.to_json(), outcome.error, record)
        guards = {
            "needs_balance": record.need_balance,
            "has_pods_to_move": bool(record.dest_numas and record.balance_pods)
            or bool(record.evict_pods),
        }
        step = self._lifecycle.step(machine.PREPARING, "conclude", guards)
        assert step is not None and step.dest == record_machine_state(record), step
        event = BalanceRoundRecorded(record, inputs.to_json())
        error = self._commit_step(step.events, {machine.BALANCE_ROUND_RECORDED: event}, now)
        if error:
            return RoundReport(now, RoundResult.FAILED, record, error=error)
        self._check_adopted(new_state, "BalanceRoundRecorded")
        self.metrics.rounds_stored_total += 1
        return RoundReport(now, RoundResult.STORED, record)

    def _with_pods(self, inputs: RoundInputs) -> RoundInputs:
        pods = self._ports.pods()
        inputs, unreadable = with_pods(inputs, pods, self._ports.memory)
        self.metrics.pods_unreadable_total += unreadable
        self._container_ids = container_ids_of(pods.pods)
        return inputs

    def _fail(
        self, now: float, inputs: Mapping[str, Any], error: str, record: BalanceInfo | None
    ) -> RoundReport:
        """§6.2 step 5: journal the failed round with its inputs; ``current`` is kept (O8)."""
        self.metrics.rounds_failed_total += 1
        _log.warning("balance round at %s failed: %s", now, error)
        step = self._lifecycle.step(machine.PREPARING, "fail")
        assert step is not None
        event = BalanceRoundFailed(inputs, error)
        commit_error = self._commit_step(step.events, {machine.BALANCE_ROUND_FAILED: event}, now)
        return RoundReport(now, RoundResult.FAILED, record, error=_join(error, commit_error))

    # -- advice --------------------------------------------------------------------------

    def get_advices(self) -> tuple[ExtraMemoryAdvice, ...]:
        """``GetAdvices`` (§8): the advice as extra entries, once; committed before answering.

        Raises:
            BalancerUnavailable: the commit failed; the advice was not taken.
        """
        self._resync_if_stale()
        advice, _ = self._take_advice(self._now(), "GetAdvices", execute=False)
        return extra_entries(advice)

    def _take_advice(
        self, now: float, command: str, *, execute: bool
    ) -> tuple[MemoryAdvice | None, MigrationPlan | None]:
        """Take the current record's advice: plan it, commit, then start the plan."""
        current = self.state.current
        state_name = record_machine_state(current)
        if current is None or state_name is None or not self._may("take_advice", state_name):
            return None, None
        advice = advice_for(current)
        step = self._lifecycle.step(state_name, "take_advice", {"has_advice": advice is not None})
        if step is None or advice is None:
            return None, None
        executor = self._ports.executor if execute else None
        plan = None if executor is None else executor.plan(advice, self._container_ids)
        cause: dict[str, Any] = {"command": command, "now": now, "advice": advice.to_json_text()}
        if plan is not None:
            cause["execution"] = plan.to_json()
        expected, _ = take_advice(self.state)
        event = BalanceAdviceTaken(current.detect_time)
        error = self._commit_step(
            step.events, {machine.BALANCE_ADVICE_TAKEN: event}, now, cause=cause
        )
        if error:
            raise BalancerUnavailable(f"{command}: the advice was not taken: {error}")
        self._check_adopted(expected, "BalanceAdviceTaken")
        self.metrics.advices_emitted_total += 1
        _log.info("numa memory balance advice emitted: %s", advice.to_json_text())
        if executor is not None and plan is not None:
            self.metrics.migrations_planned_total += 1
            self.metrics.migrations_dropped_total += plan.mode is MigrationMode.DROPPED
            executor.start(plan)
        return advice, plan

    # -- eviction RPCs -------------------------------------------------------------------

    def get_evict_pods(self, active_pod_uids: tuple[str, ...]) -> tuple[EvictOffer, ...]:
        """``GetEvictPods`` (§9.1): the offers, once per record; committed before answering.

        Raises:
            BalancerUnavailable: the commit failed; the offer was not taken.
        """
        self._resync_if_stale()
        self.metrics.eviction_polls_total += 1
        current = self.state.current
        state_name = record_machine_state(current)
        if current is None or state_name is None or not self._may("take_eviction", state_name):
            return ()
        step = self._lifecycle.step(state_name, "take_eviction")
        assert step is not None
        expected, offers = take_eviction(self.state, active_pod_uids)
        now = self._now()
        cause = {
            "command": "GetEvictPods",
            "now": now,
            "active_pod_uids": list(active_pod_uids),
            "offered": [o.pod_uid for o in offers],
        }
        event = BalanceEvictionTaken(current.detect_time)
        error = self._commit_step(
            step.events, {machine.BALANCE_EVICTION_TAKEN: event}, now, cause=cause
        )
        if error:
            raise BalancerUnavailable(f"the eviction offer was not taken: {error}")
        self._check_adopted(expected, "BalanceEvictionTaken")
        self.metrics.evictions_taken_total += 1
        self.metrics.eviction_offers_total += len(offers)
        return offers

    def threshold_met(self) -> ThresholdMetAnswer:
        """``ThresholdMet`` (§9.2)."""
        return threshold_met()

    def view(self) -> BalancerView:
        """The durable state, its snapshot's seq and the counters."""
        return BalancerView(
            self.state,
            self.snapshot.seq,
            self.metrics.counters(),
            dict(self.metrics.round_metric),
        )

    # -- the commit protocol ---------------------------------------------------------------

    def _may(self, trigger: str, state_name: str) -> bool:
        return trigger in self._lifecycle.table.triggers_from(state_name)

    def _commit_step(
        self,
        names: tuple[str, ...],
        built: Mapping[str, BalanceEvent],
        now: float,
        cause: Mapping[str, Any] | None = None,
    ) -> str:
        """Commit the events the machine's step names; the error text, or "" when committed."""
        missing = [name for name in names if name not in built]
        if missing or set(built) - set(names):
            raise AssertionError(f"the round machine names events {names}, built {list(built)}")
        events = tuple(built[name] for name in names)
        if not events:
            return ""
        cause = cause if cause is not None else {"command": "Tick", "now": now}
        try:
            # Blocking on the store from inside an actor: the StateStore never calls anyone,
            # so this wait cannot be part of a cycle (DESIGN.md, the commit protocol step 1).
            self._durable.commit(events, cause)
        except CommitRefused as err:
            self.metrics.commit_failures_total += 1
            return f"commit of {', '.join(names)} refused: {err}"
        except CommitOutcomeUnknown as err:
            self.metrics.commit_failures_total += 1
            return f"commit of {', '.join(names)} unconfirmed: {err}"
        return ""

    def _check_adopted(self, expected: BalancerState, event: str) -> None:
        """The store applied our event as the planner did; anything else is a bug to report
        (the durable state wins, as it is what a restart would rebuild)."""
        if self.state != expected:
            _log.error(
                "after %s the durable balance section differs from the planner's: %r != %r",
                event,
                self.state,
                expected,
            )

    def _resync_if_stale(self) -> None:
        """After an unanswered commit, re-read the durable state before deciding again."""
        try:
            self._durable.resync_if_stale()
        except CommitRefused as err:
            raise BalancerUnavailable(f"cannot re-read the durable state: {err}") from err


def _join(first: str, second: str) -> str:
    return "; ".join(part for part in (first, second) if part)


class MemoryBalancerActor(pykka.ThreadingActor):
    """The pykka shell: one mailbox in front of a ``MemoryBalancerCore``.

    The ticker ``tell``s ``Tick``; the eviction-plugin gRPC threads ``ask`` with the RPC's
    remaining deadline, and the reply or the core's exception comes back through the future.
    """

    def __init__(self, core: MemoryBalancerCore) -> None:
        super().__init__()
        self.core = core

    def on_receive(self, message: Any) -> Any:
        """Serve one command (see ``MemoryBalancerCore.handle``)."""
        return self.core.handle(message)
