"""The CPUs of a dedicated NUMA-binding container at Katalyst v0.5.47 (cpu-policy-v0.5.47 (b)).

v0.5.47's ``allocateNumaBindingCPUs`` (``policy_allocation_handlers.go:607-712``), in order:

1. The NUMA number is read from its own annotation only (not from the NUMA ids, unlike the
   hints: a pod naming two NUMA ids without a number is refused a two-node hint here).
2. Refusals: no hint, an empty hint, a non-exclusive request on more than one node unless
   the NUMA number is above 1, numa_exclusive with full_pcpus_pairing, numa_exclusive with
   distribute_evenly_across_numa.
3. The available CPUs of each hinted node.
4. numa_exclusive: all of them. distribute_evenly_across_numa: request/len(hint) on each node
   by the L3-aware best fit, refused when the request does not divide. Otherwise the
   L3-aware best fit over the union (sockets → L3 caches → cores → threads).
   full_pcpus_pairing changes nothing here: it only filters hints.
5. Fewer CPUs than the request: "results can't meet cpus request".
"""

from __future__ import annotations

from collections.abc import Mapping

from policy.cpu.dedicated_options import (
    DISTRIBUTE_EVENLY_KEY,
    FULL_PCPUS_PAIRING_KEY,
    OptionError,
    numa_number,
)
from policy.cpu.request import TopologyHint
from policy.errors import ErrorKind, PolicyError
from policy.topology.cpuset import CPUSet
from policy.topology.model import CPUTopology
from policy.topology.selection import SelectionError, take_by_topology

__all__ = ["DedicatedAllocationError", "allocate_numa_binding_cpus_v0547", "numa_binding_hint_id"]

_ENABLED = "true"


class DedicatedAllocationError(PolicyError):
    """Allocate refused for a dedicated NUMA-binding request at v0.5.47 (the reference's text)."""

    kind = ErrorKind.REFUSED


def allocate_numa_binding_cpus_v0547(
    topology: CPUTopology,
    available: Mapping[int, CPUSet],
    request: int,
    hint: TopologyHint | None,
    *,
    exclusive: bool,
    annotations: Mapping[str, str],
    numa_number_key: str,
) -> CPUSet:
    """The module's rule (steps 1–5).

    Args:
        topology: the machine.
        available: each NUMA node's available CPUs (default cpuset minus the reserve), in the
            state without the container's old entry.
        request: CPUs requested (whole).
        hint: the topology manager's hint.
        exclusive: ``numa_exclusive``.
        annotations: the request's normalised annotations.
        numa_number_key: ``--numa-number-annotation-key``.

    Returns:
        The CPUs.

    Raises:
        DedicatedAllocationError: the reference's refusal.
        OptionError: "get numa number failed with error: ...".
    """
    # 1. The NUMA number, from its own annotation.
    try:
        number = numa_number(annotations, len(available), numa_number_key)
    except OptionError as err:
        raise OptionError(f"get numa number failed with error: {err}") from err
    distribute = annotations.get(DISTRIBUTE_EVENLY_KEY) == _ENABLED
    pairing = annotations.get(FULL_PCPUS_PAIRING_KEY) == _ENABLED
    # 2. Refusals, in the reference's order.
    if hint is None:
        raise DedicatedAllocationError("hint is nil")
    if not hint.nodes:
        raise DedicatedAllocationError("hint is empty")
    if not exclusive and number <= 1 and len(hint.nodes) > 1:
        raise DedicatedAllocationError(
            "NUMA not exclusive binding container has request larger than 1 NUMA"
        )
    if exclusive and pairing:
        raise DedicatedAllocationError(
            "NUMA exclusive and full pcpus pairing not supported at the same time"
        )
    if exclusive and distribute:
        raise DedicatedAllocationError(
            "NUMA exclusive and distribute evenly across numa not supported at the same time"
        )
    # 3. What the hinted nodes offer.
    per_numa = {n: available.get(n, CPUSet()) for n in hint.nodes}
    aligned = CPUSet.union_all(per_numa.values())
    # 4. Exclusive, evenly, or the L3-aware best fit over the union.
    if exclusive:
        result = aligned
    elif distribute:
        result = _evenly(topology, request, hint.nodes, per_numa)
    else:
        try:
            result = take_by_topology(topology, aligned, request, align_by_l3=True)
        except SelectionError as err:
            raise DedicatedAllocationError(
                f"take cpu for NUMA not exclusive binding container failed with err: {err}",
                kind=err.kind,
            ) from err
    # 5. Enough?
    if result.size() < request:
        raise DedicatedAllocationError("results can't meet cpus request", kind=ErrorKind.SHORTAGE)
    return result


def _evenly(
    topology: CPUTopology, request: int, nodes: tuple[int, ...], per_numa: Mapping[int, CPUSet]
) -> CPUSet:
    """``allocateEvenlyAcrossNUMAs``: request/len(nodes) CPUs on each hinted node."""
    if request % len(nodes) != 0:
        raise DedicatedAllocationError(
            "allocateEvenlyAcrossNUMA failed with error: unable to evenly distribute cpus "
            f"across numa nodes, request: {request}, numa nodes: {len(nodes)}"
        )
    share = request // len(nodes)
    result = CPUSet()
    for numa in nodes:
        try:
            taken = take_by_topology(topology, per_numa[numa], share, align_by_l3=True)
        except SelectionError as err:
            raise DedicatedAllocationError(
                "allocateEvenlyAcrossNUMA failed with error: take cpu for "
                f"distribute_evenly_across_numa container failed with err: {err}",
                kind=err.kind,
            ) from err
        result = result.union(taken)
    return result


def numa_binding_hint_id(
    exclusive: bool,
    annotations: Mapping[str, str],
    numas: int,
    hint: TopologyHint,
    *,
    numa_number_key: str,
) -> int | None:
    """The NUMA id the entry records as ``numa_hint`` (policy_allocation_handlers.go:463-474):
    only a non-exclusive container with a NUMA number ≤ 1, on its single hinted node."""
    if exclusive or numa_number(annotations, numas, numa_number_key) > 1:
        return None
    return hint.nodes[0]
