"""GetTopologyHints: which NUMA nodes kubelet's topology manager may give a container (§8).

The rule (spec cpu-policy §8.1–§8.3), in the reference's order:

1. INIT containers and debug pods: no preference (``hints is None``).
2. A level without a handler (``system_cores``) is an error.
3. shared_cores and reclaimed_cores: no preference — pools span every eligible NUMA node.
   At v0.5.47 shared_cores hints are ``policy.cpu.snb_hints``'s (SNB, and the capacity
   check of non-binding pods), and with ``--enable-reclaim-numa-binding`` those of
   reclaimed_cores with ``numa_binding`` ``policy.cpu.rnb_hints``'s (RNB, from
   sys-advisor's per-NUMA headroom).
4. dedicated_cores without NUMA binding: "not support dedicated_cores without NUMA binding".
5. dedicated_cores with NUMA binding:
   a. a SIDECAR follows its main container: no preference;
   b. a container that already holds at least the requested CPUs: one preferred hint, the
      NUMA nodes of its CPUs; one that holds fewer is left out of the state the next steps
      read (nothing is stored);
   c. the extra state file's NUMA set for ``<pod name>-0``, when it names only nodes no
      NUMA-binding container uses: one preferred hint (the file is read by the caller; this
      module gets its ``memoryEntries`` mapping);
   d. ``calculate_hints``: the enumeration of ``policy.cpu.hint_masks`` — the reference's full
      answer up to ``ctx.max_full_hint_numa_nodes`` NUMA nodes, the reduced answer (the
      smallest hints, at most ``ctx.max_hints``) beyond.

At reference level v0.5.47 (cpu-policy-v0.5.47 (b); ``policy_hint_handlers.go:97-186``):
a dedicated pod being resized in place (``pod.kubernetes.io/inplace-update-resizing: "true"``,
when kept) is refused first; in 5b any existing allocation is the answer, the NUMA nodes of
its CPUs whatever its size; in 5c the extra state file may name any node without an
*exclusive* dedicated container; 5d is v0.5.47's enumeration with the dedicated allocation
options (``policy.cpu.dedicated_hints``), reduced beyond ``ctx.max_full_hint_numa_nodes`` as
the v0.5.3 answer is.

Reading the state costs O(NUMA nodes): the available and allocated CPUs per node come from the
state's indexes, never from the list of pods.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from types import MappingProxyType

from policy.cpu.context import PolicyContext
from policy.cpu.dedicated_hints import dedicated_hints_v0547
from policy.cpu.enhancements import is_numa_exclusive
from policy.cpu.hint_masks import NUMAFacts, full_hints, smallest_size_hints
from policy.cpu.prepare import PreparedRequest
from policy.cpu.qos import (
    DEDICATED_CORES,
    RECLAIMED_CORES,
    SHARED_CORES,
    QoSError,
    check_handled_level,
)
from policy.cpu.reference import INPLACE_UPDATE_RESIZING_KEY
from policy.cpu.replies import HintsReply
from policy.cpu.request import ContainerType, TopologyHint
from policy.cpu.rnb_hints import reclaimed_binding_hints
from policy.cpu.snb import (
    anti_affine_numas,
    binding_numas,
    cpu_is_sufficient,
    non_binding_shared_requested,
    numa_available_quantities,
)
from policy.cpu.snb_hints import SNBHintError, shared_hints
from policy.cpu.system_cores import SYSTEM_CORES
from policy.errors import ErrorKind, PolicyError
from policy.state.cpu_apply import apply_cpu_event
from policy.state.cpu_state import CPUState
from policy.state.events import ContainerRemoved
from policy.topology.cpuset import CPUSet
from policy.topology.model import CPUTopology, TopologyError, numa_aware_assignments

__all__ = [
    "NO_NUMA_BINDING",
    "HintError",
    "calculate_hints",
    "numa_count_to_fit",
    "topology_hints",
]

#: The reference's refusal of dedicated_cores without NUMA binding (§7.5, §8.3).
NO_NUMA_BINDING = "not support dedicated_cores without NUMA binding"
#: v0.5.47's refusal of a dedicated pod resized in place (``dedicatedCoresHintHandler``).
NO_INPLACE_RESIZE = "not support inplace update resize for dedicated cores"
#: The reference's refusal of a multi-NUMA non-exclusive request (§7.5.1, §8.3 step 4c).
NOT_EXCLUSIVE_TOO_LARGE = "NUMA not exclusive binding container has request larger than 1 NUMA"


class HintError(PolicyError):
    """Hints cannot be computed for a request; the message names pod, container and reason."""

    kind = ErrorKind.REFUSED


def numa_count_to_fit(topology: CPUTopology, request: int) -> int:
    """``GetNUMANodesCountToFitCPUReq``: NUMA nodes needed for ``request`` CPUs (§8.3 step 4b).

    Raises:
        HintError: "there is no NUMA in cpuTopology", "invalid NUMAs count: %d with CPUs
            count: %d", "zero numaCountNeeded", or "invalid cpu req: %d in topology with NUMAs
            count: %d and CPUs count: %d".
    """
    numas = len(topology.numa_nodes())
    cpus = topology.num_cpus
    if numas == 0:
        raise HintError("there is no NUMA in cpuTopology")
    if cpus % numas != 0:
        raise HintError(f"invalid NUMAs count: {numas} with CPUs count: {cpus}")
    per_numa = cpus // numas
    needed = -(-request // per_numa)
    if needed == 0:
        raise HintError("zero numaCountNeeded")
    if needed > numas:
        raise HintError(
            f"invalid cpu req: {request} in topology with NUMAs count: {numas} "
            f"and CPUs count: {cpus}"
        )
    return needed


@lru_cache(maxsize=32)
def _numa_sockets(topology: CPUTopology) -> Mapping[int, frozenset[int]]:
    """Each NUMA node's sockets: a fact of the machine, derived once per topology."""
    sockets = topology.socket_masks()
    return MappingProxyType(
        {
            numa: frozenset(s for s, s_mask in sockets.items() if s_mask & n_mask)
            for numa, n_mask in topology.numa_masks().items()
        }
    )


def calculate_hints(
    state: CPUState, ctx: PolicyContext, request: int, exclusive: bool
) -> tuple[TopologyHint, ...]:
    """``calculate_hints`` for a NUMA-binding container (§8.3 step 4), full or reduced.

    Args:
        state: the CPU state the hints are computed on.
        ctx: topology, reserve and the hint limits.
        request: CPUs requested (``req_int``).
        exclusive: the container asks for whole NUMA nodes (``numa_exclusive``).

    Returns:
        Possibly no hints (nothing fits); never None.

    Raises:
        HintError: "calculateHints failed with error: ..." with the reference's reason.
    """
    # The answer depends on the state only through the allocated CPUs, so it is remembered
    # for the few masks a node goes through: kubelet asks the same dedicated hints while
    # shared pods come and go, which leave the allocated CPUs alone.
    return _hints_for(
        ctx.topology,
        state.topology,
        reserved_mask=ctx.reserved.mask,
        allocated_mask=state.indexes.allocated_mask,
        request=request,
        exclusive=exclusive,
        max_full_hint_numa_nodes=ctx.max_full_hint_numa_nodes,
        max_hints=ctx.max_hints,
    )


@lru_cache(maxsize=64)
def _hints_for(
    topology: CPUTopology,
    state_topology: CPUTopology,
    *,
    reserved_mask: int,
    allocated_mask: int,
    request: int,
    exclusive: bool,
    max_full_hint_numa_nodes: int,
    max_hints: int,
) -> tuple[TopologyHint, ...]:
    """:func:`calculate_hints` from exactly what it reads (a refusal raises, never cached)."""
    try:
        try:
            min_needed = numa_count_to_fit(topology, request)
        except HintError as err:
            raise HintError(
                f"GetNUMANodesCountToFitCPUReq failed with error: {err}", kind=err.kind
            ) from err
        if not exclusive and min_needed > 1:
            raise HintError(NOT_EXCLUSIVE_TOO_LARGE)
        try:
            per_socket = topology.numas_per_socket()
        except TopologyError as err:
            # A refusal, not the topology's INVALID: the request is fine, but this node's
            # shape is one the hint rule cannot handle.
            raise HintError(str(err)) from err
    except HintError as err:
        raise HintError(f"calculateHints failed with error: {err}", kind=err.kind) from err
    numas = topology.numa_nodes()
    # Each node's available CPUs (``state.numa_available``) and whether it has allocated ones
    # (``state.allocated_cpuset``), counted on the masks without building a set per node.
    masks = state_topology.numa_masks()
    free_mask = ~allocated_mask & ~reserved_mask
    facts = NUMAFacts(
        numas=numas,
        available={n: (masks.get(n, 0) & free_mask).bit_count() for n in numas},
        allocated=frozenset(n for n in numas if masks.get(n, 0) & allocated_mask),
        sockets=_numa_sockets(topology),
        numas_per_socket=per_socket,
        request=request,
        min_needed=min_needed,
        exclusive=exclusive,
    )
    if len(numas) <= max_full_hint_numa_nodes:
        return full_hints(facts)
    return smallest_size_hints(facts, max_hints)


def _numas_without_exclusive_dedicated(state: CPUState, ctx: PolicyContext) -> frozenset[int]:
    """v0.5.47's ``GetFilteredNUMASet(CheckDedicatedNUMABindingNUMAExclusive)``: NUMA nodes
    where no dedicated container with ``numa_binding`` and ``numa_exclusive`` has CPUs."""
    taken: set[int] = set()
    for key in state.dedicated_containers():
        entry = state.require_entry(*key)
        if is_numa_exclusive(entry.annotations):
            cpus, _ = state.placement_cpus(entry.placement)
            taken.update(numa_aware_assignments(ctx.topology, cpus))
    return frozenset(n for n in ctx.topology.numa_nodes() if n not in taken)


def _extra_state_hint(
    pod_name: str, extra_numa_sets: Mapping[str, str] | None, free: frozenset[int]
) -> TopologyHint | None:
    """§8.3 step 3: the extra state file's NUMA set for ``<pod name>-0``, if usable."""
    if not extra_numa_sets:
        return None
    text = extra_numa_sets.get(f"{pod_name}-0")
    if text is None:
        return None
    try:
        numas = CPUSet.parse(text)
    except ValueError:
        return None  # the reference only logs a malformed entry and computes hints instead
    if not set(numas.ids()) <= free:
        return None
    return TopologyHint(numas.ids(), True)


def _dedicated_hints(
    state: CPUState,
    ctx: PolicyContext,
    prepared: PreparedRequest,
    extra_numa_sets: Mapping[str, str] | None,
) -> tuple[TopologyHint, ...] | None:
    request = prepared.request
    # a. Sidecars follow the main container.
    if request.container_type is ContainerType.SIDECAR:
        return None
    # b. An existing allocation that is large enough is the answer; a smaller one is ignored.
    # At v0.5.47 any existing allocation is (``RegenerateHints(info, false)``): the NUMA
    # nodes of its CPUs, whatever its size.
    info = state.allocation_info(request.pod_uid, request.container_name)
    if info is not None and ctx.at_v0_5_47:
        nodes = tuple(numa_aware_assignments(ctx.topology, info.allocation_result))
        return (TopologyHint(nodes, True),)
    if info is not None:
        if info.original_allocation_result.size() >= prepared.req_int:
            nodes = tuple(sorted(info.topology_aware_assignments or {}))
            return (TopologyHint(nodes, True),)
        state = apply_cpu_event(state, ContainerRemoved(request.pod_uid, request.container_name))
    # c. The extra state file (at v0.5.47 only exclusive dedicated NUMA nodes are taken);
    #    the free NUMA nodes are worked out only when there is such a file to read.
    if extra_numa_sets:
        free = (
            _numas_without_exclusive_dedicated(state, ctx)
            if ctx.at_v0_5_47
            else state.numas_without_numa_binding()
        )
        extra = _extra_state_hint(request.pod_name, extra_numa_sets, free)
        if extra is not None:
            return (extra,)
    # d. Enumeration: at v0.5.47 with the allocation options (policy.cpu.dedicated_hints).
    if ctx.at_v0_5_47:
        return _hints_v0547(state, ctx, prepared)
    return calculate_hints(state, ctx, prepared.req_int, prepared.numa_exclusive)


def _hints_v0547(
    state: CPUState, ctx: PolicyContext, prepared: PreparedRequest
) -> tuple[TopologyHint, ...]:
    numas = ctx.topology.numa_nodes()
    try:
        hints = dedicated_hints_v0547(
            ctx.topology,
            prepared.req_float,
            prepared.numa_exclusive,
            prepared.annotations,
            available={n: state.numa_available(n, ctx.reserved) for n in numas},
            allocated=frozenset(n for n in numas if state.allocated_cpuset(n)),
            numa_number_key=ctx.reference.numa_number_annotation_key,
            numa_ids_key=ctx.reference.numa_ids_annotation_key,
            candidate_numas=lambda number: _non_binding_candidates(state, ctx, prepared, number),
        )
    except PolicyError as err:
        raise HintError(f"calculateHints failed with error: {err}", kind=err.kind) from err
    if len(numas) <= ctx.max_full_hint_numa_nodes:
        return hints
    # qrmd's reduced answer beyond --max-full-hint-numa-nodes, as at v0.5.3: the hints of the
    # smallest size that has any, in the reference's order, at most ctx.max_hints of them
    # (the reference's full answer can run to tens of thousands of hints).
    smallest = min(len(h.nodes) for h in hints)
    return tuple(h for h in hints if len(h.nodes) == smallest)[: ctx.max_hints]


def _non_binding_candidates(
    state: CPUState, ctx: PolicyContext, prepared: PreparedRequest, numa_number: int
) -> frozenset[int]:
    """v0.5.47's ``filterNUMANodesByNonBinding`` for a dedicated request (spec
    cpu-policy-v0.5.47 (c) 9; ``policy_hint_handlers.go:714-761``), with the quantities SNB
    hints use (``policy.cpu.snb``).

    Of the NUMA nodes no stored container is anti-affine to: a node hosting no SNB or
    dedicated NUMA-binding container stays only if the other such nodes still hold the
    non-binding shared requests; a binding node stays if the request fits its available
    quantity, or whatever it holds when the NUMA number is above 1.
    """
    avoided = anti_affine_numas(state, ctx, prepared.qos_level, prepared.annotations)
    binding = binding_numas(state)
    masks = ctx.topology.numa_masks()
    non_binding_cpus = CPUSet.from_mask(
        sum(m for n, m in masks.items() if n not in binding) & ~ctx.reserved.mask
    ).difference(CPUSet.from_mask(state.indexes.allocated_mask))
    requested = non_binding_shared_requested(state, ctx)
    quantities = numa_available_quantities(state, ctx)
    kept: set[int] = set()
    for numa in sorted(masks):
        if numa in avoided:
            continue
        quantity = quantities[numa]
        if numa not in binding:
            if cpu_is_sufficient(requested, non_binding_cpus.size() - quantity):
                kept.add(numa)
        elif cpu_is_sufficient(prepared.req_float, quantity) or numa_number > 1:
            kept.add(numa)
    return frozenset(kept)


def topology_hints(
    state: CPUState,
    ctx: PolicyContext,
    prepared: PreparedRequest,
    extra_numa_sets: Mapping[str, str] | None = None,
    numa_headroom: Mapping[int, float] | None = None,
) -> HintsReply:
    """Answer GetTopologyHints for a prepared request (§8). Reads the state, changes nothing.

    Args:
        state: the CPU state.
        ctx: topology, reserve, hint limits.
        prepared: the request after ``prepare_request``.
        extra_numa_sets: the extra state file's ``memoryEntries`` (``"<pod>-0"`` → NUMA list),
            or None when that option is off.
        numa_headroom: sys-advisor's per-NUMA headroom kept in the state (RNB hints at
            v0.5.47); None or empty when none was sent.

    Returns:
        The reply; ``hints is None`` for no preference.

    Raises:
        QoSError: the level has no handler ("katalyst QoS level: %s is not supported yet").
        HintError: dedicated_cores without NUMA binding, or calculate_hints refused; the
            message starts with the pod and container.
    """
    request = prepared.request
    labels, annotations = prepared.labels, prepared.annotations
    if prepared.is_init or prepared.is_debug:
        return HintsReply.echo(request, labels, annotations, None)
    if ctx.at_v0_5_47 and prepared.qos_level == SYSTEM_CORES:
        return HintsReply.echo(request, labels, annotations, None)  # v0.5.47: no preference
    try:
        check_handled_level(prepared.qos_level)
    except QoSError as err:
        raise QoSError(str(err), subject=request.describe()) from err
    if prepared.qos_level == SHARED_CORES and ctx.at_v0_5_47:
        # v0.5.47: SNB hints, and the non-binding capacity check (policy.cpu.snb_hints).
        try:
            shared = shared_hints(state, ctx, prepared)
        except SNBHintError as err:
            raise SNBHintError(str(err), kind=err.kind, subject=request.describe()) from err
        return HintsReply.echo(request, labels, annotations, shared)
    if (
        prepared.qos_level == RECLAIMED_CORES
        and ctx.at_v0_5_47
        and ctx.reference.enable_reclaim_numa_binding
        and prepared.numa_binding
    ):
        # v0.5.47 reclaimed cores with NUMA binding (policy.cpu.rnb_hints).
        try:
            reclaimed = reclaimed_binding_hints(state, ctx, prepared, numa_headroom or {})
        except SNBHintError as err:
            raise SNBHintError(str(err), kind=err.kind, subject=request.describe()) from err
        return HintsReply.echo(request, labels, annotations, reclaimed)
    if prepared.qos_level != DEDICATED_CORES:
        return HintsReply.echo(request, labels, annotations, None)
    try:
        # v0.5.47 refuses a dedicated pod being resized in place (its kept annotation).
        if ctx.at_v0_5_47 and prepared.annotations.get(INPLACE_UPDATE_RESIZING_KEY) == "true":
            raise HintError(NO_INPLACE_RESIZE)
        if not prepared.numa_binding:
            raise HintError(NO_NUMA_BINDING)
        hints = _dedicated_hints(state, ctx, prepared, extra_numa_sets)
    except HintError as err:
        raise HintError(str(err), kind=err.kind, subject=request.describe()) from err
    return HintsReply.echo(request, labels, annotations, hints)
