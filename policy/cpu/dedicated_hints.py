"""Hints for a dedicated NUMA-binding container at Katalyst v0.5.47 (cpu-policy-v0.5.47 (b)).

v0.5.47's ``calculateHints`` (``policy_hint_handlers.go:197-491``) with the allocation options
of ``policy.cpu.dedicated_options``, in the reference's order:

1. ``GetNUMANodesCountToFitCPUReq`` on the float request: CPUs per NUMA node rounded up (an
   uneven machine only warns at v0.5.47), at least 1 NUMA node.
2. The options are read (NUMA ids first; their count is the NUMA number).
3. Refusals: a non-exclusive request larger than one NUMA node unless the NUMA number is
   above 1; numa_exclusive with distribute_evenly_across_numa; numa_exclusive with
   full_pcpus_pairing; a machine whose NUMA nodes do not split evenly over its sockets.
4. Each NUMA node's available CPUs (none on a node with allocated CPUs, for an exclusive
   container).
5. Every mask of 1..N nodes (N+1 bounded to min+1 beyond 16 NUMA nodes), by size then
   lexicographically, skipped when: smaller than the minimum; more than one node for a
   non-exclusive request with NUMA number ≤ 1; not enough available CPUs (0.0001 slack).
   The smallest size that got this far is recorded *here*, before the filters below:
   a. at most NUMAs-per-socket nodes that cross sockets;
   b. align_by_socket: its sockets ≠ ceil(request / CPUs per socket);
   c. distribute_evenly: request not divisible by its size, or a node with fewer than
      request/size available CPUs; with full_pcpus_pairing only the **first** node is
      checked, by the whole-core test (455-459);
   d. full_pcpus_pairing alone: fewer whole free cores than floor(request / threads per
      core), or fewer available CPUs than the request;
   e. NUMA ids named: the mask is not exactly them; else a NUMA number: its size differs.
   The option checks use the request truncated to an int.
6. ``preferred``: size == the NUMA number when set, else == the size recorded in 5.
7. No hint left: "no available cpu hints" (v0.5.3 answered an empty list).

Step 4 also drops the NUMA nodes outside ``filterNUMANodesByNonBinding``'s answer
(cpu-policy-v0.5.47 (c) 9): the caller computes it from the state, given the NUMA number
(``candidate_numas``), after the refusals of step 3 as the reference does.

Not reproduced, each a no-op on a node qrmd serves: the pre-occupation preference of
exclusive hints (qrmd keeps no pre-occupation entries, and without them the reference
changes nothing); the dedicated optimizer chain (its default is empty, and qrmd refuses the
two optimizers it would run at start-up).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Collection, Mapping, Sequence
from functools import lru_cache

from policy.cpu.dedicated_options import DedicatedOptions, read_options
from policy.cpu.request import TopologyHint
from policy.errors import ErrorKind, PolicyError
from policy.topology.cpuset import CPUSet
from policy.topology.model import CPUTopology, TopologyError

__all__ = [
    "LARGE_NUMAS_POINT",
    "NO_AVAILABLE_CPU_HINTS",
    "DedicatedHintError",
    "can_align_by_socket",
    "can_distribute_evenly",
    "can_full_pcpus_pairing",
    "dedicated_hints_v0547",
    "free_core_count",
    "numa_count_to_fit_v0547",
]

#: ``machine.LargeNUMAsPoint``: beyond it masks stop at the minimum size + 1.
LARGE_NUMAS_POINT = 16
#: ``cpuutil.ErrNoAvailableCPUHints``.
NO_AVAILABLE_CPU_HINTS = "no available cpu hints"
#: The reference's refusal texts (policy_hint_handlers.go at v0.5.47).
NOT_EXCLUSIVE_TOO_LARGE_V0547 = (
    "NUMA not exclusive binding container with no distribute_evenly_across_numa has request "
    "larger than 1 NUMA"
)
EXCLUSIVE_AND_DISTRIBUTE = (
    "NUMA exclusive and distribute_evenly_across_numa is not supported at the same time"
)
EXCLUSIVE_AND_PAIRING = "NUMA exclusive and full_pcpus_pairing is not supported at the same time"

# ``cpuutil.CPUIsSufficient``: the smallest CPU unit is 0.001.
_SLACK = 0.0001


class DedicatedHintError(PolicyError):
    """Hints refused for a dedicated NUMA-binding request at v0.5.47 (the reference's text)."""

    kind = ErrorKind.REFUSED


def numa_count_to_fit_v0547(topology: CPUTopology, request: float) -> int:
    """v0.5.47's ``GetNUMANodesCountToFitCPUReq``: NUMA nodes needed for ``request`` CPUs.

    Raises:
        DedicatedHintError: "there is no NUMA in cpuTopology", or "invalid cpu req: %.3f in
            topology with NUMAs count: %d and CPUs count: %d".
    """
    numas = len(topology.numa_nodes())
    if numas == 0:
        raise DedicatedHintError("there is no NUMA in cpuTopology")
    per_numa = -(-topology.num_cpus // numas)
    needed = max(math.ceil(request / per_numa), 1)
    if needed > numas:
        raise DedicatedHintError(
            f"invalid cpu req: {request:.3f} in topology with NUMAs count: {numas} "
            f"and CPUs count: {topology.num_cpus}"
        )
    return needed


def free_core_count(topology: CPUTopology, available: CPUSet) -> int:
    """``calculator.GetFreeCores``: cores all of whose CPUs are available."""
    per_core = topology.cpus_per_core
    return sum(
        1
        for mask in topology.core_masks().values()
        if (mask & available.mask).bit_count() == per_core
    )


def can_full_pcpus_pairing(topology: CPUTopology, request: int, available: CPUSet) -> bool:
    """``canFullPCPUsPairing``: enough whole free cores for floor(request / threads per core),
    and enough available CPUs for the request."""
    if free_core_count(topology, available) < request // topology.cpus_per_core:
        return False
    return available.size() >= request


def can_align_by_socket(topology: CPUTopology, nodes: Sequence[int], request: int) -> bool:
    """``canAlignedBySocket``: the mask's sockets number ceil(request / CPUs per socket)."""
    per_socket = topology.cpus_per_socket
    if per_socket == 0:
        return False
    sockets = topology.cpu_details.sockets_in_numa_nodes(*nodes).size()
    return sockets == -(-request // per_socket)


def can_distribute_evenly(
    topology: CPUTopology,
    nodes: Sequence[int],
    request: int,
    available: CPUSet,
    full_pcpus_pairing: bool,
) -> bool:
    """``canDistributeEvenlyAcrossNuma``: request/len(nodes) CPUs available on each node.

    With full_pcpus_pairing the reference returns the whole-core test of the *first* node
    (its loop returns inside the first iteration), so the other nodes go unchecked.
    """
    if not nodes or request % len(nodes) != 0:
        return False
    per_numa = request // len(nodes)
    for numa in nodes:
        here = topology.cpus_in_numa(numa).intersection(available)
        if full_pcpus_pairing:
            return can_full_pcpus_pairing(topology, per_numa, here)
        if here.size() < per_numa:
            return False
    return True


def dedicated_hints_v0547(
    topology: CPUTopology,
    request: float,
    exclusive: bool,
    annotations: Mapping[str, str],
    *,
    available: Mapping[int, CPUSet],
    allocated: frozenset[int],
    numa_number_key: str,
    numa_ids_key: str,
    candidate_numas: Callable[[int], Collection[int]] | None = None,
) -> tuple[TopologyHint, ...]:
    """The module's rule (steps 1–7): the hints of a dedicated NUMA-binding request.

    Args:
        topology: the machine.
        request: the container's CPU request (float).
        exclusive: ``numa_exclusive``.
        annotations: the request's normalised annotations (the options live there).
        available: each NUMA node's available CPUs (default cpuset minus the reserve).
        allocated: NUMA nodes with allocated CPUs.
        numa_number_key: ``--numa-number-annotation-key``.
        numa_ids_key: ``--numa-ids-annotation-key``.
        candidate_numas: given the NUMA number, the nodes ``filterNUMANodesByNonBinding``
            keeps; None keeps every node.

    Returns:
        At least one hint.

    Raises:
        DedicatedHintError: the reference's refusal, "no available cpu hints" included.
        OptionError: an option annotation that does not parse.
    """
    numas = topology.numa_nodes()
    # 1. The minimum number of NUMA nodes.
    try:
        min_needed = numa_count_to_fit_v0547(topology, request)
    except DedicatedHintError as err:
        raise DedicatedHintError(f"GetNUMANodesCountToFitCPUReq failed with error: {err}") from err
    # 2. The options.
    options = read_options(
        annotations, numas, numa_number_key=numa_number_key, numa_ids_key=numa_ids_key
    )
    # 3. Refusals, in the reference's order.
    if topology.cpus_per_core == 0:
        raise DedicatedHintError("0 cpus per core, which is unexpected")
    if not exclusive and options.numa_number <= 1 and min_needed > 1:
        raise DedicatedHintError(NOT_EXCLUSIVE_TOO_LARGE_V0547)
    if exclusive and options.distribute_evenly:
        raise DedicatedHintError(EXCLUSIVE_AND_DISTRIBUTE)
    if exclusive and options.full_pcpus_pairing:
        raise DedicatedHintError(EXCLUSIVE_AND_PAIRING)
    try:
        per_socket = topology.numas_per_socket()
    except TopologyError as err:
        raise DedicatedHintError(f"NUMAsPerSocket failed with error: {err}") from err
    # 4. What each node offers: nothing on a node an exclusive request cannot share, or one
    # the non-binding filter drops.
    kept = frozenset(numas if candidate_numas is None else candidate_numas(options.numa_number))
    usable = {
        n: CPUSet()
        if (exclusive and n in allocated) or n not in kept
        else available.get(n, CPUSet())
        for n in numas
    }
    total = CPUSet.union_all(usable.values())
    hints, min_affinity = _masks(
        topology, request, exclusive, options, usable, total, min_needed, per_socket
    )
    # 6. Preferred.
    if options.numa_number != 0:
        min_affinity = options.numa_number
    out = tuple(TopologyHint(nodes, len(nodes) == min_affinity) for nodes in hints)
    # 7. Nothing left is an error at v0.5.47.
    if not out:
        raise DedicatedHintError(NO_AVAILABLE_CPU_HINTS, kind=ErrorKind.SHORTAGE)
    return out


#: Up to this many NUMA nodes, which node sets span sockets is remembered per topology.
_REMEMBERED_CROSSINGS_NUMAS = 8


@lru_cache(maxsize=8)
def _socket_crossings(topology: CPUTopology) -> dict[tuple[int, ...], bool]:
    """The remembered ``check_numa_cross_sockets`` answers of one topology, filled as asked."""
    del topology  # the key of the memo
    return {}


def _crosses_sockets(
    topology: CPUTopology, nodes: tuple[int, ...], crossing: dict[tuple[int, ...], bool] | None
) -> bool:
    if crossing is None:
        return topology.check_numa_cross_sockets(nodes)
    answer = crossing.get(nodes)
    if answer is None:
        answer = crossing[nodes] = topology.check_numa_cross_sockets(nodes)
    return answer


def _masks(  # noqa: PLR0917 - the step's inputs, named at its one call
    topology: CPUTopology,
    request: float,
    exclusive: bool,
    options: DedicatedOptions,
    usable: Mapping[int, CPUSet],
    total: CPUSet,
    min_needed: int,
    per_socket: int,
) -> tuple[list[tuple[int, ...]], int]:
    """Step 5: the masks that pass, and the smallest size that passed the capacity check."""
    numas = topology.numa_nodes()
    bound = len(numas) if len(numas) <= LARGE_NUMAS_POINT else min_needed + 1
    req_int = int(request)
    min_affinity = len(topology.cpu_details.numa_nodes())
    out: list[tuple[int, ...]] = []
    # Each node's usable CPUs counted once: the capacity check adds them up for every set.
    sizes = {n: usable[n].size() for n in numas}
    # Whether a set of nodes spans sockets is a fact of the machine: remembered per topology
    # up to 8 NUMA nodes (at most 255 sets), asked afresh on larger machines.
    crossing = _socket_crossings(topology) if len(numas) <= _REMEMBERED_CROSSINGS_NUMAS else None
    for size in range(1, min(bound, len(numas)) + 1):
        if size < min_needed:
            continue
        if not exclusive and options.numa_number <= 1 and size > 1:
            break
        for nodes in itertools.combinations(numas, size):
            if not request < sum(map(sizes.__getitem__, nodes)) + _SLACK:
                continue
            min_affinity = min(min_affinity, size)
            # a. Sockets.
            if size <= per_socket and _crosses_sockets(topology, nodes, crossing):
                continue
            # b. align_by_socket.
            if options.align_by_socket and not can_align_by_socket(topology, nodes, req_int):
                continue
            # c./d. distribute_evenly, full_pcpus_pairing.
            if options.distribute_evenly:
                if not can_distribute_evenly(
                    topology, nodes, req_int, total, options.full_pcpus_pairing
                ):
                    continue
            elif options.full_pcpus_pairing:
                in_mask = topology.cpu_details.cpus_in_numa_nodes(*nodes).intersection(total)
                if not can_full_pcpus_pairing(topology, req_int, in_mask):
                    continue
            # e. NUMA ids, else NUMA number.
            if options.numa_ids:
                if frozenset(nodes) != options.numa_ids:
                    continue
            elif options.numa_number not in (0, size):
                continue
            out.append(nodes)
    return out, min_affinity
