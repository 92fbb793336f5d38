"""GetTopologyHints for shared_cores at the v0.5.47 reference level (spec cpu-policy-v0.5.47
(a) "Hints" and (c) 5; katalyst-core v0.5.47 ``policy_hint_handlers.go:42-71, 623-875``,
``hintoptimizer/policy/canonical/optimizer.go``).

Non-binding shared containers still have no NUMA preference, but a main container whose pod
(by its aggregated request) would push the non-binding shared requests beyond the pooled CPUs
is refused with ``no available cpu hints``.

SNB containers (``policy.cpu.snb``):

1. A sidecar has no preference.
2. The request is the pod's aggregated request when annotated, else the container's.
3. A container already placed is hinted its NUMA again. While it is resized in place, its own
   usage is dropped first, and the resize is refused when the new request neither fits the
   NUMA nor is at most the stored aggregated request.
4. A new container: the candidate NUMAs, ascending, without those a stored container is
   anti-affine on; a NUMA hosting no binding container qualifies when the non-binding NUMAs
   would still hold the non-binding shared requests without it, any other when the request
   fits its available quantity. A request larger than one NUMA is an error.
5. ``--enable-snb-high-numa-preference`` lists them from the highest NUMA down; all preferred.
6. The optimizer chain (``--shared-cores-hint-optimizer-policies``): the first optimizer that
   does not skip itself decides. ``metric_based`` always skips here (qrmd has no NUMA load
   metrics; the reference skips when it has none). ``canonical`` skips for a
   ``numa_exclusive`` pod; otherwise it keeps the NUMAs the request fits and marks preferred
   by ``--cpu-numa-hint-prefer-policy`` (spreading: most left; packing: fewest left;
   dynamic_packing: packing among the NUMAs whose share left is at least
   ``--cpu-numa-hint-prefer-low-threshold``, listed first, the others after, not preferred;
   spreading over all when none is).
7. No hint left: ``no available cpu hints``.
8. With ``--prefer-use-exist-numa-hint-result``, only the hint equal to the NUMA set of the
   binding result annotation is preferred (when some hint equals it).

Reading the state: the SNB pools' owners and the stored containers (for anti-affinity and
the non-binding sum), O(containers); nothing is written.
"""

from __future__ import annotations

import math
from typing import Final

from policy.cpu.context import PolicyContext
from policy.cpu.prepare import PreparedRequest
from policy.cpu.reference import CANONICAL, DYNAMIC_PACKING, PACKING, SPREADING
from policy.cpu.request import ContainerType, TopologyHint
from policy.cpu.snb import (
    anti_affine_numas,
    binding_numas,
    cpu_is_sufficient,
    is_inplace_resizing,
    non_binding_pooled_cpus,
    non_binding_shared_requested,
    numa_allocatable,
    numa_available_quantities,
    numa_available_quantity,
    numas_of,
    pod_aggregated_request,
)
from policy.errors import ErrorKind, PolicyError
from policy.state.cpu_state import CPUState
from policy.topology.cpuset import CPUSet

__all__ = [
    "NO_AVAILABLE_CPU_HINTS",
    "SNBHintError",
    "aggregated_request",
    "prefer_existing_result",
    "shared_hints",
]

#: ``cpuutil.ErrNoAvailableCPUHints``.
NO_AVAILABLE_CPU_HINTS: Final = "no available cpu hints"


class SNBHintError(PolicyError):
    """No hint for a shared container at v0.5.47; the message is the reference's."""

    kind = ErrorKind.SHORTAGE


def aggregated_request(prepared: PreparedRequest) -> float:
    """``GetPodAggregatedRequestResource``: the aggregated request, else the container's."""
    aggregated = pod_aggregated_request(prepared.annotations)
    return prepared.req_float if aggregated is None else aggregated


def shared_hints(
    state: CPUState, ctx: PolicyContext, prepared: PreparedRequest
) -> tuple[TopologyHint, ...] | None:
    """The hints of a shared_cores container at v0.5.47 (module docstring).

    Returns:
        None for no preference; otherwise at least one hint.

    Raises:
        SNBHintError: ``no available cpu hints`` (possibly wrapped by the step that found
            none), or an SNB request larger than one NUMA.
    """
    request = prepared.request
    if not prepared.numa_binding:
        # (c) 5: the main container must fit the pooled CPUs with the other non-binding pods.
        if request.container_type is ContainerType.MAIN:
            wanted = non_binding_shared_requested(
                state, ctx, (request.pod_uid, aggregated_request(prepared))
            )
            if wanted > non_binding_pooled_cpus(state, ctx).size():
                raise SNBHintError(NO_AVAILABLE_CPU_HINTS)
        return None
    # 1. Sidecars follow their main container.
    if request.container_type is ContainerType.SIDECAR:
        return None
    # 2. The pod's request.
    wanted_cores = aggregated_request(prepared)
    # 3. Already placed: its NUMA again (a resize must fit it).
    existing = state.entry(request.pod_uid, request.container_name)
    if existing is not None:
        return _rehint(state, ctx, prepared, wanted_cores)
    # 4-8. A new container.
    try:
        return _calculate(state, ctx, prepared, wanted_cores)
    except SNBHintError as err:
        raise SNBHintError(
            f"calculateHintsForNUMABindingSharedCores failed with error: {err}"
        ) from err


def _rehint(
    state: CPUState, ctx: PolicyContext, prepared: PreparedRequest, wanted: float
) -> tuple[TopologyHint, ...]:
    request = prepared.request
    key = (request.pod_uid, request.container_name)
    entry = state.require_entry(*key)
    result, _ = state.placement_cpus(entry.placement)
    numas = sorted(numas_of(ctx.topology.numa_masks(), result))
    if not is_inplace_resizing(prepared.annotations):
        return (TopologyHint(tuple(numas), True),)
    if len(numas) != 1:
        raise SNBHintError("snb port not support cross numa", kind=ErrorKind.REFUSED)
    available = numa_available_quantity(state, ctx, numas[0], ignore={key})
    origin = pod_aggregated_request(entry.annotations) or 0.0
    if not cpu_is_sufficient(wanted, available) and wanted > origin:
        raise SNBHintError(NO_AVAILABLE_CPU_HINTS)
    return (TopologyHint((numas[0],), True),)


def _calculate(
    state: CPUState, ctx: PolicyContext, prepared: PreparedRequest, wanted: float
) -> tuple[TopologyHint, ...]:
    numas = _candidates(state, ctx, prepared, wanted)
    topology = ctx.topology
    count = len(topology.numa_nodes())
    per_numa = -(-topology.num_cpus // count)
    needed = max(math.ceil(wanted / per_numa), 1)
    if needed > count:
        raise SNBHintError(
            f"GetNUMANodesCountToFitCPUReq failed with error: invalid cpu req: {wanted:.3f} in "
            f"topology with NUMAs count: {count} and CPUs count: {topology.num_cpus}",
            kind=ErrorKind.REFUSED,
        )
    if needed > 1:
        raise SNBHintError(
            "numa_binding shared_cores container has request larger than 1 NUMA",
            kind=ErrorKind.REFUSED,
        )
    # 5. Highest NUMA first when asked; every candidate starts preferred.
    if ctx.reference.enable_snb_high_numa_preference:
        numas = sorted(numas, reverse=True)
    hints = [TopologyHint((n,), True) for n in numas]
    # 6. The optimizer chain: the first that does not skip decides.
    for name in ctx.reference.shared_cores_hint_optimizer_policies:
        if name == CANONICAL and not prepared.numa_exclusive:
            hints = _canonical(state, ctx, [h.nodes[0] for h in hints], wanted)
            break
        # metric_based (no metrics) and canonical for a numa_exclusive pod skip themselves
    # 7. Nothing left.
    if not hints:
        raise SNBHintError(NO_AVAILABLE_CPU_HINTS)
    # 8. The binding result already decided elsewhere.
    if ctx.reference.prefer_use_exist_numa_hint_result:
        hints = prefer_existing_result(ctx, prepared, hints)
    return tuple(hints)


def _candidates(
    state: CPUState, ctx: PolicyContext, prepared: PreparedRequest, wanted: float
) -> list[int]:
    """Step 4's NUMAs (``filterNUMANodesByNonBinding``), ascending."""
    avoided = anti_affine_numas(state, ctx, prepared.qos_level, prepared.annotations)
    binding = binding_numas(state)
    masks = ctx.topology.numa_masks()
    non_binding = [n for n in masks if n not in binding]
    non_binding_cpus = CPUSet.from_mask(
        sum(masks[n] for n in non_binding) & ~ctx.reserved.mask
    ).difference(CPUSet.from_mask(state.indexes.allocated_mask))
    non_binding_requested = non_binding_shared_requested(state, ctx)
    quantities = numa_available_quantities(state, ctx)
    out: list[int] = []
    for numa in sorted(masks):
        if numa in avoided:
            continue
        available = quantities[numa]
        if numa not in binding:
            # taking this NUMA must leave the non-binding shared pods enough CPUs
            if cpu_is_sufficient(non_binding_requested, non_binding_cpus.size() - available):
                out.append(numa)
        elif cpu_is_sufficient(wanted, available):
            out.append(numa)
    return out


def _canonical(
    state: CPUState, ctx: PolicyContext, numas: list[int], wanted: float
) -> list[TopologyHint]:
    """The canonical optimizer: fitting NUMAs, preferred by the prefer policy."""
    policy = ctx.reference.cpu_numa_hint_prefer_policy
    if policy != DYNAMIC_PACKING:
        return _by_prefer_policy(state, ctx, numas, policy, wanted)
    threshold = ctx.reference.cpu_numa_hint_prefer_low_threshold
    above: list[int] = []
    below: list[int] = []
    quantities = numa_available_quantities(state, ctx)
    for numa in numas:
        allocatable = numa_allocatable(state, ctx, numa)
        if allocatable == 0:
            continue
        left = quantities[numa] - wanted
        (above if left / allocatable >= threshold else below).append(numa)
    if not above:
        return _by_prefer_policy(state, ctx, numas, SPREADING, wanted)
    packed = _by_prefer_policy(state, ctx, above, PACKING, wanted)
    return packed + [TopologyHint((n,), False) for n in below]


def _by_prefer_policy(
    state: CPUState, ctx: PolicyContext, numas: list[int], policy: str, wanted: float
) -> list[TopologyHint]:
    fitting: list[tuple[int, float]] = []
    quantities = numa_available_quantities(state, ctx)
    for numa in numas:
        available = quantities[numa]
        if cpu_is_sufficient(wanted, available):
            fitting.append((numa, available - wanted))
    if not fitting:
        return []
    lefts = [left for _, left in fitting]
    best = min(lefts) if policy == PACKING else max(lefts)
    return [TopologyHint((numa,), left == best) for numa, left in fitting]


def prefer_existing_result(
    ctx: PolicyContext, prepared: PreparedRequest, hints: list[TopologyHint]
) -> list[TopologyHint]:
    text = prepared.annotations.get(ctx.reference.numa_binding_result_annotation_key)
    if text is None:
        return hints
    try:
        result = CPUSet.parse(text)
    except ValueError as err:
        raise SNBHintError(
            f"{ctx.reference.numa_binding_result_annotation_key}: {text!r} is not a NUMA list",
            kind=ErrorKind.REFUSED,
        ) from err
    if result.is_empty():
        return hints
    wanted = tuple(result.ids())
    if not any(tuple(sorted(h.nodes)) == wanted for h in hints):
        return hints
    first = next(i for i, h in enumerate(hints) if tuple(sorted(h.nodes)) == wanted)
    return [TopologyHint(h.nodes, i == first) for i, h in enumerate(hints)]
