"""The one table from a decision's inputs to the façade function that decides them.

The Allocator calls it for every command it serves (``actors.allocator``), and the re-run of
a journaled decision calls it on the inputs decoded from the record's cause
(``policy.cpu.cause``; ``qrmd.offline.decision_rerun``): one table, so live and re-run cannot
route the same inputs to different rules (DESIGN.md "Every decision has one shape").
"""

from __future__ import annotations

from typing import Any

from policy.cpu import facade as cpu_policy
from policy.cpu.advisor.refusal import AddContainerRefused, undo_allocate
from policy.cpu.advisor.response import AdvisorResponse
from policy.cpu.allocation_listing import ResourcesAllocation
from policy.cpu.cause import AdvisorSilence, DecisionInputs, ResidualPods
from policy.cpu.commands import (
    AllocateInputs,
    GetResourcePluginOptions,
    GetResourcesAllocation,
    GetTopologyAwareAllocatableResources,
    GetTopologyAwareResources,
    GetTopologyHints,
    PreStartContainer,
    RemovePod,
    StartPolicy,
)
from policy.cpu.context import PolicyContext
from policy.decision import Decision
from policy.state.sections import State

__all__ = ["decide"]

#: The inputs only the advisor's decision module decides.
_ADVISOR_INPUTS = (AdvisorResponse, AdvisorSilence)


def decide(
    state: State,
    inputs: DecisionInputs,
    settings: PolicyContext,
    now: float,
    previous_listing: ResourcesAllocation | None = None,
) -> Decision[Any]:
    """Call the façade function that decides ``inputs``: the one table for live and re-run.

    Every decision sees ``sizing_context(state, settings)``: while the request-based fallback
    is in force (a state fact, journaled), pools are sized by requests as without the advisor.

    Args:
        state: the state to decide on (the durable one, or the one replayed before a record).
        inputs: the decision's inputs (a command that is its own inputs, ``AllocateInputs``,
            ``ResidualPods``, or an advisor input: a response, ``AdvisorSilence``,
            ``AddContainerRefused``).
        settings: the fixed context.
        now: the wall time the decision is taken at.
        previous_listing: for GetResourcesAllocation, the last listing answered, whose
            per-pod parts it reuses; the decision is the same without it.

    Returns:
        The decision.

    Raises:
        PolicyError: the policy refused (see ``policy.cpu.facade``); nothing to commit.
        TypeError: ``inputs`` is not one of the Allocator's decision inputs.
    """
    if settings.advisor_enabled or isinstance(inputs, _ADVISOR_INPUTS):
        # Without sys-advisor sizing_context gives the context itself and no advisor input
        # comes: its decision code loads with a node's first decision that needs it.
        from policy.cpu.advisor import decision  # noqa: PLC0415 (only with sys-advisor)

        settings = decision.sizing_context(state, settings)
        match inputs:
            case AdvisorResponse():
                return decision.apply_advice(state, inputs, decision.AdvisorSettings(settings), now)
            case AdvisorSilence(silent_since, unhealthy_after_s):
                advisor = decision.AdvisorSettings(settings, unhealthy_after_s)
                check = decision.SilenceCheck(silent_since)
                return decision.fall_back_when_silent(state, check, advisor, now)
    match inputs:
        case AddContainerRefused():
            return undo_allocate(state, inputs, settings, now)
        case AllocateInputs():
            return cpu_policy.allocate(state, inputs, settings, now)
        case GetTopologyHints():
            return cpu_policy.get_topology_hints(state, inputs, settings, now)
        case RemovePod():
            return cpu_policy.remove_pod(state, inputs, settings, now)
        case GetResourcesAllocation():
            return cpu_policy.get_resources_allocation(
                state, inputs, settings, now, previous_listing
            )
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
