"""sys-advisor's results as decisions: apply one response, or fall back to request sizing.

Both have the one shape ``(state, inputs, settings, now) -> Decision`` (DESIGN.md):

* :func:`apply_advice` — one ListAndWatch response (§11.5 ``allocate_by_cpu_advisor``):
  validate (§11.6), generate block cpusets (§11.7), apply (§11.8). Applied: the CPU events
  and ``AdvisorResponseApplied`` (preceded by ``AdvisorSizingResumed`` when the fallback was
  in force) in one record. Refused at any stage: only ``AdvisorResponseRefused`` with the
  stage and the reference's message, and the decision's ``error`` set (commit, then report
  the failure: ``handle_advisor_resp_failed``, health NotReady). A response identical to the
  previous one with the same outcome and no CPU change commits nothing (coalescing,
  ``policy.state.advisor_section``). The record's cause is :func:`response_cause`.
* :func:`fall_back_when_silent` — when no response was applied for ``unhealthy_after_s``
  (``--cpu-advisor-unhealthy-after``), pools are re-planned by the request-based rules, as
  with the advisor disabled: containers the advisor put in other pools go back to the pool
  their request names, pools only the advisor made are dropped, and ``AdvisorSizingSuspended``
  records the switch. Beyond the reference (it keeps the advisor's last pools forever); a
  similar fallback came with Katalyst v0.5.4.

While the fallback is in force, Allocate and the other pool-sizing decisions must size pools
by requests: :func:`sizing_context` gives the context they should use.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from policy.cpu.advisor.application import AppliedBlocks, apply_blocks
from policy.cpu.advisor.blocks import generate_block_cpusets
from policy.cpu.advisor.response import AdvisorResponse
from policy.cpu.advisor.validation import validate_request, validate_response
from policy.cpu.context import PolicyContext
from policy.cpu.pool_engine import adjust_allocation_entries
from policy.cpu.rnb import headroom_event
from policy.cpu.txn import Txn
from policy.decision import Decision
from policy.errors import ErrorKind, PolicyError
from policy.state.advisor_section import (
    APPLIED,
    REFUSED,
    AdvisorOverlapAllowed,
    AdvisorResponseApplied,
    AdvisorResponseRefused,
    AdvisorSizingResumed,
    AdvisorSizingSuspended,
)
from policy.state.entries import OwnCPUs
from policy.state.events import ContainerPlaced
from policy.state.sections import State

__all__ = [
    "DEFAULT_UNHEALTHY_AFTER_S",
    "STAGE_APPLY",
    "STAGE_BLOCKS",
    "STAGE_REQUEST",
    "STAGE_VALIDATE",
    "AdviceOutcome",
    "AdviceRefused",
    "AdvisorSettings",
    "SilenceCheck",
    "apply_advice",
    "fall_back_when_silent",
    "response_cause",
    "silence_cause",
    "sizing_context",
]

#: ``--cpu-advisor-unhealthy-after`` default: 5 minutes, as Katalyst v0.5.4's fallback.
DEFAULT_UNHEALTHY_AFTER_S: Final = 300.0

STAGE_REQUEST: Final = "request"
STAGE_VALIDATE: Final = "validate"
STAGE_BLOCKS: Final = "blocks"
STAGE_APPLY: Final = "apply"

#: The reference's wrapping of each stage's error (§11.5).
_STAGE_MESSAGES: Final = {
    STAGE_REQUEST: "ValidateCPUAdvisorReq failed with error: {}",
    STAGE_VALIDATE: "ValidateCPUAdvisorResp failed with error: {}",
    STAGE_BLOCKS: "generateBlockCPUSet failed with error: {}",
    STAGE_APPLY: "applyBlocks failed with error: {}",
}


@dataclass(frozen=True, slots=True)
class AdvisorSettings:
    """What advisor decisions read besides the state and their input.

    Attributes:
        cpu: the CPU policy's context (topology, reserve, pod-spec seam, options).
        unhealthy_after_s: how long without an applied response before the fallback.
    """

    cpu: PolicyContext
    unhealthy_after_s: float = DEFAULT_UNHEALTHY_AFTER_S

    def __post_init__(self) -> None:
        if not self.unhealthy_after_s > 0:
            raise ValueError(f"unhealthy_after_s must be positive, got {self.unhealthy_after_s} s")


class AdviceRefused(PolicyError):  # noqa: N818 - an outcome the journal records, not a bug
    """A response refused at ``stage``; the message is the reference's (§11.5), the kind that
    of the stage's error (``INVALID`` for a response that does not fit, ``SHORTAGE`` for
    blocks the CPUs cannot hold).

    Attributes:
        stage: ``request`` (v0.5.47), ``validate``, ``blocks`` or ``apply``.
    """

    def __init__(self, stage: str, message: str, kind: ErrorKind = ErrorKind.INVALID) -> None:
        super().__init__(message, kind=kind)
        self.stage = stage


@dataclass(frozen=True, slots=True)
class AdviceOutcome:
    """What became of one response.

    Attributes:
        applied: the response was applied (``False``: refused, see ``stage``/``reason``).
        fingerprint: the response's content digest.
        stage: where it was refused (``""`` when applied).
        reason: the reference's message for the refusal (``""`` when applied).
        coalesced: identical to the previous response with the same outcome: nothing to commit.
        resumed: this response ended the request-based fallback.
        pool_sizes: every pool's size after an applied response (the ``pool_size`` metric).
    """

    applied: bool
    fingerprint: str
    stage: str = ""
    reason: str = ""
    coalesced: bool = False
    resumed: bool = False
    pool_sizes: Mapping[str, int] = field(default_factory=dict)


def apply_advice(
    state: State, response: AdvisorResponse, settings: AdvisorSettings, now: float
) -> Decision[AdviceOutcome]:
    """Validate, map and apply one calculation result (§11.5–§11.8); see the module docstring.

    Args:
        state: the durable state.
        response: the ListAndWatch response, as received.
        settings: the CPU context (the reserve, the pod-spec seam).
        now: the decision's time (unused: applying a result does not depend on it).

    Returns:
        The events and the outcome; ``error`` is an :class:`AdviceRefused` when refused.
        Never raises for a bad response: a refusal is an outcome, journaled.
    """
    del now
    fingerprint = response.fingerprint()
    section = state.advisor
    txn = Txn(state)
    stage = STAGE_REQUEST
    try:
        # v0.5.47: a GetAdvice answer is checked against its request first.
        if settings.cpu.at_v0_5_47 and response.asked_snb_entries is not None:
            validate_request(state.cpu, response.asked_snb_entries)
        stage = STAGE_VALIDATE
        index = validate_response(state.cpu, response)
        stage = STAGE_BLOCKS
        blocks = generate_block_cpusets(
            state.cpu, response, index, at_v0_5_47=settings.cpu.at_v0_5_47
        )
        stage = STAGE_APPLY
        resumed = section.is_sized_by_requests()
        if resumed:
            txn.emit(AdvisorSizingResumed())
        applied: AppliedBlocks = apply_blocks(txn, settings.cpu, response, blocks)
        if settings.cpu.at_v0_5_47 and response.numa_headroom_sent:
            # v0.5.47 keeps the per-NUMA headroom after the blocks (applyNUMAHeadroom,
            # policy_advisor_handler.go:505, 1302-1334); RNB hints read it (policy.cpu.rnb).
            headroom = headroom_event(response.numa_headroom)
            if headroom.headroom != section.numa_headroom:
                txn.emit(headroom)
        # v0.5.47 keeps the advisor's overlap flag for the pool engine (allocateByCPUAdvisor's
        # last step); v0.5.3 ignores it (§15.13).
        allow = response.allow_shared_cores_overlap_reclaimed_cores
        if settings.cpu.at_v0_5_47 and allow != section.allow_shared_cores_overlap_reclaimed_cores:
            txn.emit(AdvisorOverlapAllowed(allow))
    except PolicyError as err:
        reason = _STAGE_MESSAGES[stage].format(err)
        refused = AdviceRefused(stage, reason, err.kind)
        outcome = AdviceOutcome(False, fingerprint, stage, reason)
        same = (
            section.last_fingerprint == fingerprint
            and section.last_outcome == REFUSED
            and (section.last_stage, section.last_reason) == (stage, reason)
        )
        if same:
            return Decision((), replace(outcome, coalesced=True), error=refused)
        return Decision(
            (AdvisorResponseRefused(fingerprint, stage, reason),), outcome, error=refused
        )
    outcome = AdviceOutcome(True, fingerprint, resumed=resumed, pool_sizes=applied.pool_sizes)
    same = section.last_fingerprint == fingerprint and section.last_outcome == APPLIED
    if same and not txn.events:
        return Decision((), replace(outcome, coalesced=True))
    txn.emit(AdvisorResponseApplied(fingerprint))
    return Decision(txn.events, outcome)


@dataclass(frozen=True, slots=True)
class SilenceCheck:
    """The fallback's input: since when no response was applied (the last applied one, or
    the link's start when none was)."""

    silent_since: float


def fall_back_when_silent(
    state: State, check: SilenceCheck, settings: AdvisorSettings, now: float
) -> Decision[bool]:
    """Size pools by requests once the advisor has been silent for ``unhealthy_after_s``.

    Args:
        state: the durable state.
        check: since when no response was applied.
        settings: the CPU context and ``unhealthy_after_s``.
        now: the current time (same clock as ``check.silent_since``).

    Returns:
        ``reply`` True when the fallback starts with this decision (the re-plan's events and
        ``AdvisorSizingSuspended``); False and no events when the advisor is not silent long
        enough or the fallback is already in force. A re-plan that fails (no reclaim pool can
        be made) is in ``warnings`` and switches nothing.
    """
    section = state.advisor
    if section.is_sized_by_requests() or now - check.silent_since < settings.unhealthy_after_s:
        return Decision((), False)
    ctx = replace(settings.cpu, advisor_enabled=False)
    txn = Txn(state)
    try:
        # Containers the advisor moved into other pools go back to their request's pool; the
        # pool engine then places them there and drops the pools nobody owns any more.
        cpu = txn.cpu
        moves = []
        for found in cpu.entries():
            if not (found.is_shared() or found.is_reclaimed()) or found.ramp_up:
                continue
            home = found.specified_pool_name()
            if found.owner_pool_name and found.owner_pool_name != home:
                result, original = cpu.placement_cpus(found.placement)
                moves.append(
                    ContainerPlaced(
                        found.pod_uid, found.container_name, OwnCPUs(result, original), home
                    )
                )
        txn.emit(*moves)
        adjust_allocation_entries(txn, ctx)
    except PolicyError as err:
        return Decision((), False, warnings=(f"fallback to request-based pools failed: {err}",))
    txn.emit(AdvisorSizingSuspended(check.silent_since, settings.unhealthy_after_s))
    return Decision(txn.events, True)


def sizing_context(state: State, ctx: PolicyContext) -> PolicyContext:
    """The context pool-sizing decisions use: ``ctx`` itself, or, while the fallback is in
    force, ``ctx`` with ``advisor_enabled`` off (pools sized by requests, §9.1 step 3)."""
    if ctx.advisor_enabled and state.advisor.is_sized_by_requests():
        return replace(ctx, advisor_enabled=False)
    return ctx


def response_cause(response: AdvisorResponse, now: float) -> dict[str, Any]:
    """The journal cause of an :func:`apply_advice` record: the response itself (a v0.5.47
    GetAdvice answer too, under the same name: its ``asked_snb_entries`` tell it apart)."""
    return {"rpc": "ListAndWatch", "now": now, "response": response.to_json()}


def silence_cause(check: SilenceCheck, now: float) -> dict[str, Any]:
    """The journal cause of a :func:`fall_back_when_silent` record."""
    return {"rpc": "AdvisorSilence", "now": now, "silent_since": check.silent_since}
