"""The CPU pressure actor: both eviction plugins' history, one mailbox (spec cpu-policy §12.7;
katalyst-core v0.5.3 ``cpueviction``; DESIGN.md "Every decision has one shape").

A plain core (``CPUPressureCore``) and a thin pykka shell (``CPUPressureActor``). For each
command (``actors.cpu_pressure_messages``) the core:

1. reads the CPU state through the StateStore's latest snapshot (``Committer.latest``): the
   plugins read it and never write it, as the reference's read-only state;
2. gathers the inputs (the pool map, the loads from the ``ContainerLoadSource`` port, the
   request's pods) and calls the pure decision of ``policy.cpu.pressure``;
3. commits the decision's events with its inputs as the record's cause (``{"command", "now",
   "settings", "inputs", "answer"}``, the offered ``pod_uids`` and the answer's ``pool``;
   re-run it with ``policy.cpu.pressure.rerun``), so ``qrmd journal show`` tells which
   samples a threshold was met on and why a pod was offered; a decision without events is not
   journaled;
4. answers (or, after a refused commit, raises ``PressureUnavailable``).

At start, a section holding load rings from before the restart has them cleared (one
``LoadHistoryCleared("restart")``): the reference keeps its rings in memory, so a restarted
plugin judges only load sampled after it started. The cool-down and the tolerance timers are
kept (the reference loses them too; keeping them can only delay an eviction, never add one).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pykka

from actors.cpu_pressure_messages import (
    CollectLoad,
    GetPressureState,
    LoadThresholdMet,
    LoadTopEvictionPods,
    PressureCommand,
    PressureUnavailable,
    PressureView,
    SuppressionEvictPods,
)
from actors.log_text import utc
from actors.ports.commit import AdoptedSnapshot, CommitOutcomeUnknown, Committer
from actors.ports.cpu_load import ContainerLoadSource, MissingLoad
from actors.store_messages import CommitRefused, Snapshot
from policy.cpu.pressure import (
    ActivePod,
    CollectReport,
    EvictPodsAnswer,
    LoadInputs,
    PoolMap,
    PressureSettings,
    SuppressionInputs,
    ThresholdMetAnswer,
    TopEvictionAnswer,
    TopInputs,
    collect_load,
    evict_pods,
    threshold_met,
    top_eviction_pods,
)
from policy.cpu.pressure.state_view import pool_map, shared_pools_limit
from policy.cpu.qos import QoSConfig
from policy.decision import Decision
from policy.errors import PolicyError
from policy.state.cpu_state import CPUState
from policy.state.pressure import PressureHistory
from policy.state.pressure.events import LoadHistoryCleared
from policy.topology.cpuset import CPUSet

__all__ = ["CPUPressureActor", "CPUPressureCore", "PressurePorts"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PressurePorts:
    """What the core reads besides the state: containers' load."""

    loads: ContainerLoadSource


class CPUPressureCore:
    """Serves the CPU pressure commands; see the module docstring.

    Args:
        snapshot: the durable state to start from (the StateStore's, after recovery).
        committer: where events are made durable and the latest CPU state is read.
        ports: the load source.
        settings: the plugins' settings.
        reserved: the system's reserved CPUs (for the shared pools' limit).
        now_fn: the wall clock, seconds since the epoch (the time of RPC-driven decisions).
        qos: how pods' QoS levels are resolved.
    """

    def __init__(
        self,
        snapshot: Snapshot,
        committer: Committer,
        ports: PressurePorts,
        settings: PressureSettings,
        *,
        reserved: CPUSet,
        now_fn: Callable[[], float],
        qos: QoSConfig | None = None,
    ) -> None:
        self._durable = AdoptedSnapshot(committer, snapshot)
        self._committer = committer
        self._ports = ports
        self.settings = settings
        self._reserved = reserved
        self._now = now_fn
        self._qos = qos or QoSConfig()
        self.counters: Counter[str] = Counter()
        self.threshold_met_counts: Counter[tuple[str, str]] = Counter()

    @property
    def history(self) -> PressureHistory:
        """The durable ``cpu_pressure`` section this actor holds."""
        return self._durable.snapshot.state.cpu_pressure

    def start(self) -> None:
        """Forget load sampled before this start (the module docstring); never raises."""
        history = self.history
        if not (history.pool_rings or history.container_rings):
            return
        try:
            self._commit(
                Decision(events=(LoadHistoryCleared("restart"),), reply=None),
                "Start",
                self._now(),
                {},
            )
        except PressureUnavailable as err:
            _log.warning("load rings from before the restart not cleared: %s", err)

    def handle(self, command: PressureCommand) -> Any:
        """Serve one command: the actor's single dispatch.

        Raises:
            PressureUnavailable: the state could not be read or the events not committed.
            PolicyError: the decision refused its inputs (no reclaim pool, a bad pod request).
            TypeError: not a command of this actor.
        """
        match command:
            case CollectLoad(now):
                return self.collect(now)
            case LoadThresholdMet():
                return self.threshold_met()
            case LoadTopEvictionPods(active_pods=pods, top_n=top_n):
                return self.top_eviction_pods(pods, top_n)
            case SuppressionEvictPods(active_pods=pods):
                return self.evict_pods(pods)
            case GetPressureState():
                return self.view()
        raise TypeError(f"the CPU pressure actor has no command {type(command).__name__}")

    # -- the load plugin ---------------------------------------------------------------------

    def collect(self, now: float) -> CollectReport:
        """One load collection (``collectMetrics``). Never raises: a tick is told."""
        self.counters["collections_total"] += 1
        try:
            state = self._cpu_state()
            view = pool_map(state)
            inputs = self._load_inputs(state, view)
            decision = collect_load(self.history, inputs, self.settings, now)
            self._commit(decision, "CollectLoad", now, inputs.to_json())
        except (PressureUnavailable, PolicyError) as err:
            self.counters["collection_failures_total"] += 1
            _log.warning("CPU load collection at %s failed: %s", utc(now), err)
            return CollectReport()
        except Exception:
            # Told, not asked: an escaping error would stop the actor for one bad tick.
            self.counters["collection_failures_total"] += 1
            _log.exception("CPU load collection at %s failed unexpectedly", utc(now))
            return CollectReport()
        return decision.reply

    def _load_inputs(self, state: CPUState, view: PoolMap) -> LoadInputs:
        wanted = [
            (c.pod_uid, c.container)
            for c in view.containers
            if c.pool not in self.settings.skip_pools
        ]
        loads: dict[tuple[str, str], float] = {}
        missing: dict[tuple[str, str], str] = {}
        if self.settings.enable_load_eviction and wanted:
            for key, value in self._ports.loads.sample(wanted).items():
                if isinstance(value, MissingLoad):
                    missing[key] = value.reason
                else:
                    loads[key] = value
        limit = None
        if self.settings.uses_advised_threshold:
            reclaimed = self.settings.reserved_cpu_for_reclaimed_cores
            limit = shared_pools_limit(state, self._reserved, reclaimed)
        return LoadInputs(view, loads, limit, missing)

    def threshold_met(self) -> ThresholdMetAnswer:
        """``ThresholdMet`` of the load plugin.

        Raises:
            PressureUnavailable: a change of the eviction pool could not be committed.
        """
        now = self._now()
        self.counters["threshold_met_calls_total"] += 1
        self._resync()
        decision = threshold_met(self.history, self.settings, now)
        answer = decision.reply
        if answer.met_type != "NOT_MET":
            kind = "hard" if answer.met_type == "HARD_MET" else "soft"
            self.threshold_met_counts[(answer.pool, kind)] += 1
        self._commit(decision, "ThresholdMet", now, {})
        return answer

    def top_eviction_pods(self, pods: tuple[ActivePod, ...], top_n: int) -> TopEvictionAnswer:
        """``GetTopEvictionPods`` of the load plugin.

        Raises:
            PressureUnavailable: the state could not be read or the offer not committed.
        """
        now = self._now()
        self.counters["top_eviction_calls_total"] += 1
        inputs = TopInputs(pool_map(self._cpu_state()), pods, top_n)
        decision = top_eviction_pods(self.history, inputs, self.settings, now)
        self._commit(decision, "GetTopEvictionPods", now, inputs.to_json(), decision.reply.pod_uids)
        if decision.reply.pod_uids:
            self.counters["load_offers_total"] += len(decision.reply.pod_uids)
            _log.info(
                "load pressure in pool %s: offering %s for eviction",
                decision.reply.pool,
                ", ".join(decision.reply.pod_uids),
            )
        return decision.reply

    # -- the suppression plugin --------------------------------------------------------------

    def evict_pods(self, pods: tuple[ActivePod, ...]) -> EvictPodsAnswer:
        """``GetEvictPods`` of the suppression plugin.

        Raises:
            PressureUnavailable: the state could not be read or the timers not committed.
            SuppressionError: the CPU state has no reclaim pool (``get reclaim pool failed:
                pool not found``, the reference's text).
        """
        now = self._now()
        self.counters["suppression_calls_total"] += 1
        reclaim = self._cpu_state().pools.get("reclaim")
        inputs = SuppressionInputs(None if reclaim is None else reclaim.size(), pods)
        decision = evict_pods(self.history, inputs, self.settings, now, self._qos)
        offered = tuple(offer.pod_uid for offer in decision.reply.offers)
        self._commit(decision, "GetEvictPods", now, inputs.to_json(), offered)
        for offer in decision.reply.offers:
            self.counters["suppression_offers_total"] += 1
            _log.info("suppression: offering pod %s for eviction: %s", offer.pod_uid, offer.reason)
        return decision.reply

    # -- observability -----------------------------------------------------------------------

    def view(self) -> PressureView:
        """The section, its sequence number and the counters."""
        snapshot = self._durable.snapshot
        return PressureView(
            snapshot.state.cpu_pressure,
            snapshot.seq,
            dict(self.counters),
            dict(self.threshold_met_counts),
        )

    # -- plumbing ----------------------------------------------------------------------------

    def _resync(self) -> None:
        """After an unanswered commit, re-read the durable section before deciding again."""
        try:
            self._durable.resync_if_stale()
        except CommitRefused as err:
            raise PressureUnavailable(f"cannot re-read the durable state: {err}") from err

    def _cpu_state(self) -> CPUState:
        try:
            self._durable.resync_if_stale()
            return self._committer.latest().state.cpu
        except CommitRefused as err:
            raise PressureUnavailable(f"cannot read the CPU state: {err}") from err

    def _commit(
        self,
        decision: Decision[Any],
        command: str,
        now: float,
        inputs: dict[str, Any],
        offered: tuple[str, ...] = (),
    ) -> None:
        """Journal the decision's events with its inputs, or raise ``PressureUnavailable``.

        The cause names the offered pods (``pod_uids``; ``pod_uid`` too when there is one, so
        ``qrmd journal show --pod UID`` finds the record that offered it), the answer as the
        response sent (``answer``) and the pool it was chosen from (``pool``), if any.
        """
        for warning in decision.warnings:
            _log.info("%s: %s", command, warning)
        if not decision.events:
            return
        cause: dict[str, Any] = {
            "command": command,
            "now": now,
            "settings": self.settings.to_json(),
            "inputs": inputs,
        }
        if offered:
            cause["pod_uids"] = list(offered)
            if len(offered) == 1:
                cause["pod_uid"] = offered[0]
        reply = getattr(decision.reply, "to_json", None)
        if reply is not None:
            cause["answer"] = reply()
        pool = getattr(decision.reply, "pool", "")
        if pool:
            # The answer is the response as sent; the pool it was chosen from is not on the
            # wire (policy.cpu.pressure.answers), so the cause names it beside.
            cause["pool"] = pool
        try:
            # Blocking on the store from inside an actor: the StateStore never calls anyone,
            # so this wait cannot be part of a cycle (DESIGN.md, the commit protocol step 1).
            self._durable.commit(decision.events, cause)
        except (CommitRefused, CommitOutcomeUnknown) as err:
            self.counters["commit_failures_total"] += 1
            raise PressureUnavailable(
                f"{command}: the decision was not made durable: {err}"
            ) from err


class CPUPressureActor(pykka.ThreadingActor):
    """The pykka shell: one mailbox in front of a ``CPUPressureCore``.

    The ticker ``tell``s ``CollectLoad``; the plugins' gRPC threads ``ask`` with the RPC's
    remaining deadline, and the reply or the core's exception comes back through the future.
    """

    def __init__(self, core: CPUPressureCore) -> None:
        super().__init__()
        self.core = core

    def on_start(self) -> None:
        """Clear load rings from before the restart (``CPUPressureCore.start``)."""
        self.core.start()

    def on_receive(self, message: Any) -> Any:
        """Serve one command (see ``CPUPressureCore.handle``)."""
        return self.core.handle(message)
