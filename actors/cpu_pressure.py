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

``GetEvictPods`` follows the reference level: at v0.5.3 the pool's size is the supply
(``policy.cpu.pressure.suppression``); at v0.5.47 each part of the reclaim pool is judged
against the CPU it can supply, read through the ``ReclaimMetricsSource`` port
(``policy.cpu.pressure.suppression_numa``), and the cause records the level under
``reference`` (``policy.cpu.reference.reference_cause``) with the parts' samples in
``inputs``, so a re-run takes the same decision.

At start, a section holding load rings from before the restart has them cleared (one
``LoadHistoryCleared("restart")``): the reference keeps its rings in memory, so a restarted
plugin judges only load sampled after it started. The cool-down and the tolerance timers are
kept (the reference loses them too; keeping them can only delay an eviction, never add one).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping
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
from actors.ports.reclaim_metrics import CgroupCPU, MissingMetric, ReclaimMetricsSource
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
from policy.cpu.pressure.suppression_numa import (
    NON_BOUND,
    NUMASuppressionInputs,
    ReclaimPart,
    ReclaimSample,
    evict_pods_by_numa,
    numa_reclaim_cgroups,
    reclaim_parts,
)
from policy.cpu.qos import QoSConfig
from policy.cpu.reference import (
    DEFAULT_REFERENCE_VERSION,
    REFERENCE_CAUSE_KEY,
    ReferenceOptions,
    is_v0_5_47,
    reference_cause,
)
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
    """What the core reads besides the state: containers' load and, at v0.5.47, the reclaim
    pool's metrics (None: the suppression plugin's v0.5.47 calls fail, naming it)."""

    loads: ContainerLoadSource
    reclaim: ReclaimMetricsSource | None = None


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
        reference_version: the Katalyst release reproduced (the suppression rule).
        reference: the v0.5.47 options, recorded with a v0.5.47 decision.
        reclaim_root: the reclaimed pods' root cgroup (``--reclaim-relative-root-cgroup-path``).
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
        reference_version: str = DEFAULT_REFERENCE_VERSION,
        reference: ReferenceOptions | None = None,
        reclaim_root: str = "/kubepods/besteffort",
    ) -> None:
        self._durable = AdoptedSnapshot(committer, snapshot)
        self._committer = committer
        self._ports = ports
        self.settings = settings
        self._reserved = reserved
        self._now = now_fn
        self._qos = qos or QoSConfig()
        self._reference_version = reference_version
        self._reference = reference or ReferenceOptions()
        self._reclaim_root = reclaim_root
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
        state = self._cpu_state()
        if is_v0_5_47(self._reference_version):
            return self._evict_pods_by_numa(state, pods, now)
        reclaim = state.pools.get("reclaim")
        inputs = SuppressionInputs(None if reclaim is None else reclaim.size(), pods)
        decision = evict_pods(self.history, inputs, self.settings, now, self._qos)
        offered = tuple(offer.pod_uid for offer in decision.reply.offers)
        self._commit(decision, "GetEvictPods", now, inputs.to_json(), offered)
        self._tell_offers(decision.reply)
        return decision.reply

    def _evict_pods_by_numa(
        self, state: CPUState, pods: tuple[ActivePod, ...], now: float
    ) -> EvictPodsAnswer:
        """``GetEvictPods`` at v0.5.47: the parts sampled, decided, journaled, answered.

        Raises:
            PressureUnavailable: the timers were not committed.
            SuppressionError: no reclaim pool, or a part's metrics could not be read (``get
                reclaim metrics failed: <why>``, after the timers changed so far are kept).
        """
        reclaim = state.pools.get("reclaim")
        size = None if reclaim is None else reclaim.size()
        parts: tuple[ReclaimPart, ...] = ()
        if self.settings.enable_suppression_eviction and size:
            parts = self._reclaim_parts(state)
        inputs = NUMASuppressionInputs(size, parts, pods)
        decision = evict_pods_by_numa(self.history, inputs, self.settings, now, self._qos)
        offered = tuple(offer.pod_uid for offer in decision.reply.offers)
        extra = {REFERENCE_CAUSE_KEY: reference_cause(self._reference_version, self._reference)}
        self._commit(decision, "GetEvictPods", now, inputs.to_json(), offered, extra=extra)
        if decision.error is not None:
            raise decision.error
        self._tell_offers(decision.reply)
        return decision.reply

    def _reclaim_parts(self, state: CPUState) -> tuple[ReclaimPart, ...]:
        """The non-bound part and each NUMA part whose ``<root>-<numa>`` cgroup exists, with
        what the metrics port read of them in one window (``GetReclaimMetrics``)."""
        source = self._ports.reclaim
        numas = state.topology.numa_masks()
        cgroups = {NON_BOUND: self._reclaim_root}
        if source is not None:
            for numa, path in numa_reclaim_cgroups(self._reclaim_root, numas).items():
                if source.cgroup_exists(path):
                    cgroups[numa] = path
        layout = reclaim_parts(state, [n for n in cgroups if n != NON_BOUND])
        if source is None:
            why = "no reclaim metrics source (--reclaim-metrics-source)"
            return tuple(ReclaimPart(n, cpus.size(), None, why) for n, cpus in layout)
        reading = source.read([cgroups[n] for n, _ in layout])
        parts = []
        for numa, cpus in layout:
            cgroup = reading.cgroups.get(cgroups[numa], MissingMetric("not read"))
            cores = reading.core_usage
            if isinstance(cores, MissingMetric):
                parts.append(ReclaimPart(numa, cpus.size(), None, cores.reason))
            elif isinstance(cgroup, MissingMetric):
                parts.append(ReclaimPart(numa, cpus.size(), None, cgroup.reason))
            else:
                parts.append(ReclaimPart(numa, cpus.size(), _sample(cpus, cores, cgroup)))
        return tuple(parts)

    def _tell_offers(self, answer: EvictPodsAnswer) -> None:
        for offer in answer.offers:
            self.counters["suppression_offers_total"] += 1
            _log.info("suppression: offering pod %s for eviction: %s", offer.pod_uid, offer.reason)

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
        *,
        extra: dict[str, Any] | None = None,
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
            **(extra or {}),
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


def _sample(cpus: CPUSet, cores: Mapping[int, float], cgroup: CgroupCPU) -> ReclaimSample:
    """A part's ``GetReclaimMetrics`` inputs: its CPUs' usage summed (a CPU without a figure
    adds nothing, as ``AggregateCoreMetric``), the cgroup's usage, quota and period."""
    used = sum(cores.get(cpu, 0.0) for cpu in cpus)
    return ReclaimSample(used, cgroup.usage, cgroup.cfs_quota, cgroup.cfs_period)


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
