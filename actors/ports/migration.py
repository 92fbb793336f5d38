"""The advice executor port: how the MemoryBalancer has its advice carried out (memory-balancer
§6.1, §11).

qrmd executes its own advices: there is no separate memory plugin, so the advisor delivery of
§11 becomes a hand-over from the MemoryBalancer to an ``AdviceExecutor``, in two steps so
that the journal holds what is about to be done before it is done (write-ahead):

1. ``plan(advice, container_ids)`` resolves each migrate container's cgroup and processes and
   decides what will happen: run the migration, only log it (dry run, the default), or drop
   it because a migration is still running (§11 step 1, the discard policy). It reads, never
   writes, and never raises: what it cannot resolve is in the plan.
2. The MemoryBalancer commits ``BalanceAdviceTaken`` with the plan in the record's cause,
   then calls ``start(plan)``, which carries it out on the executor's own worker (a dry run
   only logs) and returns at once. Failures are reported (log, counters, the result
   callback), never raised: a failed migration is never fatal to the daemon.

``qrmd.host.migrate`` implements it with ``migrate_pages(2)`` on cgroup ``cgroup.procs``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

from policy.balance import MemoryAdvice

__all__ = ["AdviceExecutor", "MigrationMode", "MigrationPlan", "PlannedTarget"]


class MigrationMode(StrEnum):
    """What ``start`` will do with a plan."""

    #: Migrate pages (``--memory-balance-execute=true``).
    EXECUTE = "execute"
    #: Log what would be migrated, touch nothing (the default).
    DRY_RUN = "dry_run"
    #: Nothing: a migration is still running, so the new advice is discarded (§11 step 1).
    DROPPED = "dropped"


@dataclass(frozen=True, slots=True)
class PlannedTarget:
    """One cgroup whose processes' pages on the source NUMA are to be migrated.

    Attributes:
        pod_uid: the pod.
        container_names: the advice's containers this cgroup stands for: one, or every
            container of the pod when their IDs are unknown and the pod's cgroup is used.
        cgroup: the memory cgroup directory; empty when it could not be resolved.
        pids: the processes in it (and in its descendants) when planned.
        dest_numas: NUMA nodes the containers may be moved to (their pool's NUMA list).
        error: why the cgroup or its processes could not be resolved; such a target is
            left out of the migration (§11 step 2).
        whole_pod: the cgroup is the pod's (container IDs unknown); its figure is the pod's
            hierarchical one.
    """

    pod_uid: str
    container_names: tuple[str, ...]
    cgroup: str
    pids: tuple[int, ...]
    dest_numas: tuple[int, ...]
    error: str = ""
    whole_pod: bool = False

    def to_json(self) -> dict[str, Any]:
        """The plain form, for the journal's cause."""
        return {
            "pod_uid": self.pod_uid,
            "container_names": list(self.container_names),
            "cgroup": self.cgroup,
            "pids": list(self.pids),
            "dest_numas": list(self.dest_numas),
            "error": self.error,
            "whole_pod": self.whole_pod,
        }


@dataclass(frozen=True, slots=True)
class MigrationPlan:
    """What an executor will do with one advice.

    Attributes:
        advice: the advice.
        mode: execute, dry run or dropped.
        targets: the resolved (and unresolved) cgroups, in advice order.
        reason: why the plan is dropped; empty otherwise.
    """

    advice: MemoryAdvice
    mode: MigrationMode
    targets: tuple[PlannedTarget, ...] = ()
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        """The plain form, for the journal's cause and the tick's report."""
        return {
            "mode": str(self.mode),
            "source_numa": self.advice.source_numa,
            "dest_numas": list(self.advice.dest_numa_list),
            "targets": [t.to_json() for t in self.targets],
            "reason": self.reason,
        }


@runtime_checkable
class AdviceExecutor(Protocol):
    """Carries out memory advices, one migration at a time (§11)."""

    def plan(
        self, advice: MemoryAdvice, container_ids: Mapping[tuple[str, str], str]
    ) -> MigrationPlan:
        """Resolve the advice's cgroups and processes and decide what ``start`` will do.

        Args:
            advice: the advice ``GetAdvices`` emitted.
            container_ids: ``(pod UID, container name)`` → container ID as the pod source
                reports it; a container absent from it is resolved through its pod's cgroup.

        Returns:
            The plan; it reads the host but changes nothing, and never raises.
        """
        ...

    def start(self, plan: MigrationPlan) -> None:
        """Carry out a plan from ``plan`` (or log it, for a dry run) and return at once.

        Never raises; the outcome is logged, counted and handed to the executor's result
        callback.
        """
        ...
