"""The MemoryBalancer: balance rounds on ticks, advice and eviction served once (memory-balancer
§1.1, §6, §8, §9, §12, §13; DESIGN.md "Actors and messages", the commit protocol step 4).

The balancer owns the ``balance`` section of the state (``current`` and ``last``). Like the
Allocator it decides on the durable state it holds and decides nothing itself: it gathers the
inputs through its ports, calls the pure façade (``policy.balance.decide``, which owns the
balance round machine), commits the decision's events, adopts the snapshot the store answers
with, and only then carries out the effects and answers. One mailbox serialises every read and
write of ``current``, ``last`` and their flags, which fixes the reference's unlocked reads of
``last`` (§13, O16).

* ``Tick(now)``: one advisor-loop iteration (§1.1). ``skip_round``: within the cool-down the
  round is skipped and nothing is read or committed. Else the metrics are sampled, and
  ``round_without_pods`` decides the round when the pods cannot change it; otherwise the pods
  are read and ``balance_round`` decides: ``BalanceRoundRecorded`` (record and inputs) or
  ``BalanceRoundFailed`` (inputs and reason; ``current`` kept, O8); a port that fails gives
  ``unreadable_round``. Then, even after a failed round, the ``GetAdvices`` step: an advice
  not yet taken is planned by the executor (the decision's ``MigrateMemory`` effect),
  ``BalanceAdviceTaken`` is committed with the plan in its cause, and the plan is started. A
  tick never raises (the ticker ``tell``s it): problems are in its ``RoundReport``.
* Coalescing (``policy.balance.coalesce``): a round that repeats the last journaled round's
  outcome and hands nothing out is not committed; the balancer holds the stretch of such
  rounds and commits its summary with the next round it journals (an outcome change, or the
  first after ``round_summary_every_s``). Metrics and health count every computed round.
* Health and the log: each tick reports its error (or none) to the ``health`` port, which
  turns the balancer unhealthy once rounds keep failing (cpu-policy §12.3); a failure that
  repeats is logged once and then at most every ``REPEAT_LOG_INTERVAL_S``
  (``actors.balancer_log``), and the record of a coalesced round is logged at DEBUG only.
* ``GetAdvices``: the same step for an external consumer, answering the advice as advisor
  extra entries; no effect, no execution.
* ``GetEvictPods(uids)``: the current record's offers; ``BalanceEvictionTaken`` is committed
  before answering, even when nothing matched (O10).
* A commit that is refused leaves the state as it was: a "taken" command raises
  ``BalancerUnavailable``, so nothing is handed out that the journal does not hold. A commit
  with no answer may still land, so the next command re-reads the durable state first
  (``AdoptedSnapshot``).

``MemoryBalancerCore`` is the behaviour, driven directly by unit tests; ``MemoryBalancerActor``
is the thin pykka shell around it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pykka

from actors.balancer_inputs import (
    ContainerIdsMemo,
    checked_distances,
    container_ids_of,
    metric_inputs,
    with_pods,
)
from actors.balancer_log import RepeatedLine
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
from actors.balancer_ports import BalancerPorts
from actors.log_text import utc
from actors.ports.commit import AdoptedSnapshot, CommitOutcomeUnknown, Committer
from actors.ports.migration import MigrationMode, MigrationPlan
from actors.store_messages import CommitRefused, Snapshot
from policy.balance import (
    BalanceError,
    BalancerConfig,
    BalancerState,
    EvictOffer,
    MemoryAdvice,
    RoundInputs,
    RoundResult,
    ThresholdMetAnswer,
    threshold_met,
    token,
    top_eviction_pods,
)
from policy.balance.advice import ExtraMemoryAdvice, extra_entries
from policy.balance.coalesce import QuietStretch, coalesce_round
from policy.balance.decide import (
    AdviceRequest,
    EvictionRequest,
    MigrateMemory,
    RoundReply,
    balance_round,
    get_advices,
    get_evict_pods,
    round_without_pods,
    skip_round,
    unreadable_round,
)
from policy.decision import Decision, Effect
from policy.state.events import Event

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
        round_summary_every_s: quiet rounds that repeat the journaled outcome are coalesced
            and summarised at least this often (``policy.balance.coalesce``); 0, the default,
            journals every round.

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
        round_summary_every_s: float = 0.0,
    ) -> None:
        self._durable = AdoptedSnapshot(committer, snapshot)
        self.metrics = BalancerMetrics()
        self._ports = ports
        self._config = config
        self._cpu_vendor = cpu_vendor
        self._now = now_fn
        self._distances = checked_distances(ports.distances.distances())
        self._with_container_ids = ContainerIdsMemo()
        # Container IDs of the pods of the last computed round (its inputs), for the executor.
        self._container_ids: dict[tuple[str, str], str] = {}
        # The rounds coalesced since the last journaled one: memory only (a restart journals
        # its first round, policy.balance.coalesce).
        self._summary_every_s = round_summary_every_s
        self._stretch: QuietStretch | None = None
        self._failure_line = RepeatedLine(_log, logging.WARNING)

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
        report = self._tick(now)
        health = self._ports.health
        if health is not None:
            try:
                health(report.error or None)
            except Exception:
                # A tick is told, not asked: a broken watcher must not stop the actor.
                _log.exception("the balancer's health port failed")
        return report

    def _tick(self, now: float) -> RoundReport:
        try:
            self._resync_if_stale()
        except BalancerUnavailable as err:
            return RoundReport(now, RoundResult.FAILED, error=str(err))
        try:
            report = self._round(now)
        except Exception as err:
            # A tick is told, not asked: an escaping error would stop the actor. A bug in a
            # round must cost that round only.
            _log.exception("balance round at %s failed unexpectedly", utc(now))
            report = RoundReport(now, RoundResult.FAILED, error=f"internal error: {err!r}")
        try:
            advice, plan = self._take_advice(AdviceRequest(now, from_tick=True))
        except BalancerUnavailable as err:
            return replace(report, error=_join(report.error, str(err)))
        except Exception as err:
            # Same reason: an executor that breaks its "never raises" must not stop the actor.
            _log.exception("balance advice at %s failed unexpectedly", utc(now))
            return replace(report, error=_join(report.error, f"internal error: {err!r}"))
        if advice is None and plan is None:
            return report  # nothing taken (a quiet round): the report already says so
        return replace(report, advice=advice, execution=None if plan is None else plan.to_json())

    def _round(self, now: float) -> RoundReport:
        """``Reconcile`` (§6.2): decided by the façade, committed here."""
        state = self.state
        decision = skip_round(state, now)
        if decision is None:
            decision = self._decide_round(state, now)
        reply = decision.reply
        if reply.record is None:
            # §6.2 step 2: "balance occurs recently"; nothing computed, stored or measured.
            self.metrics.rounds_skipped_total += 1
            _log.debug("balance occurs recently, round at %s skipped", utc(now))
            return RoundReport(now, RoundResult.SKIPPED, window=reply.window)
        # Measured like any computed round, failed ones too (§12).
        self.metrics.count_round(reply.record)
        journaled = coalesce_round(self._stretch, decision, now, self._summary_every_s)
        self._observe_round(now, reply, journaled.coalesced)
        if journaled.coalesced:
            self._stretch = journaled.stretch
            self.metrics.rounds_coalesced_total += 1
            return self._report(now, reply, "", coalesced=True)
        error = self._commit(journaled.events, {"command": "Tick", "now": now})
        if not error:
            self._stretch = journaled.stretch
        return self._report(now, reply, error)

    def _observe_round(self, now: float, reply: RoundReply, coalesced: bool) -> None:
        """Log the record as JSON after every computed round (§12), at DEBUG when it only
        repeats the journaled outcome; count and log a failure, once, then rate-limited
        (module docstring)."""
        record = reply.record
        if record is not None:
            level = logging.DEBUG if coalesced else logging.INFO
            if _log.isEnabledFor(level):
                _log.log(level, "numa memory balance round: %s", record.to_json_text())
        if reply.result is RoundResult.FAILED:
            self.metrics.rounds_failed_total += 1
            self._failure_line.log(f"balance rounds fail: {reply.error}", now)
        else:
            self._failure_line.clear("balance rounds succeed again")

    def _decide_round(self, state: BalancerState, now: float) -> Decision[RoundReply]:
        """§6.2 steps 3-6: read the inputs through the ports, then decide.

        The metrics first; the pods (every pod's cgroup: the costly part) only if the façade
        says they can change the round. A port that fails (the store gone, a value the inputs
        refuse) fails the round, as a missing metric does (§7.12); the next tick tries again.
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
            decision = round_without_pods(state, inputs)
            if decision is None:
                decision = balance_round(state, self._with_pods(inputs))
        except Exception as err:
            if not isinstance(err, BalanceError | OSError):
                # Not a port that failed as ports do: a bug, worth its traceback.
                _log.exception("balance round at %s cannot read its inputs", utc(now))
            return unreadable_round(state, now, str(err))
        return decision

    def _report(
        self, now: float, reply: RoundReply, commit_error: str, *, coalesced: bool = False
    ) -> RoundReport:
        """The tick's report on a computed round, once its event is (or is not) committed."""
        if reply.result is RoundResult.FAILED or commit_error:
            error = _join(reply.error, commit_error)
            return RoundReport(
                now,
                RoundResult.FAILED,
                reply.record,
                error=error,
                window=reply.window,
                coalesced=coalesced,
            )
        self.metrics.rounds_stored_total += 1
        return RoundReport(
            now, RoundResult.STORED, reply.record, window=reply.window, coalesced=coalesced
        )

    def _with_pods(self, inputs: RoundInputs) -> RoundInputs:
        pods = self._ports.pods()
        source = self._ports.pod_source
        if source is not None:
            # Container IDs are this round's inputs, from the latest listing (never state).
            pods = self._with_container_ids(pods, source.latest())
        inputs, unreadable = with_pods(inputs, pods, self._ports.memory)
        self.metrics.pods_unreadable_total += unreadable
        self._container_ids = container_ids_of(inputs.pods)
        return inputs

    # -- advice --------------------------------------------------------------------------

    def get_advices(self) -> tuple[ExtraMemoryAdvice, ...]:
        """``GetAdvices`` (§8): the advice as extra entries, once; committed before answering.

        Raises:
            BalancerUnavailable: the commit failed; the advice was not taken.
        """
        self._resync_if_stale()
        advice, _ = self._take_advice(AdviceRequest(self._now(), from_tick=False))
        return extra_entries(advice)

    def _take_advice(
        self, request: AdviceRequest
    ) -> tuple[MemoryAdvice | None, MigrationPlan | None]:
        """Take the current record's advice: plan its migration, commit, then start the plan."""
        decision = get_advices(self.state, request)
        advice = decision.reply
        if advice is None or not decision.events:
            return None, None
        plan = self._plan(decision.effects)
        cause = request.to_cause()
        # What was handed out, beside the inputs, for whoever reads the journal (and the
        # log line below: the advice is encoded once).
        text = advice.to_json_text()
        cause["advice"] = text
        if plan is not None:
            cause["execution"] = plan.to_json()
        error = self._commit(decision.events, cause)
        if error:
            raise BalancerUnavailable(f"{cause['command']}: the advice was not taken: {error}")
        self.metrics.advices_emitted_total += 1
        _log.info("numa memory balance advice emitted: %s", text)
        executor = self._ports.executor
        if plan is not None and executor is not None:
            self.metrics.migrations_planned_total += 1
            self.metrics.migrations_dropped_total += plan.mode is MigrationMode.DROPPED
            executor.start(plan)
        return advice, plan

    def _plan(self, effects: tuple[Effect, ...]) -> MigrationPlan | None:
        """The executor's plan for the decision's migration, made before the commit so that
        the journal holds what will be done; None without an executor or a migration."""
        executor = self._ports.executor
        for effect in effects:
            if executor is not None and isinstance(effect, MigrateMemory):
                return executor.plan(effect.advice, self._container_ids)
        return None

    # -- eviction RPCs -------------------------------------------------------------------

    def get_evict_pods(self, active_pod_uids: tuple[str, ...]) -> tuple[EvictOffer, ...]:
        """``GetEvictPods`` (§9.1): the offers, once per record; committed before answering.

        Raises:
            BalancerUnavailable: the commit failed; the offer was not taken.
        """
        self._resync_if_stale()
        self.metrics.eviction_polls_total += 1
        request = EvictionRequest(active_pod_uids, self._now())
        decision = get_evict_pods(self.state, request)
        offers = decision.reply
        if not decision.events:
            return offers
        cause = request.to_cause()
        # What was handed out, beside the inputs, for whoever reads the journal.
        cause["offered"] = [o.pod_uid for o in offers]
        error = self._commit(decision.events, cause)
        if error:
            raise BalancerUnavailable(f"the eviction offer was not taken: {error}")
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

    def _commit(self, events: tuple[Event, ...], cause: dict[str, Any]) -> str:
        """Commit a decision's events with its cause; the error text, or "" when committed."""
        if not events:
            return ""
        names = ", ".join(type(event).__name__ for event in events)
        try:
            # Blocking on the store from inside an actor: the StateStore never calls anyone,
            # so this wait cannot be part of a cycle (DESIGN.md, the commit protocol step 1).
            self._durable.commit(events, cause)
        except CommitRefused as err:
            self.metrics.commit_failures_total += 1
            return f"commit of {names} refused: {err}"
        except CommitOutcomeUnknown as err:
            self.metrics.commit_failures_total += 1
            return f"commit of {names} unconfirmed: {err}"
        return ""

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
