"""The Allocator: the single writer of CPU state (DESIGN.md "Actors and messages", the commit
protocol; spec cpu-policy §6.2, §7, §8, §10, §12.4).

For every command it gathers the decision's inputs (the call, and for Allocate what its pod
source says of the pod, §7.3 step 3a), decides with the policy façade (``policy.cpu.facade``)
on the state of the snapshot it holds, which is always the durable state; if the decision has
events it commits them with the inputs as the record's cause (``policy.cpu.cause``) and
adopts the snapshot the store answers with; only then does it reply. So kubelet never hears of
a placement the disk does not hold, one mailbox gives a total order of decisions with no locks,
and every committed decision can be re-run from its record (``qrmd.offline.decision_rerun``). A
refused commit leaves the snapshot as it was and fails the call with ``AllocatorUnavailable``
(kubelet retries; every call is idempotent). A commit with no answer may still land, so the
next command first re-reads the durable state.

GetResourcesAllocation is kubelet's reconcile, and it must keep working on a full disk: when the
commit of what it settles (ramp-ups that ended, §10.1) is refused, it answers from the snapshot
it holds — the durable state, since a refused commit persisted nothing — with the containers
still ramping, and the next call settles them again.

Policy errors propagate unchanged. Allocate's finaliser (§7.2) is the one decision that both
commits and fails: its events (the container's removal) are committed, then its error raised.

With sys-advisor enabled, the core also serves the link's messages and calls the advisor around
Allocate and RemovePod (``actors.allocator_advisor``); every pool-sizing decision then uses
``sizing_context`` (pools sized by requests while the fallback is in force).

``AllocatorCore`` is the behaviour, driven directly by unit tests; ``AllocatorActor`` is the thin
pykka shell around it; ``policy.cpu.decide.decide`` is the one table from inputs to façade
function, shared with the re-run of journaled decisions.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pykka

from actors.advisor_messages import AdvisorLinkChanged, ApplyAdvice, CheckAdvisorSilence
from actors.allocator_messages import (
    Allocate,
    AllocatorCommand,
    AllocatorUnavailable,
    CommandGroup,
    GetResourcePluginOptions,
    GetResourcesAllocation,
    GetTopologyAwareAllocatableResources,
    GetTopologyAwareResources,
    GetTopologyHints,
    GroupOutcome,
    PreStartContainer,
    RemovePod,
    RemoveResidualPods,
    ResidualRemoval,
    StartPolicy,
)
from actors.ports.commit import (
    AdoptedSnapshot,
    CommitOutcomeUnknown,
    Committer,
    GroupCommitter,
)
from actors.ports.pod_source import NoPodSource, PodSource
from actors.store_messages import CommitRefused, Snapshot
from policy.cpu import facade as cpu_policy
from policy.cpu.allocation_listing import ResourcesAllocation
from policy.cpu.cause import DecisionInputs, ResidualPods, cause_of, reply_of
from policy.cpu.commands import AllocateInputs, PodPhase
from policy.cpu.context import PolicyContext
from policy.cpu.decide import decide
from policy.cpu.reference import REFERENCE_CAUSE_KEY, reference_cause
from policy.cpu.residual_check import ResidualEvidence
from policy.cpu.residual_removal import residual_candidates
from policy.decision import Decision

if TYPE_CHECKING:
    # Only with sys-advisor (qrmd.advisor builds them): a node without it never loads them.
    from actors.allocator_advisor import AdvisorCalls, AdvisorMessage

__all__ = ["AllocatorActor", "AllocatorCore", "pod_phase"]

logger = logging.getLogger(__name__)


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

    Args:
        snapshot: the durable state to start from (the StateStore's, after recovery).
        ctx: topology, reserve and settings of the CPU policy.
        committer: where decisions are made durable.
        now_fn: the wall clock, seconds since the epoch (container timestamps, ramp-up).
        pods: the pod source; by default none, so every pod is unknown (as the reference
            behaves when it cannot see pods).
        advisor: the advisor calls, with ``--enable-cpu-advisor`` (then ``ctx`` has
            ``advisor_enabled``); without it the link's messages are ignored.
    """

    def __init__(
        self,
        snapshot: Snapshot,
        ctx: PolicyContext,
        committer: Committer,
        now_fn: Callable[[], float],
        pods: PodSource | None = None,
        *,
        advisor: AdvisorCalls | None = None,
    ) -> None:
        self._durable = AdoptedSnapshot(committer, snapshot)
        # Group commit needs a committer that can group (the StateStore's in-turn one).
        self._grouper = committer if isinstance(committer, GroupCommitter) else None
        self.ctx = ctx
        self._now = now_fn
        self._pods: PodSource = pods or NoPodSource()
        self.advisor = advisor
        # Set while GetResourcesAllocation answers as is because its commits are refused.
        self._reconcile_refused = False
        # The last listing answered: the next one reuses the parts of the pods that did not
        # change (policy.cpu.listing_parts). It holds only the pods it lists.
        self._listing: ResourcesAllocation | None = None

    @property
    def snapshot(self) -> Snapshot:
        """The durable state this actor holds (the store's last answer)."""
        return self._durable.snapshot

    def handle(self, command: AllocatorCommand | AdvisorMessage) -> Any:
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
                reply = self._serve(command, AllocateInputs(command, pod), now)
                if self.advisor is not None:
                    self.advisor.after_allocate(command, self.snapshot.state, self._decide, now)
                return reply
            case RemovePod():
                if self.advisor is not None:
                    self.advisor.before_remove_pod(command)
                return self._serve(command, command, now)
            case ApplyAdvice() | AdvisorLinkChanged() | CheckAdvisorSilence():
                return self._serve_link(command, now)
            case RemoveResidualPods(evidence):
                return self._remove_residual_pods(command, evidence, now)
            case CommandGroup():
                return self._serve_group(command.commands)
            case GetResourcesAllocation():
                return self._reconcile(command, now)
            case (
                GetTopologyHints()
                | GetTopologyAwareResources()
                | GetTopologyAwareAllocatableResources()
                | GetResourcePluginOptions()
                | PreStartContainer()
                | StartPolicy()
            ):
                # These commands read nothing but themselves: each is its own inputs.
                return self._serve(command, command, now)
        raise TypeError(f"the Allocator has no command {type(command).__name__}")

    def _serve_group(
        self, commands: tuple[Allocate | RemovePod | GetTopologyHints, ...]
    ) -> tuple[GroupOutcome, ...]:
        """Serve a group of kubelet calls with one fsync (``CommandGroup``'s rules).

        Each command is served as on its own (``handle``), its commit writing its record on
        the state the ones before it left; one sync then makes them all durable, and the
        outcomes are returned only after it. A failed sync, or a write whose failure cut the
        group's earlier records back, fails every command of the group: each answer was
        decided on records that are not on disk.
        """
        grouper = self._grouper
        if grouper is None or self.advisor is not None or len(commands) == 1:
            return tuple(self._outcome(command) for command in commands)
        outcomes: list[GroupOutcome] = []
        failure: str | None = None
        with grouper.group():
            for command in commands:
                outcomes.append(self._outcome(command))
                if grouper.broken:
                    failure = "a write of the group failed; none of its records was acknowledged"
                    break
            if failure is None:
                try:
                    self._durable.snapshot = grouper.sync()
                except (CommitRefused, CommitOutcomeUnknown) as err:
                    failure = str(err)
        if failure is None:
            return tuple(outcomes)
        # Nothing of the group is (known to be) durable: back to the published state.
        self._durable.snapshot = grouper.latest()
        error = AllocatorUnavailable(f"group of {len(commands)} calls not committed: {failure}")
        return tuple(GroupOutcome(error=error) for _ in commands)

    def _outcome(self, command: AllocatorCommand) -> GroupOutcome:
        """One command served, its reply or its exception as a value."""
        try:
            return GroupOutcome(reply=self.handle(command))
        except Exception as err:  # every exception is the caller's answer, as an ask's is
            return GroupOutcome(error=err)

    def _serve(self, command: AllocatorCommand, inputs: DecisionInputs, now: float) -> Any:
        """Decide on the durable state, commit, adopt, then reply (or fail, §7.2)."""
        decision = decide(self.snapshot.state, inputs, self.ctx, now)
        self._adopt(decision, command, inputs, now)
        if decision.error is not None:
            raise decision.error
        return decision.reply

    def _decide(self, inputs: DecisionInputs, now: float) -> Decision[Any]:
        """Decide on the durable state and commit; the decision's ``error`` is the caller's."""
        decision = decide(self.snapshot.state, inputs, self.ctx, now)
        self._adopt(decision, inputs, inputs, now)
        return decision

    def _serve_link(self, message: AdvisorMessage, now: float) -> None:
        """One of the link's messages. They are told, so a failure is logged, never raised:
        an exception in a told message would stop the actor (pykka's rule)."""
        if self.advisor is None:
            logger.debug("sys-advisor disabled: %s ignored", type(message).__name__)
            return
        try:
            self.advisor.handle(message, self._decide, now)
        except AllocatorUnavailable as err:
            logger.warning("%s not committed: %s", type(message).__name__, err)

    def _reconcile(self, command: GetResourcesAllocation, now: float) -> Any:
        """GetResourcesAllocation: settle and commit; on a refused commit, answer as is."""
        decision = decide(self.snapshot.state, command, self.ctx, now, self._listing)
        try:
            self._commit(decision, command, command, now)
        except CommitRefused as err:
            # Nothing was persisted, so the snapshot held is the durable state: its listing is
            # a true answer. Warn once per episode: kubelet asks every few seconds.
            if not self._reconcile_refused:
                logger.warning(
                    "GetResourcesAllocation: %d events not committed, answering from the state "
                    "as it is (ramp-ups stay pending until a commit succeeds): %s",
                    len(decision.events),
                    err,
                )
            self._reconcile_refused = True
            as_is = cpu_policy.get_resources_allocation_as_is
            # The refused listing differs from the durable state's only in the containers it
            # settled: reuse its parts.
            listed = as_is(self.snapshot.state, command, self.ctx, now, decision.reply).reply
            self._listing = listed
            return listed
        except CommitOutcomeUnknown as err:
            # The record may be on disk: the held state is not known to be the durable one.
            raise AllocatorUnavailable(
                f"GetResourcesAllocation: commit of {len(decision.events)} events "
                f"unconfirmed: {err}"
            ) from err
        if self._reconcile_refused and decision.events:
            logger.info("GetResourcesAllocation: settled again, the commit succeeded")
            self._reconcile_refused = False
        listed = decision.reply
        self._listing = listed
        return listed

    def _adopt(
        self,
        decision: Decision[Any],
        command: object,
        inputs: DecisionInputs,
        now: float,
    ) -> None:
        """Commit a decision's events (if any), its inputs as the cause, and adopt the result."""
        try:
            self._commit(decision, command, inputs, now)
        except CommitRefused as err:
            raise AllocatorUnavailable(
                f"{type(command).__name__} not committed ({len(decision.events)} events): {err}"
            ) from err
        except CommitOutcomeUnknown as err:
            raise AllocatorUnavailable(
                f"{type(command).__name__}: commit of {len(decision.events)} events "
                f"unconfirmed: {err}"
            ) from err

    def _commit(
        self,
        decision: Decision[Any],
        command: object,
        inputs: DecisionInputs,
        now: float,
    ) -> None:
        """Log the decision's warnings, commit its events (if any) and adopt the snapshot.

        Raises:
            CommitRefused: nothing was persisted; the held snapshot is still right.
            CommitOutcomeUnknown: no answer; the next command re-reads the durable state.
        """
        for warning in decision.warnings:
            logger.warning("%s: %s", type(command).__name__, warning)
        if decision.events:
            # The cause keeps what kubelet is about to be answered, so forensics shows the
            # answer itself (``policy.cpu.cause``, "The reply").
            cause = cause_of(inputs, now, reply_of(inputs, decision))
            if self.ctx.at_v0_5_47:
                # The level and its options are inputs too: a re-run decides as v0.5.47.
                cause[REFERENCE_CAUSE_KEY] = reference_cause(
                    self.ctx.reference_version, self.ctx.reference
                )
            self._durable.commit(decision.events, cause)

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
        only count of sightings. Candidates the state no longer holds commit nothing. With
        sys-advisor, its RemovePod goes first for each candidate, through the path kubelet's
        RemovePod takes (``AdvisorCalls.residual_removals``): the pods it refuses are part of
        the inputs and are kept (due again at the next round); a sick advisor refuses none.
        """
        candidates = residual_candidates(self.snapshot.state.cpu, evidence)
        if not candidates:
            return ResidualRemoval((), ())
        refused: tuple[str, ...] = ()
        if self.advisor is not None:
            removable = set(self.advisor.residual_removals(candidates))
            refused = tuple(uid for uid in candidates if uid not in removable)
        inputs = ResidualPods(evidence, refused)
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
