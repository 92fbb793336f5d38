"""Turning a validated response's blocks into cpusets (cpu-policy §11.7).

1. Every CPU is available; no block has CPUs yet.
2. Static pools (``reserve``) that the state holds keep their CPUs: their single NUMA ``-1``
   block is the pool's **current** cpuset, taken out of the available CPUs.
3. For each real NUMA node, ascending, and its blocks in §11.6 order: a block not yet mapped
   gets ``take_by_topology`` of what is still available in that NUMA node.
4. Then the NUMA ``-1`` blocks in §11.6 order: ``take_by_numa_balance`` of what is still
   available anywhere (spreading them keeps memory placement as stable as possible).

At Katalyst v0.5.47 (``generateBlockCPUSet``, ``policy_advisor_handler.go:871-992``) step 3
changes for NUMA-bound pods; the other steps are the same (its forbidden ``interrupt`` pool is
never created by qrmd):

3a. In each NUMA node the blocks of ``dedicated`` entries go first. A block keeps the CPUs its
    container already has in that NUMA node: ``take_by_topology`` (L3-aligned) among them when
    they are enough, else those plus the missing ones from the rest of the NUMA node. A
    dedicated block whose container is not in the state, or has no CPUs in that NUMA node,
    is skipped there, as the reference does.
3b. Then the other blocks of that NUMA node, ``take_by_topology`` (not L3-aligned).
3c. A NUMA node holding a dedicated block, or a block owned by an ``isolation*`` pool or a
    shared-NUMA-binding pool (``<base>-NUMA<id>``), is withheld whole from the NUMA ``-1``
    blocks, so non-binding pools never share a NUMA node with NUMA-bound pods.

The block ids of one response thus become disjoint cpusets; entries sharing an id share CPUs.
"""

from __future__ import annotations

from policy.cpu.advisor.response import NO_NUMA, POOL_SUB_ENTRY, AdvisorResponse, Block
from policy.cpu.advisor.validation import BlockIndex
from policy.cpu.snb import NUMA_POOL_INFIX
from policy.errors import ErrorKind, PolicyError
from policy.state.cpu_state import CPUState
from policy.state.entries import DEDICATED_OWNER, STATIC_POOLS
from policy.topology.cpuset import CPUSet
from policy.topology.model import CPUTopology
from policy.topology.selection import SelectionError, take_by_numa_balance, take_by_topology

__all__ = ["BlockCPUSets", "BlockError", "generate_block_cpusets"]

#: Block id → its CPUs.
BlockCPUSets = dict[str, CPUSet]

#: The reference's ``PoolNamePrefixIsolation``.
_ISOLATION_PREFIX = "isolation"


class BlockError(PolicyError):
    """Blocks that cannot be given CPUs; the message is the reference's.

    A block the CPUs cannot satisfy is a ``SHORTAGE`` (the selection's kind); a static pool
    without its one block is ``INVALID``.
    """

    kind = ErrorKind.INVALID


def generate_block_cpusets(
    cpu: CPUState, response: AdvisorResponse, index: BlockIndex, *, at_v0_5_47: bool = False
) -> BlockCPUSets:
    """Give every block of a validated response its CPUs (§11.7).

    Args:
        cpu: the current CPU state (the static pools' cpusets).
        response: the validated response.
        index: its blocks by NUMA id, from validation.
        at_v0_5_47: the reference level's NUMA-bound step (3a-3c of the module text).

    Returns:
        Block id → cpuset.

    Raises:
        BlockError: a static pool without exactly one NUMA ``-1`` block, or a block the
            available CPUs cannot satisfy (the reference's messages).
    """
    topology = cpu.topology
    # 1. Everything is available.
    available = topology.cpu_details.cpus()
    mapped: BlockCPUSets = {}
    # 2. Static pools keep their current CPUs.
    for pool in sorted(STATIC_POOLS):
        current = cpu.pool_cpus(pool)
        if current is None:
            continue
        info = response.info(pool, POOL_SUB_ENTRY)
        blocks = None if info is None else info.numa_blocks.get(NO_NUMA)
        if not blocks or len(blocks) != 1:
            raise BlockError(f"blocks of pool: {pool} is invalid")
        mapped[blocks[0].block_id] = current
        available = available.difference(current)
    # 3. NUMA-aware blocks, by topology best fit inside their NUMA node.
    if at_v0_5_47:
        available = _numa_bound_blocks_v0_5_47(cpu, response, index, available, mapped)
    for numa in sorted(n for n in index.by_numa if n != NO_NUMA and not at_v0_5_47):
        numa_available = available.intersection(topology.cpu_details.cpus_in_numa_nodes(numa))
        for block in index.by_numa[numa]:
            if block.block_id in mapped:
                continue
            try:
                cpus = take_by_topology(topology, numa_available, block.result)
            except SelectionError as err:
                raise BlockError(
                    kind=err.kind,
                    reason=f"allocate cpuset for NUMA Aware block: {block.block_id} in NUMA: "
                    f"{numa} failed with error: {err}, numaAvailableCPUs: {numa_available.size()}"
                    f"({numa_available}), blockResult: {block.result}",
                ) from err
            mapped[block.block_id] = cpus
            numa_available = numa_available.difference(cpus)
            available = available.difference(cpus)
    # 4. Blocks tied to no NUMA node, spread by NUMA balance.
    for block in index.by_numa.get(NO_NUMA, []):
        if block.block_id in mapped:
            continue
        try:
            cpus, rest = take_by_numa_balance(topology, available, block.result)
        except SelectionError as err:
            raise BlockError(
                kind=err.kind,
                reason=f"allocate cpuset for non NUMA Aware block: {block.block_id} failed with "
                f"error: {err}, availableCPUs: {available.size()}({available}), "
                f"blockResult: {block.result}",
            ) from err
        mapped[block.block_id] = cpus
        available = rest
    return mapped


def _numa_bound_blocks_v0_5_47(
    cpu: CPUState,
    response: AdvisorResponse,
    index: BlockIndex,
    available: CPUSet,
    mapped: BlockCPUSets,
) -> CPUSet:
    """Steps 3a-3c at v0.5.47: fill ``mapped`` and return what NUMA ``-1`` blocks may use."""
    topology = cpu.topology
    for numa in sorted(n for n in index.by_numa if n != NO_NUMA):
        numa_available = available.intersection(topology.cpu_details.cpus_in_numa_nodes(numa))
        withheld = False
        blocks = index.by_numa[numa]
        # 3a. Dedicated blocks keep the CPUs their container already has here.
        for block in blocks:
            dedicated = _dedicated_reference(response, index, block)
            if dedicated is None or block.block_id in mapped:
                continue
            entry = cpu.allocation_info(*dedicated)
            assignments = None if entry is None else entry.topology_aware_assignments
            if assignments is None or numa not in assignments:
                continue
            already = assignments[numa].intersection(numa_available)
            if already.size() >= block.result:
                cpus = _take(
                    topology,
                    already,
                    block.result,
                    numa=numa,
                    numa_available=numa_available,
                    block=block,
                    align_by_l3=True,
                )
            else:
                extra = _take(
                    topology,
                    numa_available.difference(already),
                    block.result - already.size(),
                    numa=numa,
                    numa_available=numa_available,
                    block=block,
                    align_by_l3=True,
                )
                cpus = extra.union(already)
            mapped[block.block_id] = cpus
            numa_available = numa_available.difference(cpus)
            available = available.difference(cpus)
            withheld = True
        # 3b. The other blocks of this NUMA node.
        for block in blocks:
            if block.block_id in mapped or _dedicated_reference(response, index, block):
                continue
            cpus = _take(
                topology,
                numa_available,
                block.result,
                numa=numa,
                numa_available=numa_available,
                block=block,
                align_by_l3=False,
            )
            mapped[block.block_id] = cpus
            numa_available = numa_available.difference(cpus)
            available = available.difference(cpus)
            if any(_is_numa_bound_pool(pool) for pool in _owner_pools(response, index, block)):
                withheld = True
        # 3c. A NUMA node of NUMA-bound pods is not shared with non-binding blocks.
        if withheld:
            available = available.difference(numa_available)
    return available


def _owner_pools(response: AdvisorResponse, index: BlockIndex, block: Block) -> list[str]:
    """The owner pool names of a block's references (the reference's ``OwnerPoolEntryMap``)."""
    pools: list[str] = []
    for entry, sub in index.references.get(block.block_id, []):
        info = response.info(entry, sub)
        if info is not None:
            pools.append(info.owner_pool_name)
    return pools


def _dedicated_reference(
    response: AdvisorResponse, index: BlockIndex, block: Block
) -> tuple[str, str] | None:
    """The ``dedicated`` entry a block belongs to, if any.

    The reference keys ``OwnerPoolEntryMap`` by owner pool name, so of several dedicated
    references the last one written stands; this takes the last in response order.
    """
    found: tuple[str, str] | None = None
    for entry, sub in index.references.get(block.block_id, []):
        info = response.info(entry, sub)
        if info is not None and info.owner_pool_name == DEDICATED_OWNER:
            found = (entry, sub)
    return found


def _is_numa_bound_pool(pool: str) -> bool:
    """``IsIsolationPool`` or ``IsShareNUMABindingPool`` (``commonstate/pool.go:59-69``)."""
    return pool.startswith(_ISOLATION_PREFIX) or NUMA_POOL_INFIX in pool


def _take(
    topology: CPUTopology,
    candidates: CPUSet,
    n: int,
    *,
    numa: int,
    numa_available: CPUSet,
    block: Block,
    align_by_l3: bool,
) -> CPUSet:
    """``TakeByTopology`` for a NUMA-aware block, with the reference's error text."""
    try:
        return take_by_topology(topology, candidates, n, align_by_l3=align_by_l3)
    except SelectionError as err:
        raise BlockError(
            kind=err.kind,
            reason=f"allocate cpuset for NUMA Aware block: {block.block_id} in NUMA: "
            f"{numa} failed with error: {err}, numaAvailableCPUs: {numa_available.size()}"
            f"({numa_available}), blockResult: {block.result}",
        ) from err
