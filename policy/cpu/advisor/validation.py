"""Validating a calculation result against the state (cpu-policy §11.6).

Three validators run, each on the whole response, and their errors are aggregated as the
reference's ``errors.NewAggregate`` prints them (one error: its text; several: ``[a, b]``,
duplicates once). Each validator stops at its first error; where the reference walks Go maps
(random order), this walks names and NUMA ids ascending (§15.11), so the first error is
deterministic.

1. *Dedicated entries*: the stored dedicated containers and the response's ``dedicated``
   sub-entries must name the same number of **pods** (§15.12) and each stored container must
   have a result of its own size (NUMA-binding: in total; otherwise per NUMA node).
2. *Static pools* (``reserve``): in the state exactly when in the response, owned by itself,
   one block on NUMA ``-1`` of the pool's size.
3. *Blocks* (:func:`get_blocks`): one NUMA node and one size per block id, every NUMA id in
   the topology (or ``-1``), no NUMA node and not the machine over capacity.

At Katalyst v0.5.47 a GetAdvice answer is first checked against its request
(:func:`validate_request`, ``ValidateRequest``): the state and the request must agree on the
shared containers bound to a NUMA node, as the state may have changed since the request.

Null entries: a top-level entry with no value makes the reference crash in ``GetBlocks``; here
it is a validation error naming the entry (the spec's rule), so the response is refused and
the state stays as it was.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from policy.cpu.advisor.response import (
    NO_NUMA,
    POOL_SUB_ENTRY,
    AdvisorResponse,
    Block,
    CalculationInfo,
)
from policy.cpu.snb import NUMA_POOL_INFIX
from policy.errors import ErrorKind, PolicyError
from policy.state.cpu_state import CPUState
from policy.state.entries import DEDICATED_OWNER, STATIC_POOLS
from policy.topology.model import CPUTopology

__all__ = [
    "AdvisorValidationError",
    "NumaBlocks",
    "aggregate",
    "get_blocks",
    "validate_blocks",
    "validate_dedicated_entries",
    "validate_request",
    "validate_response",
    "validate_static_pools",
]

#: One NUMA id's distinct blocks in §11.6 order, and every block's ``(entry, sub-entry)``
#: references (duplicates kept).
NumaBlocks = dict[int, list[Block]]


class AdvisorValidationError(PolicyError):
    """The response does not fit the state or the machine; the message is the reference's."""

    kind = ErrorKind.INVALID


@dataclass(frozen=True, slots=True)
class BlockIndex:
    """What :func:`get_blocks` found: blocks by NUMA id (sorted) and their references."""

    by_numa: NumaBlocks
    references: dict[str, list[tuple[str, str]]]


def aggregate(errors: Sequence[str]) -> str:
    """The reference's ``errors.NewAggregate(...).Error()``: one text, or ``[a, b]``."""
    seen: list[str] = []
    for message in errors:
        if message not in seen:
            seen.append(message)
    if len(errors) == 1 or len(seen) == 1:
        return seen[0]
    return "[" + ", ".join(seen) + "]"


def validate_request(cpu: CPUState, asked: frozenset[tuple[str, str]]) -> None:
    """``ValidateRequest`` (``validator/validator_cpu_advisor.go``:46-91 at tag v0.5.47).

    Every shared container bound to a NUMA node in the state, and every pool of them (the
    reference tags those pool entries so), must have been asked about as such; every entry
    asked about as such must still be in the state. The reference tells a container asked
    about without ``numa_binding`` ("has invalid owner pool name") from one not asked about at
    all; qrmd keeps only the keys it asked about as SNB, so both read as missing.

    Args:
        cpu: the state the answer would apply to.
        asked: the request's keys sent as shared cores with ``numa_binding``.

    Raises:
        AdvisorValidationError: the first disagreement, with the reference's message.
    """
    in_state: set[tuple[str, str]] = {
        (pool.pod_uid, POOL_SUB_ENTRY)
        for pool in cpu.pool_entries()
        if NUMA_POOL_INFIX in pool.pod_uid
    }
    in_state |= {
        entry.key for entry in cpu.entries() if entry.is_shared() and entry.is_numa_binding()
    }
    for pod_uid, name in sorted(in_state):
        if (pod_uid, name) not in asked:
            raise AdvisorValidationError(
                f"missing request entry for shared_cores with numa_binding pod: {pod_uid} "
                f"container: {name}"
            )
    for pod_uid, name in sorted(asked):
        present = (
            cpu.pool_cpus(pod_uid) is not None
            if name == POOL_SUB_ENTRY
            else cpu.entry(pod_uid, name) is not None
        )
        if not present:
            raise AdvisorValidationError(
                f"missing state entry for shared_cores with numa_binding pod: {pod_uid} "
                f"container: {name}"
            )


def validate_response(cpu: CPUState, response: AdvisorResponse) -> BlockIndex:
    """Run the three validators of §11.6 and return the blocks for §11.7.

    Args:
        cpu: the CPU state the response would apply to.
        response: the calculation result.

    Returns:
        The response's blocks by NUMA id, sorted, with their references.

    Raises:
        AdvisorValidationError: one or more validators failed; the aggregated message.
    """
    errors = [
        message
        for message in (
            validate_dedicated_entries(cpu, response),
            validate_static_pools(cpu, response),
            validate_blocks(cpu.topology, response),
        )
        if message is not None
    ]
    if errors:
        raise AdvisorValidationError(aggregate(errors))
    return get_blocks(response)


def validate_dedicated_entries(cpu: CPUState, response: AdvisorResponse) -> str | None:
    """Validator 1 of §11.6; the first error's message, or None."""
    stored: dict[str, list[str]] = {}
    for pod_uid, name in sorted(cpu.dedicated_containers()):
        stored.setdefault(pod_uid, []).append(name)
    calculated: dict[str, dict[str, CalculationInfo]] = {}
    for entry, sub, found in response.walk():
        if found.owner_pool_name == DEDICATED_OWNER:
            calculated.setdefault(entry, {})[sub] = found
    if len(stored) != len(calculated):
        return (
            f"dedicatedAllocationInfos length: {len(stored)} and dedicatedCalculationInfos "
            f"length: {len(calculated)} mismatch"
        )
    for pod_uid, names in stored.items():
        for name in names:
            info = calculated.get(pod_uid, {}).get(name)
            if info is None:
                return f"missing CalculationInfo for pod: {pod_uid} container: {name}"
            allocation = cpu.allocation_info(pod_uid, name)
            assert allocation is not None
            if not allocation.is_dedicated_numa_binding():
                quantities = info.numa_quantities()
                assigned = {
                    numa: cpus.size()
                    for numa, cpus in (allocation.topology_aware_assignments or {}).items()
                }
                # Both directions, allocation first, as the reference checks them.
                for numa in sorted(assigned):
                    if assigned[numa] != quantities.get(numa, 0):
                        return _numa_mismatch(
                            numa, quantities.get(numa, 0), assigned[numa], pod_uid, name
                        )
                for numa in sorted(quantities):
                    if quantities[numa] != assigned.get(numa, 0):
                        return _numa_mismatch(
                            numa, quantities[numa], assigned.get(numa, 0), pod_uid, name
                        )
            else:
                total = info.total_quantity()
                size = allocation.allocation_result.size()
                if total != size:
                    return (
                        f"pod: {pod_uid} container: {name} calculation result: {total} and "
                        f"allocation result: {size} mismatch"
                    )
    return None


def _numa_mismatch(numa: int, calculated: int, allocated: int, pod_uid: str, name: str) -> str:
    return (
        f"NUMA: {numa} calculation quantity: {calculated} and allocation quantity: "
        f"{allocated} mismatch, pod: {pod_uid} container: {name}"
    )


def validate_static_pools(cpu: CPUState, response: AdvisorResponse) -> str | None:
    """Validator 2 of §11.6; the first error's message, or None."""
    for pool in sorted(STATIC_POOLS):
        cpus = cpu.pool_cpus(pool)
        nil_state = cpus is None
        info = response.info(pool, POOL_SUB_ENTRY)
        nil_resp = info is None
        if nil_state != nil_resp:
            return (
                f"pool: {pool} nilStateEntry: {_go_bool(nil_state)} and nilRespEntry: "
                f"{_go_bool(nil_resp)} mismatch"
            )
        if cpus is None or info is None:
            continue
        if info.owner_pool_name != pool:
            return (
                f"pool: {pool} has invalid owner pool name: {info.owner_pool_name} "
                f"in cpu advisor resp"
            )
        blocks = info.numa_blocks.get(NO_NUMA)
        if len(info.numa_blocks) != 1 or blocks is None or len(blocks) != 1:
            return f"static pool: {pool} has invalid calculationInfo"
        total = info.total_quantity()
        if total != cpus.size():
            return (
                f"static pool: {pool} calculation result: {total} and allocation result: "
                f"{cpus.size()} mismatch"
            )
    return None


def validate_blocks(topology: CPUTopology, response: AdvisorResponse) -> str | None:
    """Validator 3 of §11.6; the first error's message, or None."""
    try:
        index = get_blocks(response)
    except AdvisorValidationError as err:
        return f"GetBlocks failed with error: {err}"
    numas = set(topology.cpu_details.numa_nodes())
    total = 0
    for numa in sorted(index.by_numa):
        if numa != NO_NUMA and numa not in numas:
            return f"NUMA: {numa} referred by blocks isn't in topology"
        quantity = sum(block.result for block in index.by_numa[numa])
        if numa != NO_NUMA:
            capacity = topology.cpu_details.cpus_in_numa_nodes(numa).size()
            if quantity > capacity:
                return f"numaQuantity: {quantity} exceeds NUMA capacity: {capacity} in NUMA: {numa}"
        total += quantity
    if total > topology.num_cpus:
        return f"numaQuantity: {total} exceeds total capacity: {topology.num_cpus}"
    return None


def get_blocks(response: AdvisorResponse) -> BlockIndex:
    """The response's distinct blocks per NUMA id in §11.6 order (``GetBlocks``).

    Raises:
        AdvisorValidationError: a top-level entry without a value (where the reference
            crashes); a block id in two NUMA nodes; a block id with two results.
    """
    by_numa: dict[int, dict[str, Block]] = {}
    numa_of: dict[str, int] = {}
    references: dict[str, list[tuple[str, str]]] = {}
    for name in sorted(response.entries):
        if response.entries[name] is None:
            raise AdvisorValidationError(
                f"entry: {name} has no value (a nil CalculationEntries), the response is refused"
            )
    for entry, sub, info in response.walk():
        for numa in sorted(info.numa_blocks):
            blocks = info.numa_blocks[numa]
            if blocks is None:
                continue
            known = by_numa.setdefault(numa, {})
            for block in blocks:
                found_numa = numa_of.get(block.block_id)
                if found_numa is not None:
                    if found_numa != numa:
                        raise AdvisorValidationError(
                            f"found block: {block.block_id} both in NUMA: {found_numa} and "
                            f"NUMA: {numa}, entry: {entry}, subEntry: {sub}"
                        )
                    current = by_numa[found_numa][block.block_id]
                    if current.result != block.result:
                        raise AdvisorValidationError(
                            f"found block: {current.go_string()} result is different with "
                            f"current block: {block.go_string()} result, entry: {entry}, "
                            f"subEntry: {sub}"
                        )
                known[block.block_id] = block
                numa_of[block.block_id] = numa
                references.setdefault(block.block_id, []).append((entry, sub))
    sorted_blocks = {
        numa: sorted(blocks.values(), key=lambda b: _block_order(b, references[b.block_id]))
        for numa, blocks in by_numa.items()
    }
    return BlockIndex(sorted_blocks, references)


def _block_order(block: Block, refs: list[tuple[str, str]]) -> tuple[int, str, int, str, str]:
    """The §11.6 comparator as a sort key: blocks referenced by more pods first, then by pod
    names; blocks of pools only: more pools first, then pool names; then the block id (the
    recommended tie-break, §15.11). Pods are counted per reference, not per pod (§15.12)."""
    pods = sorted(entry for entry, sub in refs if sub != POOL_SUB_ENTRY)
    pools = sorted(entry for entry, sub in refs if sub == POOL_SUB_ENTRY)
    if pods:
        return (-len(pods), "#".join(pods), 0, "", block.block_id)
    return (0, "", -len(pools), "#".join(pools), block.block_id)


def _go_bool(value: bool) -> str:
    return "true" if value else "false"
