"""Domain ↔ protobuf for the kubelet's side of the QRM protocol (wire.md §3, §4.3, §9).

``wire.convert`` is the plugin's half: it parses requests and writes replies. This module is
the mirror half that a kubelet needs (the simulator behind ``qrmd demo`` and the integration
tests): it writes requests from plain values and parses the plugin's answers into plain frozen
values, so that nothing outside ``wire`` holds a protobuf message.

Requests are the policy's own types (``policy.cpu.request.ResourceRequest``, ``TopologyHint``), so a
request written here and parsed by ``wire.convert.resource_request`` comes back equal. Answers
become the values below, shaped as the kubelet reads them: an ``AllocationInfo`` per resource,
per-NUMA quantities as ``NUMAQuantity``; ``GetResourcePluginOptions`` reuses
``policy.cpu.replies.PluginOptions``.

The rules a kubelet must keep, because only the wire can tell them apart:

* **No preference is not "nothing fits"** (wire.md §1.1): a hints answer whose
  ``resource_hints`` map lacks the resource key is ``None``; the key with an empty list is
  ``()``. A key whose value is absent is Go's nil; Python cannot tell it from an empty
  message, so it reads as ``()``, as a Go kubelet reads an empty list.
* **No ``allocation_result`` records nothing** (wire.md §9.1 step 3): ``None``, not ``{}``.
* **Absent ``resource_hints`` in an allocation** is ``None`` (GetResourcesAllocation leaves
  them out, so a reconcile drops the cached hints), apart from a present, empty list.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from policy.cpu.replies import PluginOptions
from policy.cpu.request import ResourceRequest, TopologyHint
from wire.gen import pluginregistration_pb2 as reg_pb
from wire.gen import resourceplugin_pb2 as rp_pb

__all__ = [
    "AllocatableResources",
    "AllocationInfo",
    "NUMAQuantity",
    "PluginInfo",
    "PodAllocations",
    "TopologyAwareResource",
    "allocatable_resources",
    "allocation",
    "hints_for",
    "plugin_info",
    "plugin_options",
    "pre_start_message",
    "request_message",
    "resources_allocation",
    "topology_aware_resources",
]


@dataclass(frozen=True, slots=True)
class PluginInfo:
    """A plugin's ``GetInfo`` answer (wire.md §3)."""

    type: str
    name: str
    endpoint: str
    supported_versions: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class AllocationInfo:
    """One resource's allocation for one container (``ResourceAllocationInfo``, wire.md §4.3).

    Attributes:
        oci_property_name: the CRI field to fill (``CpusetCpus``), "" for none.
        allocation_result: its value (a cpuset in Linux list format).
        allocated_quantity: how much was allocated.
        is_scalar_resource: whether the kubelet may compare quantities to reuse it.
        hints: ``resource_hints``; ``None`` where the answer left them out.
    """

    oci_property_name: str
    allocation_result: str
    allocated_quantity: float
    is_scalar_resource: bool
    hints: tuple[TopologyHint, ...] | None = None


@dataclass(frozen=True, slots=True)
class NUMAQuantity:
    """A quantity on one NUMA node (``TopologyAwareQuantity``)."""

    node: int
    value: float


@dataclass(frozen=True, slots=True)
class TopologyAwareResource:
    """A container's per-NUMA breakdown of one resource (``TopologyAwareResource``, §4.3)."""

    aggregated: float
    original_aggregated: float
    per_numa: tuple[NUMAQuantity, ...]
    original_per_numa: tuple[NUMAQuantity, ...]


#: ``GetResourcesAllocation``: pod UID → container name → resource name → allocation.
PodAllocations = dict[str, dict[str, dict[str, AllocationInfo]]]

#: ``GetTopologyAwareAllocatableResources``: resource name → (allocatable, capacity) per NUMA.
AllocatableResources = dict[str, tuple[tuple[NUMAQuantity, ...], tuple[NUMAQuantity, ...]]]


# -- requests ---------------------------------------------------------------------------------


def request_message(request: ResourceRequest) -> rp_pb.ResourceRequest:
    """The ``ResourceRequest`` of ``GetTopologyHints`` and ``Allocate`` (wire.md §4.3).

    Args:
        request: the request; ``hint is None`` leaves ``hint`` unset (GetTopologyHints),
            ``None`` maps are sent empty.

    Returns:
        The message; ``wire.convert.resource_request`` parses it back to ``request`` (with
        empty maps as ``None``).
    """
    message = rp_pb.ResourceRequest(
        pod_uid=request.pod_uid,
        pod_namespace=request.pod_namespace,
        pod_name=request.pod_name,
        container_name=request.container_name,
        container_type=request.container_type.name,
        container_index=request.container_index,
        pod_role=request.pod_role,
        pod_type=request.pod_type,
        resource_name=request.resource_name,
        resource_requests=dict(request.resource_requests),
        labels=dict(request.labels or {}),
        annotations=dict(request.annotations or {}),
        native_qos_class=request.native_qos_class,
    )
    if request.hint is not None:
        # Set even when empty: under topology policy "none" the kubelet sends a hint with no
        # NUMA nodes, which is not the same message as no hint at all.
        message.hint.CopyFrom(
            rp_pb.TopologyHint(nodes=list(request.hint.nodes), preferred=request.hint.preferred)
        )
    return message


def pre_start_message(
    pod_uid: str, pod_namespace: str, pod_name: str, container_name: str
) -> rp_pb.PreStartContainerRequest:
    """The ``PreStartContainerRequest`` for one container (wire.md §4.3)."""
    return rp_pb.PreStartContainerRequest(
        pod_uid=pod_uid,
        pod_namespace=pod_namespace,
        pod_name=pod_name,
        container_name=container_name,
    )


# -- answers ----------------------------------------------------------------------------------


def plugin_info(message: reg_pb.PluginInfo) -> PluginInfo:
    """``GetInfo``'s answer as a value."""
    return PluginInfo(
        message.type, message.name, message.endpoint, tuple(message.supported_versions)
    )


def plugin_options(message: rp_pb.ResourcePluginOptions) -> PluginOptions:
    """``GetResourcePluginOptions``' answer as the policy's ``PluginOptions``."""
    return PluginOptions(
        pre_start_required=message.pre_start_required,
        with_topology_alignment=message.with_topology_alignment,
        need_reconcile=message.need_reconcile,
    )


def _hints(message: rp_pb.ListOfTopologyHints) -> tuple[TopologyHint, ...]:
    return tuple(TopologyHint(tuple(h.nodes), h.preferred) for h in message.hints)


def hints_for(
    message: rp_pb.ResourceHintsResponse, resource_name: str
) -> tuple[TopologyHint, ...] | None:
    """One resource's hints from a ``GetTopologyHints`` answer, keeping wire.md §1.1.

    Args:
        message: the answer.
        resource_name: the resource asked about (the request's ``resource_name``).

    Returns:
        ``None`` when the map lacks the key (no preference); else the hints in the plugin's
        order, ``()`` when the list is empty (no feasible placement).
    """
    # ``in`` and ``get`` never create a map key; ``[...]`` would, on a missing one.
    if resource_name not in message.resource_hints:
        return None
    return _hints(message.resource_hints[resource_name])


def _allocation_info(message: rp_pb.ResourceAllocationInfo) -> AllocationInfo:
    return AllocationInfo(
        oci_property_name=message.oci_property_name,
        allocation_result=message.allocation_result,
        allocated_quantity=message.allocated_quantity,
        is_scalar_resource=message.is_scalar_resource,
        hints=_hints(message.resource_hints) if message.HasField("resource_hints") else None,
    )


def _per_resource(message: rp_pb.ResourceAllocation) -> dict[str, AllocationInfo]:
    return {name: _allocation_info(info) for name, info in message.resource_allocation.items()}


def allocation(message: rp_pb.ResourceAllocationResponse) -> dict[str, AllocationInfo] | None:
    """``Allocate``'s answer: resource name → allocation, ``None`` without ``allocation_result``.

    Args:
        message: the answer.

    Returns:
        The allocations; ``None`` when the plugin sent none (the kubelet records nothing).
    """
    if not message.HasField("allocation_result"):
        return None
    return _per_resource(message.allocation_result)


def resources_allocation(message: rp_pb.GetResourcesAllocationResponse) -> PodAllocations:
    """``GetResourcesAllocation``'s answer: pod UID → container → resource → allocation."""
    return {
        pod_uid: {
            container: _per_resource(resources)
            for container, resources in containers.container_resources.items()
        }
        for pod_uid, containers in message.pod_resources.items()
    }


def _quantities(items: Iterable[rp_pb.TopologyAwareQuantity]) -> tuple[NUMAQuantity, ...]:
    return tuple(NUMAQuantity(q.node, q.resource_value) for q in items)


def topology_aware_resources(
    message: rp_pb.GetTopologyAwareResourcesResponse,
) -> dict[str, TopologyAwareResource]:
    """``GetTopologyAwareResources``' answer for its container: resource name → breakdown."""
    resources = message.container_topology_aware_resources.allocated_resources
    return {
        name: TopologyAwareResource(
            aggregated=r.aggregated_quantity,
            original_aggregated=r.original_aggregated_quantity,
            per_numa=_quantities(r.topology_aware_quantity_list),
            original_per_numa=_quantities(r.original_topology_aware_quantity_list),
        )
        for name, r in resources.items()
    }


def allocatable_resources(
    message: rp_pb.GetTopologyAwareAllocatableResourcesResponse,
) -> AllocatableResources:
    """``GetTopologyAwareAllocatableResources``' answer: resource → (allocatable, capacity)."""
    return {
        name: (
            _quantities(r.topology_aware_allocatable_quantity_list),
            _quantities(r.topology_aware_capacity_quantity_list),
        )
        for name, r in message.allocatable_resources.items()
    }
