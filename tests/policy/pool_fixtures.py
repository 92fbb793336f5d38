"""Builders for pool-engine tests: states made by emitting events through a ``Txn``.

The spec's example node is (16,2,4) with reserve ``0,2`` (§1.3, §3); ``fresh_state`` is that
node after start-up (§6.2: ``reserve = 0,2``, ``reclaim = 1,3,9,11``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from policy.cpu.context import PolicyContext
from policy.cpu.pool_startup import initialise_pools
from policy.cpu.timestamps import format_qrm_time
from policy.cpu.txn import Txn
from policy.state.entries import (
    DEDICATED_CORES,
    RAMPING,
    RECLAIMED_CORES,
    SHARED_CORES,
    ContainerEntry,
    InPool,
    OwnCPUs,
    Placement,
)
from policy.state.events import ContainerAllocated, Event
from policy.state.sections import State, apply_all, empty_state
from policy.topology.model import CPUTopology
from tests.policy.state_fixtures import container
from tests.topologies import SYNTH_16_2_4, cpus

__all__ = [
    "CTX",
    "RESERVED",
    "T0",
    "check_invariants",
    "cpus",
    "decide",
    "dedicated",
    "entry_of",
    "fresh_state",
    "on_ramp",
    "pools_of",
    "ramping",
    "reclaimed",
    "result_of",
    "shared",
    "with_events",
]

RESERVED = cpus("0,2")
#: The spec's example context: (16,2,4), reserve 0,2, no advisor, enable_reclaim false.
CTX = PolicyContext(topology=SYNTH_16_2_4, reserved=RESERVED)
#: An arbitrary creation time for containers (seconds since the epoch).
T0 = 1_715_000_000.0


def fresh_state(ctx: PolicyContext = CTX, topology: CPUTopology | None = None) -> State:
    """A node just started: empty state, then §6.2 steps 4-6."""
    txn = Txn(empty_state(topology or ctx.topology))
    initialise_pools(txn, ctx)
    return txn.state


def with_events(state: State, *events: Event) -> State:
    txn = Txn(state)
    txn.emit(*events)
    return txn.state


def decide(state: State, decision: Callable[..., Any], *args: Any) -> tuple[Txn, Any]:
    """Run a decision on a fresh Txn and check that replaying its events equals its state."""
    txn = Txn(state)
    out = decision(txn, *args)
    assert apply_all(txn.base, txn.events) == txn.state
    return txn, out


def shared(
    pod: str,
    placement: Placement,
    *,
    name: str = "c",
    quantity: float = 2.0,
    ramp_up: bool = False,
    pool: str = "",
    started: float = T0,
) -> ContainerAllocated:
    """A shared container; its owner follows its placement (the pool it is in, else "")."""
    owner = placement.pool_name if isinstance(placement, InPool) else ""
    return ContainerAllocated(
        container(
            pod,
            name,
            placement,
            qos=SHARED_CORES,
            ramp_up=ramp_up,
            owner=owner,
            quantity=quantity,
            cpuset_pool=pool,
            init_timestamp=format_qrm_time(started),
        )
    )


def ramping(state: State, pod: str, ctx: PolicyContext = CTX, **kw: Any) -> ContainerAllocated:
    """A new shared container ramping on the pooled CPUs, as Allocate stores it (§7.3 3a)."""
    pooled = state.cpu.pooled_cpus(ctx.reserved)
    return shared(pod, state.cpu.ramp_placement(pooled), ramp_up=True, **kw)


def reclaimed(pod: str, *, name: str = "c") -> ContainerAllocated:
    return ContainerAllocated(
        container(pod, name, InPool("reclaim"), qos=RECLAIMED_CORES, owner="reclaim")
    )


def dedicated(
    pod: str,
    cpuset: str,
    *,
    name: str = "c",
    numa_binding: bool = True,
    exclusive: bool = True,
    ramp_up: bool = False,
    owner: str = "dedicated",
    quantity: float = 2.0,
    container_type: str = "MAIN",
) -> ContainerAllocated:
    return ContainerAllocated(
        container(
            pod,
            name,
            OwnCPUs.of(cpus(cpuset)),
            qos=DEDICATED_CORES,
            ramp_up=ramp_up,
            owner=owner,
            quantity=quantity,
            numa_binding=numa_binding,
            numa_exclusive=numa_binding and exclusive,
            container_type=container_type,
            init_timestamp=format_qrm_time(T0),
        )
    )


def pools_of(state: State) -> dict[str, str]:
    """Pools as ``{name: list format}``."""
    return {name: str(cpuset) for name, cpuset in sorted(state.cpu.pools.items())}


def result_of(state: State, pod: str, name: str = "c") -> str:
    """A container's ``allocation_result`` in list format."""
    info = state.cpu.allocation_info(pod, name)
    assert info is not None
    return str(info.allocation_result)


def entry_of(state: State, pod: str, name: str = "c") -> ContainerEntry:
    return state.cpu.require_entry(pod, name)


def on_ramp(entry: ContainerEntry) -> bool:
    return entry.placement == RAMPING


def check_invariants(state: State, ctx: PolicyContext) -> None:
    """Checklist 26 and its kin, on any state the pool engine left.

    Shared pools and shared containers avoid the reserve, every NUMA node hosting a dedicated
    NUMA-binding container and the CPUs of dedicated containers that hold CPUs of their own
    (owner ``dedicated``: NUMA-binding main containers and isolated ones), which never share
    CPUs among themselves; reclaim avoids the reserve; reserve is the reserve. (``fallback``
    containers run on the shared CPUs by design, and reclaim's four-CPU fallback may land
    anywhere outside the reserve, §9.4 step 6.)
    """
    cpu = state.cpu
    masks = ctx.topology.numa_masks()
    forbidden = ctx.reserved.mask
    for numa in cpu.numas_with_dedicated_numa_binding():
        forbidden |= masks[numa]
    held = 0
    for key in sorted(cpu.dedicated_containers()):
        found = cpu.require_entry(*key)
        mirrors_main = found.is_numa_binding() and not found.is_main()
        if found.owner_pool_name != "dedicated" or mirrors_main:
            continue
        result, _ = cpu.placement_cpus(found.placement)
        assert not (held & result.mask), f"{key} shares dedicated CPUs"
        held |= result.mask
    forbidden |= held
    for name, pool in cpu.pools.items():
        if name not in ("reserve", "reclaim"):
            assert not (pool.mask & forbidden), f"pool {name} = {pool} overlaps forbidden CPUs"
    assert not (cpu.pools["reclaim"].mask & ctx.reserved.mask)
    assert cpu.pools["reserve"] == ctx.reserved
    for found in cpu.entries():
        if found.is_shared():
            result, _ = cpu.placement_cpus(found.placement)
            assert not (result.mask & forbidden), f"{found.key} runs on forbidden CPUs"
