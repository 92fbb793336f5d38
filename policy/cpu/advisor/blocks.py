"""Turning a validated response's blocks into cpusets (cpu-policy §11.7).

1. Every CPU is available; no block has CPUs yet.
2. Static pools (``reserve``) that the state holds keep their CPUs: their single NUMA ``-1``
   block is the pool's **current** cpuset, taken out of the available CPUs.
3. For each real NUMA node, ascending, and its blocks in §11.6 order: a block not yet mapped
   gets ``take_by_topology`` of what is still available in that NUMA node.
4. Then the NUMA ``-1`` blocks in §11.6 order: ``take_by_numa_balance`` of what is still
   available anywhere (spreading them keeps memory placement as stable as possible).

The block ids of one response thus become disjoint cpusets; entries sharing an id share CPUs.
"""

from __future__ import annotations

from policy.cpu.advisor.response import NO_NUMA, POOL_SUB_ENTRY, AdvisorResponse
from policy.cpu.advisor.validation import BlockIndex
from policy.errors import ErrorKind, PolicyError
from policy.state.cpu_state import CPUState
from policy.state.entries import STATIC_POOLS
from policy.topology.cpuset import CPUSet
from policy.topology.selection import SelectionError, take_by_numa_balance, take_by_topology

__all__ = ["BlockCPUSets", "BlockError", "generate_block_cpusets"]

#: Block id → its CPUs.
BlockCPUSets = dict[str, CPUSet]


class BlockError(PolicyError):
    """Blocks that cannot be given CPUs; the message is the reference's.

    A block the CPUs cannot satisfy is a ``SHORTAGE`` (the selection's kind); a static pool
    without its one block is ``INVALID``.
    """

    kind = ErrorKind.INVALID


def generate_block_cpusets(
    cpu: CPUState, response: AdvisorResponse, index: BlockIndex
) -> BlockCPUSets:
    """Give every block of a validated response its CPUs (§11.7).

    Args:
        cpu: the current CPU state (the static pools' cpusets).
        response: the validated response.
        index: its blocks by NUMA id, from validation.

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
    for numa in sorted(n for n in index.by_numa if n != NO_NUMA):
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
