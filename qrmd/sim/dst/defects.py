"""Planted defects: real mistakes switched on for one run, to show the simulation finds them.

A simulation that cannot fail proves nothing. Each defect here is a small, plausible change to
production behaviour, applied by patching one function for the duration of a run (production
code carries no switch) and undone afterwards:

* ``ack-before-fsync``: the journal acknowledges a record without fsyncing it (the write-ahead
  rule broken); a power loss then loses answers kubelet already has.
* ``stale-snapshot``: a writer commits but keeps the snapshot it held, so its next decisions and
  replies come from a state older than the durable one.
* ``no-rollback``: a failed append is not cut back, so the refused record stays in the segment
  and the next append lands after it.
* ``skip-dedicated-disjointness``: a NUMA node's available CPUs forget the dedicated ones
  already taken, on the hints and Allocate path, so two pods can get the same CPUs.
* ``count-empty-listing``: the residual check counts an empty pod listing as evidence (a
  restarting kubelet answers empty), so every pod the node runs looks residual and is removed.
* ``forget-unanswered-commit``: a writer whose commit went unanswered (a slow fsync past its
  timeout) forgets that the record may still land, so it never re-reads the durable state and
  decides the next call on a snapshot the disk has left behind.
* ``clear-timers-on-early-return``: the suppression plugin's ``GetEvictPods`` clears its
  tolerance timers when it returns early (no reclaimed pod in the request, an empty reclaim
  pool), where the reference keeps them; a pod over its tolerance then starts its minimum
  duration again after every such call, and is offered late or never.
* ``migrate-before-journal``: the memory balancer starts moving pages before its
  ``BalanceAdviceTaken`` is durable (the write-ahead rule broken); a crash then leaves pages
  moved for an advice the journal does not hold as taken, and it is handed out again.
* ``skip-missing-numa-sample``: a balance round leaves out a NUMA node whose metric sample is
  missing instead of failing (memory-balancer §4.1), and decides on the others.
* ``sidecar-before-main-pooled``: a dedicated pod's sidecar admitted before its main
  container is stored on the pooled CPUs, where the reference answers empty ("wait for the
  next reconcile", cpu-policy §7.5.2 step 1); the sidecar then never follows its main
  container's CPUs.
* ``remove-main-only``: RemovePod forgets the pod's main container only, as if a pod had one
  container; its sidecars stay behind until a residual round notices.
* ``resume-on-refusal``: a response refused while applying it (§11.8) still commits the switch
  back from request-based sizing (``AdvisorSizingResumed``) that was recorded before the
  failing stage, so the refusal changes the state.
* ``accept-stale-stream``: the AdvisorLink forgets to compare a response's stream attempt with
  the current one, so what a replaced stream's reader still delivers is applied after newer
  results.
* ``blocks-share-cpus``: block generation (§11.7 step 4) gives each NUMA-less block its CPUs
  but does not take them out of the available ones, so the next block (say ``reclaim`` after
  ``share``) gets the same CPUs.

The v0.5.47 node's own (``qrmd sim run --reference-version v0.5.47``):

* ``snb-pool-on-next-numa``: the pool sizing reads an SNB pool's NUMA off by one (0↔1, 2↔3),
  so ``share-NUMA0`` gets NUMA 1's CPUs: its containers run off the node they were hinted.
* ``ramp-on-snb-numa``: the ramp-up cpuset is no longer cut off the SNB pools' NUMA nodes
  (spec cpu-policy-v0.5.47 (c) 8), so a ramping shared pod runs beside the bound ones.
* ``rnb-whole-reclaim-pool``: a pool regeneration places a reclaimed container with a
  ``numa_hint`` on the whole reclaim pool, not its NUMA node's part.

``qrmd sim run --plant NAME`` and the tests switch one on; the CLI's help says it is for
checking the simulation itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import actors.checkers
import actors.cpu_pressure
import policy.cpu.advisor.blocks
import policy.cpu.advisor.decision
import policy.cpu.allocate
import policy.cpu.numa_pools
import policy.cpu.pool_apply
import policy.cpu.remove
import policy.cpu.rnb_allocate
import policy.cpu.snb
from actors.advisor_link import AdvisorLinkCore
from actors.memory_balancer import MemoryBalancerCore
from actors.ports.commit import AdoptedSnapshot
from actors.ports.migration import MigrationMode
from journal.syncer import Syncer
from journal.writer import Journal
from machines import advisor_link as link_machine
from policy.balance import MissingSample
from policy.balance.inputs import RoundInputs
from policy.cpu.advisor.decision import STAGE_APPLY, apply_advice
from policy.cpu.pressure import EvictPodsAnswer, PressureSettings, SuppressionInputs, evict_pods
from policy.cpu.pressure.pods import is_reclaimed
from policy.cpu.qos import QoSConfig, QoSError
from policy.cpu.remove import remove_container
from policy.cpu.residual_check import Listing, ResidualEvidence, observe_listing
from policy.decision import Decision
from policy.state.advisor_section import AdvisorSizingResumed
from policy.state.cpu_state import CPUState
from policy.state.entries import ANNOTATION_NUMA_HINT, RECLAIM_POOL, InPool, OwnCPUs
from policy.state.events import ContainerAllocated
from policy.state.pressure import PressureHistory
from policy.state.pressure.events import SuppressionTimersSet
from policy.state.sections import State
from policy.topology.cpuset import CPUSet
from policy.topology.selection import take_by_numa_balance

__all__ = ["DEFECTS", "planted"]


def _ack_before_fsync() -> tuple[Any, str, Any]:
    def sync_file(self: Syncer, fd: int, what: str) -> None:
        del self, fd, what  # acknowledged at once, never made durable

    return Syncer, "sync_file", sync_file


def _stale_snapshot() -> tuple[Any, str, Any]:
    original = AdoptedSnapshot.commit

    def commit(self: AdoptedSnapshot, events: Any, cause: Any) -> None:
        held = self.snapshot
        original(self, events, cause)
        self.snapshot = held  # the durable snapshot answered is dropped

    return AdoptedSnapshot, "commit", commit


def _no_rollback() -> tuple[Any, str, Any]:
    def roll_back(self: Journal, seq: int, cause: OSError) -> None:
        del self, seq, cause  # the failed record's bytes stay where they are

    return Journal, "_roll_back", roll_back


def _skip_dedicated_disjointness() -> tuple[Any, str, Any]:
    def numa_available(self: CPUState, numa: int, reserved: CPUSet) -> CPUSet:
        # Forgets ``~self.indexes.allocated_mask``: the CPUs dedicated containers hold.
        return self.topology.cpus_in_numa(numa).difference(reserved)

    return CPUState, "numa_available", numa_available


def _forget_unanswered_commit() -> tuple[Any, str, Any]:
    def commit(self: AdoptedSnapshot, events: Any, cause: Any) -> None:
        # The original sets ``self._stale`` on CommitOutcomeUnknown; this returns early
        # through the exception without it.
        self.snapshot = self._committer.commit(events, cause)

    return AdoptedSnapshot, "commit", commit


def _count_empty_listing() -> tuple[Any, str, Any]:
    def observe(
        previous: ResidualEvidence,
        state: CPUState,
        listing: Listing | None,
        sightings_to_removal: int,
    ) -> ResidualEvidence:
        if listing is not None and not listing.pod_uids:
            # The planted defect: the rule "an empty listing removes nothing" is bypassed by a
            # made-up uid, so the listing counts while it still lists none of the node's pods.
            listing = Listing(frozenset({"(empty)"}), listing.fetched_at)
        return observe_listing(previous, state, listing, sightings_to_removal)

    return actors.checkers, "observe_listing", observe


def _clear_timers_on_early_return() -> tuple[Any, str, Any]:
    def decide(
        history: PressureHistory,
        inputs: SuppressionInputs,
        settings: PressureSettings,
        now: float,
        qos: QoSConfig | None = None,
    ) -> Decision[EvictPodsAnswer]:
        decision = evict_pods(history, inputs, settings, now, qos)

        def reclaimed(pod: Any) -> bool:
            try:
                return is_reclaimed(qos or QoSConfig(), pod)
            except QoSError:
                return False

        early = not inputs.reclaim_pool_size or not any(map(reclaimed, inputs.active_pods))
        if early and history.tolerance_since:
            # The early return resets the timers it should have left alone.
            cleared = (SuppressionTimersSet(since=(), evicted=()),)
            return Decision(events=cleared, reply=decision.reply, warnings=decision.warnings)
        return decision

    return actors.cpu_pressure, "evict_pods", decide


def _sidecar_before_main_pooled() -> tuple[Any, str, Any]:
    original = policy.cpu.allocate._allocate_sidecar

    def allocate_sidecar(txn: Any, prepared: Any, now: float) -> Any:
        request = prepared.request
        state = txn.cpu
        if state.main_container_entry(request.pod_uid) is not None:
            return original(txn, prepared, now)
        # The planted defect: no main container yet, so the sidecar takes the pooled CPUs.
        pooled = state.pooled_cpus(state.pools.get("reserve", CPUSet()))
        entry = prepared.new_entry(now, OwnCPUs(pooled, pooled), ramp_up=False, owner="")
        txn.emit(ContainerAllocated(entry))
        return policy.cpu.allocate._pack(prepared, pooled)

    return policy.cpu.allocate, "_allocate_sidecar", allocate_sidecar


def _remove_main_only() -> tuple[Any, str, Any]:
    original = policy.cpu.remove._remove_pod_entries

    def remove_entries(txn: Any, ctx: Any, pod_uid: str) -> None:
        main = txn.cpu.main_container_entry(pod_uid)
        if main is None:
            original(txn, ctx, pod_uid)
            return
        remove_container(txn, ctx, pod_uid, main.container_name)

    return policy.cpu.remove, "_remove_pod_entries", remove_entries


def _resume_on_refusal() -> tuple[Any, str, Any]:
    original = apply_advice  # the function policy.cpu.decide calls, through its module

    def apply(state: State, response: Any, settings: Any, now: float) -> Any:
        decision = original(state, response, settings, now)
        outcome = decision.reply
        refused_applying = decision.error is not None and outcome.stage == STAGE_APPLY
        if refused_applying and decision.events and state.advisor.is_sized_by_requests():
            # The switch back emitted before the failing stage is kept with the refusal.
            events = (AdvisorSizingResumed(), *decision.events)
            return Decision(events, outcome, error=decision.error, warnings=decision.warnings)
        return decision

    return policy.cpu.advisor.decision, "apply_advice", apply


def _accept_stale_stream() -> tuple[Any, str, Any]:
    def current_stream(self: AdvisorLinkCore, attempt: int) -> bool:
        del attempt  # the attempt comparison forgotten: any stream's words count
        return self.state == link_machine.WATCHING

    return AdvisorLinkCore, "_current_stream", current_stream


def _blocks_share_cpus() -> tuple[Any, str, Any]:
    original = take_by_numa_balance  # the function policy.cpu.advisor.blocks calls

    def take(topology: Any, available: CPUSet, count: int) -> tuple[CPUSet, CPUSet]:
        cpus, _ = original(topology, available, count)
        return cpus, available  # the CPUs taken stay available to the next block

    return policy.cpu.advisor.blocks, "take_by_numa_balance", take


def _migrate_before_journal() -> tuple[Any, str, Any]:
    original = MemoryBalancerCore._take_advice

    def take_advice(self: MemoryBalancerCore, request: Any) -> Any:
        executor = self._ports.executor
        if executor is None:
            return original(self, request)
        real: Any = executor
        started: list[Any] = []

        class Early:
            """Starts each plan as soon as it is made, before the commit."""

            def plan(self, advice: Any, container_ids: Any) -> Any:
                plan = real.plan(advice, container_ids)
                if plan.mode is MigrationMode.EXECUTE:
                    real.start(plan)
                    started.append(plan)
                return plan

            def start(self, plan: Any) -> None:
                if plan not in started:
                    real.start(plan)

        self._ports = replace(self._ports, executor=Early())
        try:
            return original(self, request)
        finally:
            self._ports = replace(self._ports, executor=executor)

    return MemoryBalancerCore, "_take_advice", take_advice


def _skip_missing_numa_sample() -> tuple[Any, str, Any]:
    def numa_ids(self: RoundInputs) -> list[int]:
        return [
            n
            for n in self.distances
            if (m := self.numa_metrics.get(n)) is not None
            and not isinstance(m.read_latency, MissingSample)
            and not isinstance(m.read_write_bandwidth, MissingSample)
        ]

    return RoundInputs, "numa_ids", numa_ids


def _snb_pool_on_next_numa() -> tuple[Any, str, Any]:
    original = policy.cpu.snb.numa_of_pool  # the function policy.cpu.numa_pools calls

    def numa_of_pool(name: str) -> int | None:
        numa = original(name)
        return None if numa is None else numa ^ 1

    return policy.cpu.numa_pools, "numa_of_pool", numa_of_pool


def _ramp_on_snb_numa() -> tuple[Any, str, Any]:
    def snb_numa_cpus(ctx: Any, pools_cs: Any) -> CPUSet:
        del ctx, pools_cs
        return CPUSet()

    return policy.cpu.pool_apply, "_snb_numa_cpus", snb_numa_cpus


def _rnb_whole_reclaim_pool() -> tuple[Any, str, Any]:
    original = policy.cpu.rnb_allocate.reclaimed_placement  # what policy.cpu.pool_apply calls

    def reclaimed_placement(entry: Any, reclaim: CPUSet, non_actual: Any, state: Any) -> Any:
        placement = original(entry, reclaim, non_actual, state)
        if (entry.annotations or {}).get(ANNOTATION_NUMA_HINT):
            return InPool(RECLAIM_POOL)
        return placement

    return policy.cpu.pool_apply, "reclaimed_placement", reclaimed_placement


DEFECTS: dict[str, Callable[[], tuple[Any, str, Any]]] = {
    "ack-before-fsync": _ack_before_fsync,
    "stale-snapshot": _stale_snapshot,
    "no-rollback": _no_rollback,
    "skip-dedicated-disjointness": _skip_dedicated_disjointness,
    "forget-unanswered-commit": _forget_unanswered_commit,
    "count-empty-listing": _count_empty_listing,
    "clear-timers-on-early-return": _clear_timers_on_early_return,
    "sidecar-before-main-pooled": _sidecar_before_main_pooled,
    "remove-main-only": _remove_main_only,
    "resume-on-refusal": _resume_on_refusal,
    "accept-stale-stream": _accept_stale_stream,
    "blocks-share-cpus": _blocks_share_cpus,
    "migrate-before-journal": _migrate_before_journal,
    "skip-missing-numa-sample": _skip_missing_numa_sample,
    "snb-pool-on-next-numa": _snb_pool_on_next_numa,
    "ramp-on-snb-numa": _ramp_on_snb_numa,
    "rnb-whole-reclaim-pool": _rnb_whole_reclaim_pool,
}


@contextmanager
def planted(name: str | None) -> Iterator[None]:
    """Switch the defect ``name`` on for the ``with`` block (nothing when None).

    Raises:
        ValueError: an unknown defect (the message lists the known ones).
    """
    if name is None:
        yield
        return
    make = DEFECTS.get(name)
    if make is None:
        raise ValueError(f"unknown defect {name!r}; known: {', '.join(DEFECTS)}")
    owner, attribute, replacement = make()
    original = owner.__dict__[attribute]
    setattr(owner, attribute, replacement)
    try:
        yield
    finally:
        setattr(owner, attribute, original)
