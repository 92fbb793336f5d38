"""The Allocator: the single writer of CPU state (DESIGN.md "Actors and messages", the commit
protocol; spec cpu-policy §6.2, §7, §8, §10, §12.4).

For every command it decides with the policy façade (``policy.cpu.facade``) on the state of the
snapshot it holds, which is always the durable state; if the decision has events it commits them
and adopts the snapshot the store answers with; only then does it reply. So kubelet never hears
of a placement the disk does not hold, and one mailbox gives a total order of decisions with no
locks. A refused commit leaves the snapshot as it was and fails the call with
``AllocatorUnavailable`` (kubelet retries; every call is idempotent). A commit with no answer
may still land, so the next command first re-reads the durable state.

Policy errors propagate unchanged. Allocate's finaliser (§7.2) is the one decision that both
commits and fails: its events (the container's removal) are committed, then its error raised.

``AllocatorCore`` is the behaviour, driven directly by unit tests; ``AllocatorActor`` is the thin
pykka shell around it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import pykka

from actors.allocator_cause import cause_of
from actors.allocator_messages import (
    Allocate,
    AllocatorCommand,
    AllocatorUnavailable,
    GetResourcePluginOptions,
    GetResourcesAllocation,
    GetTopologyAwareAllocatableResources,
    GetTopologyAwareResources,
    GetTopologyHints,
    PreStartContainer,
    RemovePod,
    RemoveResidualPods,
    ResidualRemoval,
    StartPolicy,
)
from actors.ports.commit import AdoptedSnapshot, CommitOutcomeUnknown, Committer
from actors.store_messages import CommitRefused, Snapshot
from policy.cpu import facade as cpu_policy
from policy.cpu.context import PolicyContext
from policy.decision import Decision

__all__ = ["AllocatorActor", "AllocatorCore"]

logger = logging.getLogger(__name__)

R = TypeVar("R")


class AllocatorCore:
    """Serves the Allocator's commands on the durable state; see the module docstring.

    Seams for later issues. The advisor link will hand the core a validated calculation result
    through a method of its own (decide with the policy's advisor application, commit, adopt,
    exactly as for an RPC); that method does not exist yet, as issue 4 asks for the seam only.
    The pod source is ``ctx.pod_phase``, "unknown" for every pod until a later issue injects one.

    Args:
        snapshot: the durable state to start from (the StateStore's, after recovery).
        ctx: topology, reserve and settings of the CPU policy.
        committer: where decisions are made durable.
        now_fn: the wall clock, seconds since the epoch (container timestamps, ramp-up).
    """

    def __init__(
        self,
        snapshot: Snapshot,
        ctx: PolicyContext,
        committer: Committer,
        now_fn: Callable[[], float],
    ) -> None:
        self._durable = AdoptedSnapshot(committer, snapshot)
        self.ctx = ctx
        self._now = now_fn
        # clearResidualState's consecutive sightings by pod uid (§12.4). Not CPU state: the
        # reference keeps it in memory too, and a restart merely starts the count again.
        self._residual_hits: Mapping[str, int] = {}

    @property
    def snapshot(self) -> Snapshot:
        """The durable state this actor holds (the store's last answer)."""
        return self._durable.snapshot

    def handle(self, command: AllocatorCommand) -> Any:
        """Serve one command: the Allocator's single dispatch.

        Args:
            command: one of ``actors.allocator_messages``' commands.

        Returns:
            The RPC's reply value (see each command), ``None`` where it answers nothing.

        Raises:
            AllocatorUnavailable: the decision could not be made durable; state unchanged.
            PolicyError: the policy refused the request (a subclass naming pod, container and
                reason); nothing committed, except Allocate's finaliser (§7.2).
            TypeError: ``command`` is not an Allocator command.
        """
        self._resync_if_stale()
        now = self._now()
        match command:
            case GetTopologyHints(request):
                return self._serve(command, now, cpu_policy.get_topology_hints, request)
            case Allocate(request):
                return self._serve(command, now, cpu_policy.allocate, request)
            case RemovePod(pod_uid):
                removal = cpu_policy.RemovePodRequest(pod_uid)
                return self._serve(command, now, cpu_policy.remove_pod, removal)
            case GetResourcesAllocation():
                return self._serve(command, now, cpu_policy.get_resources_allocation, None)
            case GetTopologyAwareResources(pod_uid, container_name):
                query = cpu_policy.TopologyAwareRequest(pod_uid, container_name)
                return self._serve(command, now, cpu_policy.get_topology_aware_resources, query)
            case GetTopologyAwareAllocatableResources():
                fn = cpu_policy.get_topology_aware_allocatable_resources
                return self._serve(command, now, fn, None)
            case GetResourcePluginOptions():
                return self._serve(command, now, cpu_policy.get_resource_plugin_options, None)
            case PreStartContainer(pod_uid, namespace, name, container):
                pre = cpu_policy.PreStartRequest(pod_uid, namespace, name, container)
                return self._serve(command, now, cpu_policy.pre_start_container, pre)
            case RemoveResidualPods(known_pod_uids):
                return self._remove_residual_pods(command, known_pod_uids, now)
            case StartPolicy():
                self._adopt(cpu_policy.start(self.snapshot.state, self.ctx), command, now)
                return None
        raise TypeError(f"the Allocator has no command {type(command).__name__}")

    def _serve(
        self,
        command: AllocatorCommand,
        now: float,
        decide: Callable[[Any, PolicyContext, Any, float], Decision[R]],
        request: Any,
    ) -> R:
        """Decide on the durable state, commit, adopt, then reply (or fail, §7.2)."""
        decision = decide(self.snapshot.state, self.ctx, request, now)
        self._adopt(decision, command, now)
        if decision.error is not None:
            raise decision.error
        return decision.reply

    def _adopt(
        self,
        decision: Decision[Any],
        command: AllocatorCommand,
        now: float,
        cause: Mapping[str, Any] | None = None,
    ) -> None:
        """Commit a decision's events (if any) and adopt the durable snapshot they give.

        ``cause`` defaults to the command itself (``cause_of``).
        """
        for warning in decision.warnings:
            logger.warning("%s: %s", type(command).__name__, warning)
        if not decision.events:
            return
        if cause is None:
            cause = cause_of(command, now)
        try:
            self._durable.commit(decision.events, cause)
        except CommitRefused as err:
            raise AllocatorUnavailable(
                f"{type(command).__name__} not committed ({len(decision.events)} events): {err}"
            ) from err
        except CommitOutcomeUnknown as err:
            raise AllocatorUnavailable(
                f"{type(command).__name__}: commit of {len(decision.events)} events "
                f"unconfirmed: {err}"
            ) from err

    def _resync_if_stale(self) -> None:
        """After an unanswered commit, re-read the durable state before deciding again."""
        try:
            self._durable.resync_if_stale()
        except CommitRefused as err:
            raise AllocatorUnavailable(f"cannot re-read the durable state: {err}") from err

    def _remove_residual_pods(
        self, command: RemoveResidualPods, known_pod_uids: Any, now: float
    ) -> ResidualRemoval:
        """Count one residual round, then remove the pods missing for ten rounds (§12.4)."""
        check = cpu_policy.ResidualCheck(self._residual_hits, known_pod_uids)
        count = cpu_policy.residual_round(self.snapshot.state, self.ctx, check, now).reply
        # Keep the count even if the removal below is not committed: the candidates stay
        # candidates and are removed at the next round.
        self._residual_hits = count.hit_map
        if not count.candidates:
            return ResidualRemoval((), ())
        decision = cpu_policy.remove_residual_pods(
            self.snapshot.state, self.ctx, count.candidates, now
        )
        # The removal's input is the candidates, not the whole pod listing of this round.
        cause = {"rpc": "RemoveResidualPods", "now": now, "pod_uids": list(count.candidates)}
        self._adopt(decision, command, now, cause)
        return ResidualRemoval(count.candidates, decision.warnings)


class AllocatorActor(pykka.ThreadingActor):
    """The pykka shell: one mailbox in front of an ``AllocatorCore``.

    gRPC threads ``ask`` it with the RPC's remaining deadline; the reply or the core's
    exception comes back through the future.
    """

    def __init__(self, core: AllocatorCore) -> None:
        super().__init__()
        self.core = core

    def on_receive(self, message: Any) -> Any:
        """Serve one command (see ``AllocatorCore.handle``)."""
        return self.core.handle(message)
