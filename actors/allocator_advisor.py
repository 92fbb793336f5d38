"""The Allocator's side of the sys-advisor link (cpu-policy §7.2, §10.6, §11.5; DESIGN.md
"AdvisorLink"; the issue's deliberate deviation for a sick advisor).

What the Allocator does with the advisor, all inside its one mailbox, so each advisor response
is ordered with kubelet's calls exactly as it arrived:

* **ApplyAdvice** — decide the response with ``apply_advice`` (through the shared ``decide``
  table), commit it with the response as the cause (a refusal is journaled too), then report
  the outcome: the link's figures (``LinkStats.record_outcome``), the
  ``communicate_with_advisor`` health check (Ready when applied, NotReady with the reason when
  refused, §11.2 step 6), a log line for every refusal and for the switch back to the advisor.
* **CheckAdvisorSilence** (a ticker's tick) — ``fall_back_when_silent``: once no response was
  applied for ``--cpu-advisor-unhealthy-after`` (from the last applied one, coalesced ones
  included, or from start), pools are re-planned by requests; one journaled decision and a
  warning. Beyond the reference (Katalyst v0.5.4 added a similar fallback).
* **AdvisorLinkChanged** — the link's state. The advisor is called only while it is
  ``watching``; otherwise kubelet's calls answer without it (every stored container is pushed
  at the next connect, and sys-advisor re-reads GetCheckpoint).
* **After an Allocate is committed** — ``AddContainer`` with ``request_quantity =
  ceil(request)`` (§7.2). A *sick* advisor (no answer within ``--cpu-advisor-call-timeout``,
  UNAVAILABLE, connection gone) is reported to the link (``ReportSickAdvisor``, it backs off)
  and the Allocate keeps its allocation and succeeds. A *refusal* (any other status) keeps the
  reference's behaviour: the container's removal (``undo_allocate``) is committed in the same
  mailbox turn and the Allocate fails with "add container to qos aware server failed with
  error: %v".
* **Before a RemovePod** — the advisor's ``RemovePod`` (§10.6 step 1). Sick: reported, and the
  removal proceeds. Refused: "remove pod in QoS aware server failed with error: %v", state
  untouched.
* **Before a residual removal** — the advisor's ``RemovePod`` for each candidate (§12.4 step
  4): a pod the advisor refuses is kept (logged; a candidate again next round); a sick advisor
  is reported and the removal proceeds without it.

Until the link reports ``watching`` again after a sick call, the Allocator treats the link as
not watching, so the calls queued behind a stalled one do not each wait for the timeout.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from actors.advisor_messages import (
    AdvisorLinkChanged,
    ApplyAdvice,
    CheckAdvisorSilence,
    ReportSickAdvisor,
)
from actors.log_text import utc
from actors.ports.advisor import AdvisorClient, AdvisorRefused, AdvisorSick
from machines import advisor_link as machine
from policy.cpu.advisor.decision import AdviceOutcome
from policy.cpu.advisor.push import allocated_metadata
from policy.cpu.advisor.refusal import AddContainerRefused, AdvisorRefusedError
from policy.cpu.cause import AdvisorSilence, DecisionInputs
from policy.cpu.commands import Allocate, RemovePod
from policy.cpu.request import parse_quantity
from policy.decision import Decision
from policy.state.sections import State

if TYPE_CHECKING:
    # An annotation only: the link's actor module is loaded by the wiring that starts the
    # link, so a node without the advisor does not import it.
    from actors.advisor_link import LinkStats

__all__ = [
    "REMOVE_POD_FAILED",
    "AdvisorCalls",
    "AdvisorHealth",
    "AdvisorMessage",
    "Decide",
]

logger = logging.getLogger("actors.allocator")

#: §10.6 step 1: the reference's message for a failed advisor ``RemovePod``.
REMOVE_POD_FAILED = "remove pod in QoS aware server failed with error: {}"

#: The link's messages the Allocator serves.
AdvisorMessage = ApplyAdvice | AdvisorLinkChanged | CheckAdvisorSilence


class AdvisorHealth(Protocol):
    """The ``communicate_with_advisor`` check (``qrmd.status.health.HandlerHealth``)."""

    def update(self, error: str | None, now: float) -> None: ...


class Decide(Protocol):
    """The core's decide-and-commit: the decision on the durable state, its events committed
    (the inputs as the cause) and the resulting snapshot adopted; ``error`` not raised.

    Raises:
        AllocatorUnavailable: the events could not be made durable; state unchanged.
    """

    def __call__(self, inputs: DecisionInputs, now: float) -> Decision[Any]: ...


class AdvisorCalls:
    """The Allocator's advisor behaviour; see the module docstring.

    Args:
        client: sys-advisor's ``CPUAdvisor`` (the link's client; gRPC channels are
            thread-safe, and the link only pushes while the Allocator is told it is not
            watching).
        call_timeout_s: ``--cpu-advisor-call-timeout``.
        unhealthy_after_s: ``--cpu-advisor-unhealthy-after``.
        report_sick: tells the link ``ReportSickAdvisor``.
        stats: the link's figures, shared with the link and the metrics collector.
        health: the ``communicate_with_advisor`` check, if registered.
        monotonic: the monotonic clock (figures and health).
        started_at: the wall time the silence is counted from when nothing was applied.
    """

    def __init__(
        self,
        *,
        client: AdvisorClient,
        call_timeout_s: float,
        unhealthy_after_s: float,
        report_sick: Callable[[ReportSickAdvisor], None],
        stats: LinkStats,
        health: AdvisorHealth | None,
        monotonic: Callable[[], float],
        started_at: float,
    ) -> None:
        self._client = client
        self._call_timeout_s = call_timeout_s
        self.unhealthy_after_s = unhealthy_after_s
        self._report_sick = report_sick
        self.stats = stats
        self._health = health
        self._monotonic = monotonic
        # A restarted Allocator misses the link's earlier messages: start from what the link
        # last published, and from the last applied response it recorded.
        self.link_state = stats.read()["state"]
        self._sick = False
        last = stats.read()["last_applied_wall"]
        self.silent_since = started_at if last is None else max(last, started_at)

    @property
    def watching(self) -> bool:
        """Whether kubelet's calls go to the advisor now."""
        return self.link_state == machine.WATCHING and not self._sick

    # -- the link's messages -----------------------------------------------------------------

    def handle(self, message: AdvisorMessage, decide: Decide, now: float) -> Any:
        """Serve one of the link's messages (told, never asked: nothing is answered).

        Raises:
            AllocatorUnavailable: an advisor decision could not be committed.
        """
        match message:
            case AdvisorLinkChanged(state):
                self.link_state = state
                if state == machine.WATCHING:
                    self._sick = False
            case ApplyAdvice(response):
                self._report(decide(response, now).reply, now)
            case CheckAdvisorSilence():
                self._check_silence(decide, now)
        return None

    def _report(self, outcome: AdviceOutcome, now: float) -> None:
        mono = self._monotonic()
        self.stats.record_outcome(outcome.applied, outcome.stage, mono, wall=now)
        if self._health is not None:
            self._health.update(None if outcome.applied else outcome.reason, mono)
        if not outcome.applied:
            logger.warning(
                "sys-advisor result refused at %s%s: %s",
                outcome.stage,
                " (same as the last one, not journaled again)" if outcome.coalesced else "",
                outcome.reason,
            )
            return
        self.silent_since = now
        if outcome.resumed:
            logger.warning("sys-advisor result applied: sys-advisor sizes the pools again")
        if not outcome.coalesced:
            sizes = ", ".join(f"{name}={size}" for name, size in sorted(outcome.pool_sizes.items()))
            logger.info("sys-advisor result applied: pools %s", sizes)

    def _check_silence(self, decide: Decide, now: float) -> None:
        inputs = AdvisorSilence(self.silent_since, self.unhealthy_after_s)
        if now - inputs.silent_since < inputs.unhealthy_after_s:
            return  # not silent long enough: no decision to take
        decision = decide(inputs, now)
        for warning in decision.warnings:
            logger.warning("sys-advisor silence: %s", warning)
        if decision.reply:
            logger.warning(
                "no sys-advisor result applied since %s (more than %g s, "
                "--cpu-advisor-unhealthy-after): pools are sized by requests until it is back",
                utc(inputs.silent_since),
                inputs.unhealthy_after_s,
            )

    # -- kubelet's calls ---------------------------------------------------------------------

    def after_allocate(self, command: Allocate, state: State, decide: Decide, now: float) -> None:
        """Tell the advisor of a container just allocated (§7.2), if the link is watching.

        Args:
            command: the Allocate, committed.
            state: the durable state after its commit.
            decide: the core's decide-and-commit (for the undo of a refusal).
            now: the wall time.

        Raises:
            AdvisorRefusedError: the advisor refused the container; its removal is committed.
            AllocatorUnavailable: that removal could not be committed.
        """
        request = command.request
        entry = state.cpu.entry(request.pod_uid, request.container_name)
        # INIT containers and debug pods are not stored, so the advisor is not told (§7.1).
        if entry is None or not self.watching:
            return
        metadata = allocated_metadata(entry, parse_quantity(request.resource_requests).req_float)
        try:
            # The second blocking call of the Allocator (the first is the commit): the
            # reference holds its lock across AddContainer; the wait is bounded by
            # --cpu-advisor-call-timeout, and a sick advisor is not called again until the
            # link watches again.
            self._client.add_container(metadata, self._call_timeout_s)
        except AdvisorSick as err:
            self._sick_call(err, f"pod {request.pod_uid} container {request.container_name}")
            return
        except AdvisorRefused as err:
            undo = AddContainerRefused(request.pod_uid, request.container_name, str(err))
            decision = decide(undo, now)
            logger.warning(
                "sys-advisor refused pod %s container %s: Allocate undone: %s",
                request.pod_uid,
                request.container_name,
                err,
            )
            assert decision.error is not None  # undo_allocate always fails the Allocate
            raise decision.error from err

    def before_remove_pod(self, command: RemovePod) -> None:
        """Tell the advisor a pod goes (§10.6 step 1), if the link is watching.

        Raises:
            AdvisorRefusedError: the advisor refused; nothing is removed.
        """
        if not self.watching:
            return
        try:
            # The Allocator's second allowed blocking call, as in after_allocate.
            self._client.remove_pod(command.pod_uid, self._call_timeout_s)
        except AdvisorSick as err:
            self._sick_call(err, f"pod {command.pod_uid}")
        except AdvisorRefused as err:
            raise AdvisorRefusedError(REMOVE_POD_FAILED.format(err)) from err

    def residual_removals(self, pod_uids: tuple[str, ...]) -> tuple[str, ...]:
        """The residual pods to remove after telling the advisor (§12.4 step 4).

        Args:
            pod_uids: the candidates, by ascending uid.

        Returns:
            The candidates the advisor did not refuse, in the same order (all of them while
            the link is not watching, or once the advisor is found sick).
        """
        kept = []
        for pod_uid in pod_uids:
            if self.watching:
                try:
                    # The Allocator's second allowed blocking call, as in after_allocate.
                    self._client.remove_pod(pod_uid, self._call_timeout_s)
                except AdvisorSick as err:
                    self._sick_call(err, f"residual pod {pod_uid}")
                except AdvisorRefused as err:
                    logger.warning(
                        "residual pod %s kept: %s", pod_uid, REMOVE_POD_FAILED.format(err)
                    )
                    continue
            kept.append(pod_uid)
        return tuple(kept)

    def _sick_call(self, err: AdvisorSick, what: str) -> None:
        self._sick = True
        logger.warning(
            "sys-advisor is sick (%s, %s): answering kubelet without it; it learns of every "
            "stored container at the next connect",
            err,
            what,
        )
        self._report_sick(ReportSickAdvisor(str(err)))
