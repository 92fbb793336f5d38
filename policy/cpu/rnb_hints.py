"""GetTopologyHints for reclaimed cores bound to a NUMA node (RNB) at v0.5.47, with
``--enable-reclaim-numa-binding true`` (katalyst-core v0.5.47
``reclaimedCoresWithNUMABindingHintHandler``, ``policy_hint_handlers.go:493-620, 896-1005``).

The rule, in the reference's order:

1. A sidecar has no preference (it follows its main container).
2. The request is the pod's aggregated request when annotated, else the container's.
3. A container already placed is hinted the NUMA nodes of its CPUs, preferred. While it is
   resized in place and grows, the headroom of those NUMA nodes minus the requests of the
   reclaimed containers in them (itself left out; a container in several nodes counted in
   each) must still cover the new request, else ``cpu inplace update resize scale out
   failed with no enough resource``.
4. A new container: the candidates are the NUMA nodes with a positive per-NUMA headroom
   (sys-advisor's ``cpu_numa_headroom``, ``policy.state.advisor_section``), NUMA nodes
   hosting SNB or dedicated NUMA-binding containers first, then by headroom, highest first.
5. A non-actual NUMA (no actual RNB container in it) stays a candidate only while taking it
   leaves the other non-actual NUMAs' headroom enough for the non-actual reclaimed
   requests, or more than one non-actual NUMA is still untaken (taken ones are counted off
   in candidate order; the headroom sum is not).
6. Each candidate's *left* is its headroom minus the requests of the actual RNB containers
   in it minus the request; one single-NUMA hint per candidate, by left, highest first,
   preferred when left ≥ 0.
7. No hint: ``no available cpu hints``, except on a one-NUMA machine with a non-actual NUMA,
   which gets an empty hint list (kubelet then admits nothing).
8. ``--prefer-use-exist-numa-hint-result`` then prefers only the hint the binding result
   annotation names, as for SNB.

Ties: the reference lists candidates from a Go map and sorts the hints with the unstable
``sort.Slice``, so candidates of equal headroom, and hints of equal left, have no defined
order there; here they come by NUMA id (candidates) and keep the candidate order (hints).
Without a headroom (no sys-advisor, or none sent yet) every RNB main container on a
multi-NUMA node is refused, as in the reference.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from policy.cpu.context import PolicyContext
from policy.cpu.prepare import PreparedRequest
from policy.cpu.request import ContainerType, TopologyHint
from policy.cpu.rnb import actual_rnb_numas, reclaimed_requested
from policy.cpu.snb import binding_numas, cpu_is_sufficient, is_inplace_resizing, numas_of
from policy.cpu.snb_hints import (
    NO_AVAILABLE_CPU_HINTS,
    SNBHintError,
    aggregated_request,
    prefer_existing_result,
)
from policy.state.cpu_state import CPUState

__all__ = ["RESIZE_SHORT", "reclaimed_binding_hints"]

#: The reference's refusal of an in-place growth its NUMA nodes cannot hold.
RESIZE_SHORT: Final = "cpu inplace update resize scale out failed with no enough resource"


def reclaimed_binding_hints(
    state: CPUState,
    ctx: PolicyContext,
    prepared: PreparedRequest,
    headroom: Mapping[int, float],
) -> tuple[TopologyHint, ...] | None:
    """The hints of an RNB container (module docstring).

    Args:
        state: the CPU state.
        ctx: topology, reserve and the v0.5.47 options.
        prepared: the request after ``prepare_request``.
        headroom: sys-advisor's per-NUMA headroom last kept, by NUMA (empty without one).

    Returns:
        None for no preference (a sidecar); otherwise the hints, possibly none (step 7).

    Raises:
        SNBHintError: ``no available cpu hints`` or the resize refusal, with the reference's
            wrapping message.
    """
    request = prepared.request
    # 1. Sidecars follow their main container.
    if request.container_type is ContainerType.SIDECAR:
        return None
    # 2. The pod's request.
    wanted = aggregated_request(prepared)
    # 3. Already placed: the NUMA nodes of its CPUs (a growth in place must fit them).
    existing = state.entry(request.pod_uid, request.container_name)
    if existing is not None:
        key = existing.key
        result, _ = state.placement_cpus(existing.placement)
        numas = numas_of(ctx.topology.numa_masks(), result)
        if is_inplace_resizing(prepared.annotations) and wanted > existing.request_quantity:
            available = sum(headroom.get(n, 0.0) for n in numas)
            allocated = sum(
                reclaimed_requested(state, ctx, "any", numa=n, ignore={key}) for n in numas
            )
            if not cpu_is_sufficient(wanted, available - allocated):
                raise SNBHintError(RESIZE_SHORT)
        return (TopologyHint(tuple(sorted(numas)), True),)
    try:
        return _calculate(state, ctx, prepared, wanted, headroom)
    except SNBHintError as err:
        raise SNBHintError(
            f"calculateHintsForNUMABindingReclaimedCores failed with error: {err}", kind=err.kind
        ) from err


def _calculate(
    state: CPUState,
    ctx: PolicyContext,
    prepared: PreparedRequest,
    wanted: float,
    headroom: Mapping[int, float],
) -> tuple[TopologyHint, ...]:
    all_numas = frozenset(ctx.topology.numa_masks())
    non_actual = all_numas - actual_rnb_numas(state)
    non_actual_requested = reclaimed_requested(state, ctx, "non_actual")
    non_actual_headroom = sum(headroom.get(n, 0.0) for n in non_actual)
    # 4. Candidates: positive headroom, binding NUMAs first, then by headroom.
    binding = binding_numas(state)
    candidates = sorted(
        (n for n, cores in headroom.items() if cores > 0),
        key=lambda n: (n not in binding, -headroom[n], n),
    )
    # 5. A non-actual NUMA only while the others still hold the non-actual requests.
    untaken = set(non_actual)
    kept: list[int] = []
    for numa in candidates:
        if numa not in untaken:
            kept.append(numa)
            continue
        if (
            cpu_is_sufficient(non_actual_requested, non_actual_headroom - headroom[numa])
            or len(untaken) > 1
        ):
            kept.append(numa)
            untaken.discard(numa)
    # 6. One hint per candidate, by what it has left after the request.
    lefts = [
        (numa, headroom[numa] - reclaimed_requested(state, ctx, "actual", numa=numa) - wanted)
        for numa in kept
    ]
    lefts.sort(key=lambda pair: -pair[1])
    hints = [TopologyHint((numa,), left >= 0) for numa, left in lefts]
    # 7. None: refused, but on a one-NUMA machine with a non-actual NUMA.
    if not hints and not (len(all_numas) == 1 and non_actual):
        raise SNBHintError(NO_AVAILABLE_CPU_HINTS)
    # 8. The binding result annotation.
    if ctx.reference.prefer_use_exist_numa_hint_result:
        hints = prefer_existing_result(ctx, prepared, hints)
    return tuple(hints)
