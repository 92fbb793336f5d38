"""The read-only RPCs: topology-aware resources, allocatable resources, options, pre-start.

Spec cpu-policy §10.2–§10.5, reproduced as the reference answers them:

* **GetTopologyAwareResources(pod, container)** (§10.2): the container's current and original
  CPU counts and their per-NUMA split, NUMA ascending. A SIDECAR reports zeros and no lists
  (its CPUs are its main container's). An unknown container is an error whose text is the
  reference's "pod: %s, container: %s is not show up in cpu plugin state".
* **GetTopologyAwareAllocatableResources** (§10.3): per NUMA node, its CPUs minus the reserve
  (allocatable) and all its CPUs (capacity); in total ``num_cpus - |reserve|`` and ``num_cpus``.
* **GetResourcePluginOptions** (§10.4): ``{pre_start_required: false,
  with_topology_alignment: true, need_reconcile: true}``.
* **PreStartContainer** (§10.5): does nothing and answers nothing.

A pooled container's CPUs are its pool's (``policy.state.entries``), so its counts are read through
``CPUState.allocation_info`` in time independent of the pod count.
"""

from __future__ import annotations

from collections.abc import Mapping

from policy.cpu.context import PolicyContext
from policy.cpu.errors import UnknownContainerError
from policy.cpu.replies import (
    AllocatableReply,
    AllocatableResource,
    PluginOptions,
    TopologyAwareQuantity,
    TopologyAwareReply,
    TopologyAwareResource,
)
from policy.state.cpu_state import CPUState
from policy.topology.cpuset import CPUSet

__all__ = [
    "allocatable_resources",
    "plugin_options",
    "pre_start_container",
    "topology_aware_resources",
]


def _quantities(split: Mapping[int, CPUSet] | None) -> tuple[TopologyAwareQuantity, ...] | None:
    if split is None:
        return None
    return tuple(TopologyAwareQuantity(float(split[n].size()), n) for n in sorted(split))


def topology_aware_resources(
    state: CPUState, pod_uid: str, container_name: str
) -> TopologyAwareReply:
    """The container's CPU counts and NUMA split (§10.2).

    Args:
        state: the CPU state.
        pod_uid: the pod.
        container_name: the container.

    Returns:
        The reply; on (16,2,4) a ramping shared container reports 14/14 and
        ``[0:3, 1:3, 2:4, 3:4]``.

    Raises:
        UnknownContainerError: no entry for the container.
    """
    info = state.allocation_info(pod_uid, container_name)
    if info is None:
        raise UnknownContainerError(pod_uid, container_name)
    if info.is_sidecar():
        resource = TopologyAwareResource(
            is_node_resource=False,
            is_scalar_resource=True,
            aggregated_quantity=0.0,
            original_aggregated_quantity=0.0,
            topology_aware_quantity_list=None,
            original_topology_aware_quantity_list=None,
        )
    else:
        resource = TopologyAwareResource(
            is_node_resource=False,
            is_scalar_resource=True,
            aggregated_quantity=float(info.allocation_result.size()),
            original_aggregated_quantity=float(info.original_allocation_result.size()),
            topology_aware_quantity_list=_quantities(info.topology_aware_assignments),
            original_topology_aware_quantity_list=_quantities(
                info.original_topology_aware_assignments
            ),
        )
    return TopologyAwareReply(
        pod_uid=info.pod_uid,
        pod_name=info.pod_name,
        pod_namespace=info.pod_namespace,
        container_name=info.container_name,
        resource=resource,
    )


def allocatable_resources(ctx: PolicyContext) -> AllocatableReply:
    """Per-NUMA allocatable (minus the reserve) and capacity CPU counts (§10.3).

    Args:
        ctx: topology and reserve.

    Returns:
        The reply; on (16,2,4) with reserve ``0,2``: ``[3,3,4,4]``, ``[4,4,4,4]``, 14, 16.
    """
    topology = ctx.topology
    allocatable = []
    capacity = []
    for numa in topology.numa_nodes():
        numa_cpus = topology.cpus_in_numa(numa)
        allocatable.append(TopologyAwareQuantity(float((numa_cpus - ctx.reserved).size()), numa))
        capacity.append(TopologyAwareQuantity(float(numa_cpus.size()), numa))
    return AllocatableReply(
        AllocatableResource(
            is_node_resource=False,
            is_scalar_resource=True,
            aggregated_allocatable_quantity=float(topology.num_cpus - ctx.reserved.size()),
            topology_aware_allocatable_quantity_list=tuple(allocatable),
            aggregated_capacity_quantity=float(topology.num_cpus),
            topology_aware_capacity_quantity_list=tuple(capacity),
        )
    )


def plugin_options() -> PluginOptions:
    """The reference CPU plugin's options (§10.4): no pre-start, topology alignment, reconcile."""
    return PluginOptions()


def pre_start_container() -> None:
    """PreStartContainer (§10.5): nothing to do, an empty reply."""
    return None
