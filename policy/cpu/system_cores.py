"""system_cores at the v0.5.47 reference level (spec cpu-policy-v0.5.47 (c) 7; katalyst-core
v0.5.47 ``systemCoresAllocationHandler``, ``getSystemPoolCPUSetAndNumaAwareAssignments``,
``policy_allocation_handlers.go:1966-2080``). v0.5.3 refuses the level.

* Hints: no NUMA preference.
* A sidecar copies its main container (an empty reply while there is none).
* Otherwise the container gets the CPUs of every pool named like its ``cpuset_pool`` (that
  name, or a name starting with it), and is owned by ``system-<cpuset_pool>``. With no such
  pool (or no ``cpuset_pool``): the available CPUs (every NUMA's default cpuset minus the
  reserve) when it asks for NUMA binding, and when that too is empty, every CPU of the node.
* Each pool adjustment recomputes those CPUs from the new pools (the reference rewrites the
  entry in ``adjustPoolsAndIsolatedEntries``).
"""

from __future__ import annotations

from collections.abc import Mapping

from machines import ramp_up as lifecycle
from policy.cpu.context import PolicyContext
from policy.cpu.prepare import PreparedRequest
from policy.cpu.ramp_steps import container_phase, emit_step, fire
from policy.cpu.request import ContainerType
from policy.cpu.txn import Txn
from policy.errors import ErrorKind, PolicyError
from policy.state.cpu_state import CPUState
from policy.state.entries import (
    ANNOTATION_CPUSET_POOL,
    ANNOTATION_NUMA_BINDING,
    OwnCPUs,
)
from policy.state.events import ContainerAllocated
from policy.topology.cpuset import CPUSet

__all__ = ["SYSTEM_CORES", "allocate_system", "system_owner", "system_pool_cpus"]

SYSTEM_CORES = "system_cores"
#: ``commonstate.PoolNamePrefixSystem``.
_SYSTEM_PREFIX = "system"


def system_owner(annotations: Mapping[str, str] | None) -> str:
    """``GetSpecifiedSystemPoolName``: ``system-<cpuset_pool>``, or "" without one."""
    pool = (annotations or {}).get(ANNOTATION_CPUSET_POOL, "")
    return f"{_SYSTEM_PREFIX}-{pool}" if pool else ""


def system_pool_cpus(
    state: CPUState,
    ctx: PolicyContext,
    annotations: Mapping[str, str] | None,
    pools: Mapping[str, CPUSet] | None = None,
) -> CPUSet:
    """The CPUs of a system_cores container (module docstring).

    Args:
        state: the CPU state (its pools, unless ``pools`` is given; its default cpusets).
        ctx: the reserve and the topology.
        annotations: the container's flattened annotations.
        pools: the pools to read instead of the state's (a pool adjustment's new ones).
    """
    named = (annotations or {}).get(ANNOTATION_CPUSET_POOL, "")
    cpus = CPUSet()
    if named:
        for name, pool_cpus in sorted((state.pools if pools is None else pools).items()):
            if name.startswith(named):
                cpus = cpus.union(pool_cpus)
    if cpus.is_empty() and (annotations or {}).get(ANNOTATION_NUMA_BINDING) == "true":
        cpus = state.available(ctx.reserved)
    if cpus.is_empty():
        cpus = CPUSet.from_mask(ctx.topology.cpu_details.mask)
    return cpus


def allocate_system(
    txn: Txn, ctx: PolicyContext, prepared: PreparedRequest, now: float
) -> CPUSet | None:
    """Place one system_cores container (module docstring); None for the empty reply of a
    sidecar whose main container is not there yet.

    Raises:
        PolicyError: the lifecycle has no transition for the container (an internal error).
    """
    request = prepared.request
    state = txn.cpu
    if request.container_type is ContainerType.SIDECAR:
        main = state.main_container_entry(request.pod_uid)
        if main is None:
            return None
        result, original = state.placement_cpus(main.placement)
        owner, placement = main.owner_pool_name, OwnCPUs(result, original)
    else:
        result = system_pool_cpus(state, ctx, prepared.annotations)
        owner, placement = system_owner(prepared.annotations), OwnCPUs.of(result)
    entry = prepared.new_entry(now, placement, ramp_up=False, owner=owner)
    # The lifecycle of a container that keeps CPUs of its own and never ramps.
    existing = state.entry(*entry.key)
    phase = lifecycle.NEW if existing is None else container_phase(existing, system_cores=True)
    step = fire(phase, "allocate_reclaimed", {})
    if step is None:
        raise PolicyError(
            f"ramp_up: 'allocate_reclaimed' from {phase!r} took no transition",
            kind=ErrorKind.INTERNAL,
        )
    emit_step(txn, step, ContainerAllocated(entry))
    return result
