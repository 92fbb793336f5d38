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
from actors.memory_balancer import MemoryBalancerCore
from actors.ports.commit import AdoptedSnapshot
from actors.ports.migration import MigrationMode
from journal.syncer import Syncer
from journal.writer import Journal
from policy.balance import MissingSample
from policy.balance.inputs import RoundInputs
from policy.cpu.pressure import EvictPodsAnswer, PressureSettings, SuppressionInputs, evict_pods
from policy.cpu.pressure.pods import is_reclaimed
from policy.cpu.qos import QoSConfig, QoSError
from policy.cpu.residual_check import Listing, ResidualEvidence, observe_listing
from policy.decision import Decision
from policy.state.cpu_state import CPUState
from policy.state.pressure import PressureHistory
from policy.state.pressure.events import SuppressionTimersSet
from policy.topology.cpuset import CPUSet

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


DEFECTS: dict[str, Callable[[], tuple[Any, str, Any]]] = {
    "ack-before-fsync": _ack_before_fsync,
    "stale-snapshot": _stale_snapshot,
    "no-rollback": _no_rollback,
    "skip-dedicated-disjointness": _skip_dedicated_disjointness,
    "forget-unanswered-commit": _forget_unanswered_commit,
    "count-empty-listing": _count_empty_listing,
    "clear-timers-on-early-return": _clear_timers_on_early_return,
    "migrate-before-journal": _migrate_before_journal,
    "skip-missing-numa-sample": _skip_missing_numa_sample,
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
