"""The invariants a Katalyst v0.5.47 node keeps besides the others (docs/reference-levels.md;
katalyst-core v0.5.47 ``commonstate/pool.go``, ``state/util.go``; ``policy.cpu.snb``,
``policy.cpu.rnb``). Each holds trivially on a v0.5.3 node, which has no such pools or
containers.

* ``snb-pools-in-their-numa``: a pool bound to a NUMA node (``<base>-NUMA<id>``, SNB) holds
  only CPUs of that node, and, on a node without sys-advisor, every SNB container belongs to
  the pool of the node its ``numa_hint`` names (``GetNUMAPoolName``); with sys-advisor a
  shared container's pool is the one the advisor names (``getOwnerPoolNameFromAdvisor``), and
  the simulated advisor's plan, as the demo's, does not model SNB pools;
* ``non-binding-pools-off-snb-numas``: a shared pool not bound to a NUMA node, and the
  ramp-up cpuset, hold no CPU of a NUMA node that hosts an SNB pool (shared pods without
  binding never use such a node; the v0.5.47 pool generation leaves those nodes to their SNB
  pools and to reclaim);
* ``rnb-cpus-in-their-numa``: a reclaimed container with a ``numa_hint`` (actual RNB, or a
  plain one allocated with a one-NUMA hint) holds only the reclaim pool's CPUs of that NUMA
  node (``reclaimedCoresAllocationHandler``: ``InPool("reclaim", {hint})``; every pool
  regeneration places it so again).

Read from the StateStore's published state (the one every answer comes from).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from policy.cpu.rnb import NO_NUMA, numa_hint_of
from policy.cpu.snb import is_snb, numa_of_pool, numa_pool_name
from policy.state.entries import RECLAIM_POOL, RESERVE_POOL
from policy.state.sections import State
from policy.topology.cpuset import CPUSet

if TYPE_CHECKING:
    from qrmd.sim.dst.invariants import World

__all__ = ["V0547_INVARIANTS"]


def _state(world: World) -> State | None:
    if not world.ctx.at_v0_5_47:
        return None
    core = world.node.store_core()
    return None if core is None else core.snapshot.state


def snb_pools_in_their_numa(world: World) -> list[str]:
    state = _state(world)
    if state is None:
        return []
    topology = world.ctx.topology
    out = []
    for name, cpus in sorted(state.cpu.pools.items()):
        numa = numa_of_pool(name)
        if numa is None:
            continue
        outside = cpus.difference(topology.cpus_in_numa(numa))
        if not outside.is_empty():
            out.append(f"pool {name} ({cpus}) holds {outside}, outside NUMA {numa}")
    if world.ctx.advisor_enabled:
        return out
    for entry in state.cpu.entries():
        if not entry.container_name or not is_snb(entry.qos_level, entry.annotations):
            continue
        hint = numa_hint_of(entry)
        if hint == NO_NUMA or entry.ramp_up:
            continue
        wanted = numa_pool_name(entry.annotations, hint)
        if entry.owner_pool_name != wanted:
            out.append(
                f"SNB container {entry.pod_uid}/{entry.container_name} with numa_hint {hint} "
                f"belongs to pool {entry.owner_pool_name!r}, not {wanted!r}"
            )
    return out


def non_binding_pools_off_snb_numas(world: World) -> list[str]:
    state = _state(world)
    if state is None:
        return []
    topology = world.ctx.topology
    pools = state.cpu.pools
    snb_numas = CPUSet()
    for name, cpus in pools.items():
        numa = numa_of_pool(name)
        if numa is not None and not cpus.is_empty():
            snb_numas = snb_numas.union(topology.cpus_in_numa(numa))
    if snb_numas.is_empty():
        return []
    shared = {
        name: cpus
        for name, cpus in pools.items()
        if numa_of_pool(name) is None and name not in (RESERVE_POOL, RECLAIM_POOL)
    }
    if state.cpu.ramp_cpus is not None:
        shared["the ramp-up cpuset"] = state.cpu.ramp_cpus
    out = []
    for name, cpus in sorted(shared.items()):
        inside = cpus.intersection(snb_numas)
        if not inside.is_empty():
            out.append(f"{name} ({cpus}) holds {inside} of NUMA nodes hosting SNB pools")
    return out


def rnb_cpus_in_their_numa(world: World) -> list[str]:
    state = _state(world)
    if state is None:
        return []
    cpu = state.cpu
    reclaim = cpu.pools.get(RECLAIM_POOL, CPUSet())
    topology = world.ctx.topology
    out = []
    for entry in cpu.entries():
        if not entry.container_name or not entry.is_reclaimed():
            continue
        hint = numa_hint_of(entry)
        if hint == NO_NUMA:
            continue
        cpus, _ = cpu.placement_cpus(entry.placement)
        allowed = reclaim.intersection(topology.cpus_in_numa(hint))
        outside = cpus.difference(allowed)
        if not outside.is_empty():
            out.append(
                f"reclaimed container {entry.pod_uid}/{entry.container_name} with numa_hint "
                f"{hint} holds {outside}, outside the reclaim pool's CPUs of NUMA {hint} "
                f"({allowed})"
            )
    return out


V0547_INVARIANTS: tuple[tuple[str, Callable[[World], list[str]]], ...] = (
    ("snb-pools-in-their-numa", snb_pools_in_their_numa),
    ("non-binding-pools-off-snb-numas", non_binding_pools_off_snb_numas),
    ("rnb-cpus-in-their-numa", rnb_cpus_in_their_numa),
)
