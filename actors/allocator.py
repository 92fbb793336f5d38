"""The Allocator: the single writer of CPU state (DESIGN.md "Actors and messages", the commit
protocol; spec cpu-policy §6.2, §7, §8, §10, §12.4).

For every command it gathers the decision's inputs (the call, and for Allocate what its pod
source says of the pod, §7.3 step 3a), decides with the policy façade (``policy.cpu.facade``)
on the state of the snapshot it holds, which is always the durable state; if the decision has
events it commits them with the inputs as the record's cause (``actors.allocator_cause``) and
adopts the snapshot the store answers with; only then does it reply. So kubelet never hears of
a placement the disk does not hold, one mailbox gives a total order of decisions with no locks,
and every committed decision can be re-run from its record (``actors.decision_rerun``). A
refused commit leaves the snapshot as it was and fails the call with ``AllocatorUnavailable``
(kubelet retries; every call is idempotent). A commit with no answer may still land, so the
next command first re-reads the durable state.

Policy errors propagate unchanged. Allocate's finaliser (§7.2) is the one decision that both
commits and fails: its events (the container's removal) are committed, then its error raised.

``AllocatorCore`` is the behaviour, driven directly by unit tests; ``AllocatorActor`` is the thin
pykka shell around it; :func:`decide` is the one table from inputs to façade function, shared
with the re-run of journaled decisions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pykka

from actors.allocator_cause import DecisionInputs, ResidualPods, cause_of
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
from actors.ports.pod_source import NoPodSource, PodSource
from actors.store_messages import CommitRefused, Snapshot
from policy.cpu import facade as cpu_policy
from policy.cpu.commands import AllocateInputs, PodPhase
from policy.cpu.context import PolicyContext
from policy.cpu.residual_check import ResidualEvidence
from policy.cpu.residual_removal import residual_candidates
from policy.decision import Decision
from policy.state.sections import State

__all__ = ["AllocatorActor", "AllocatorCore", "decide", "pod_phase"]

logger = logging.getLogger(__name__)


def decide(
    state: State, inputs: DecisionInputs, settings: PolicyContext, now: float
) -> Decision[Any]:
    """Call the façade function that decides ``inputs``: the one table for live and re-run.

    Args:
        state: the state to decide on (the durable one, or the one replayed before a record).
        inputs: the decision's inputs (a command that is its own inputs, ``AllocateInputs``,
            or ``ResidualPods``).
        settings: the fixed context.
        now: the wall time the decision is taken at.

    Returns:
        The decision.

    Raises:
        PolicyError: the policy refused (see ``policy.cpu.facade``); nothing to commit.
        TypeError: ``inputs`` is not one of the Allocator's decision inputs.
    """
    match inputs:
        case AllocateInputs():
            return cpu_policy.allocate(state, inputs, settings, now)
        case GetTopologyHints():
            return cpu_policy.get_topology_hints(state, inputs, settings, now)
        case RemovePod():
            return cpu_policy.remove_pod(state, inputs, settings, now)
        case GetResourcesAllocation():
            return cpu_policy.get_resources_allocation(state, inputs, settings, now)
        case GetTopologyAwareResources():
            return cpu_policy.get_topology_aware_resources(state, inputs, settings, now)
        case GetTopologyAwareAllocatableResources():
            fn = cpu_policy.get_topology_aware_allocatable_resources
            return fn(state, inputs, settings, now)
        case GetResourcePluginOptions():
            return cpu_policy.get_resource_plugin_options(state, inputs, settings, now)
        case PreStartContainer():
            return cpu_policy.pre_start_container(state, inputs, settings, now)
        case StartPolicy():
            return cpu_policy.start(state, settings)
        case ResidualPods():
            return cpu_policy.remove_residual_pods(state, inputs, settings, now)
    raise TypeError(f"the Allocator decides no inputs of type {type(inputs).__name__}")


def pod_phase(source: PodSource, pod_uid: str, now: float) -> PodPhase:
    """What ``source`` says of a pod now, as a decision input (§7.3 step 3a).

    Args:
        source: the pod source.
        pod_uid: the pod.
        now: the decision's wall time (the listing's age is ``now - fetched_at``).

    Returns:
        The listed phase and the listing's age; unknown (with the age) when the listing
        does not hold the pod; unknown with no age when there is no listing.
    """
    listing = source.latest()
    if listing is None:
        return PodPhase()
    phase = listing.phase_of(pod_uid)
    age = now - listing.fetched_at
    return PodPhase(listing_age_s=age) if phase is None else PodPhase(phase, age)


class AllocatorCore:
    """Serves the Allocator's commands on the durable state; see the module docstring.

    A seam, not a stub (DESIGN.md "Time, config, errors"): the advisor link will hand the core
    a validated calculation result through a method of its own (decide with the policy's
    advisor application, commit, adopt, exactly as for an RPC; spec cpu-policy §11.8); that
    method does not exist yet.

    Args:
        snapshot: the durable state to start from (the StateStore's, after recovery).
        ctx: topology, reserve and settings of the CPU policy.
        committer: where decisions are made durable.
        now_fn: the wall clock, seconds since the epoch (container timestamps, ramp-up).
        pods: the pod source; by default none, so every pod is unknown (as the reference
            behaves when it cannot see pods).
    """

    def __init__(
        self,
        snapshot: Snapshot,
        ctx: PolicyContext,
        committer: Committer,
        now_fn: Callable[[], float],
        pods: PodSource | None = None,
    ) -> None:
        self._durable = AdoptedSnapshot(committer, snapshot)
        self.ctx = ctx
        self._now = now_fn
        self._pods: PodSource = pods or NoPodSource()

    @property
    def snapshot(self) -> Snapshot:
        """The durable state this actor holds (the store's last answer)."""
        return self._durable.snapshot

    def handle(self, command: AllocatorCommand) -> Any:
        """Serve one command: the Allocator's single dispatch.

        Args:
            command: one of ``actors.allocator_messages``' commands.

        Returns:
            The reply the command's type names (``PluginCall[R]``), ``None`` where it
            answers nothing.

        Raises:
            AllocatorUnavailable: the decision could not be made durable; state unchanged.
            PolicyError: the policy refused the request (a subclass naming pod, container and
                reason); nothing committed, except Allocate's finaliser (§7.2).
            TypeError: ``command`` is not an Allocator command.
        """
        self._resync_if_stale()
        now = self._now()
        match command:
            case Allocate(request):
                pod = pod_phase(self._pods, request.pod_uid, now)
                return self._serve(command, AllocateInputs(command, pod), now)
            case RemoveResidualPods(evidence):
                return self._remove_residual_pods(command, evidence, now)
            case (
                GetTopologyHints()
                | RemovePod()
                | GetResourcesAllocation()
                | GetTopologyAwareResources()
                | GetTopologyAwareAllocatableResources()
                | GetResourcePluginOptions()
                | PreStartContainer()
                | StartPolicy()
            ):
                # These commands read nothing but themselves: each is its own inputs.
                return self._serve(command, command, now)
        raise TypeError(f"the Allocator has no command {type(command).__name__}")

    def _serve(self, command: AllocatorCommand, inputs: DecisionInputs, now: float) -> Any:
        """Decide on the durable state, commit, adopt, then reply (or fail, §7.2)."""
        decision = decide(self.snapshot.state, inputs, self.ctx, now)
        self._adopt(decision, command, inputs, now)
        if decision.error is not None:
            raise decision.error
        return decision.reply

    def _adopt(
        self,
        decision: Decision[Any],
        command: AllocatorCommand,
        inputs: DecisionInputs,
        now: float,
    ) -> None:
        """Commit a decision's events (if any), its inputs as the cause, and adopt the result."""
        for warning in decision.warnings:
            logger.warning("%s: %s", type(command).__name__, warning)
        if not decision.events:
            return
        try:
            self._durable.commit(decision.events, cause_of(inputs, now))
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
        self, command: RemoveResidualPods, evidence: ResidualEvidence, now: float
    ) -> ResidualRemoval:
        """Remove the pods the checker's evidence calls due, in one decision (§12.4 step 4).

        The evidence is the decision's input and its journaled cause; the checker keeps the
        only count of sightings. Candidates the state no longer holds commit nothing.
        """
        candidates = residual_candidates(self.snapshot.state.cpu, evidence)
        if not candidates:
            return ResidualRemoval((), ())
        inputs = ResidualPods(evidence)
        decision = decide(self.snapshot.state, inputs, self.ctx, now)
        self._adopt(decision, command, inputs, now)
        outcome = decision.reply
        return ResidualRemoval(outcome.removed, decision.warnings, outcome.kept)


class AllocatorActor(pykka.ThreadingActor):
    """The pykka shell: one mailbox in front of an ``AllocatorCore``.

    gRPC threads ``ask`` it with the RPC's remaining deadline (``wire.resource_plugin``'s
    typed ``ask_allocator``); the reply or the core's exception comes back through the future.
    """

    def __init__(self, core: AllocatorCore) -> None:
        super().__init__()
        self.core = core

    def on_receive(self, message: Any) -> Any:
        """Serve one command (see ``AllocatorCore.handle``)."""
        return self.core.handle(message)
