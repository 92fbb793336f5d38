"""What the CPU policy answers kubelet: domain values mirroring the QRM reply messages.

Each value here has the fields of one ``resourceplugin.v1alpha1`` message (wire.md §4.3), in
domain types: CPU counts as numbers, container types as ``ContainerType``, hints as
``TopologyHint``. The wire layer converts them to protobuf; nothing in ``policy/`` sees
protobuf. Two absences carry meaning and are kept apart from empty values:

* ``AllocationReply.allocation is None`` — the reply has no ``allocation_result`` (INIT
  containers, §7.1 step 5): kubelet records nothing for the container.
* ``HintsReply.hints is None`` — no NUMA preference: the wire layer must leave the ``"cpu"``
  key out of ``resource_hints`` (wire.md §1.1). An empty tuple means "nothing fits".

The reference's single resource name is ``cpu`` (§6.2 step 7); every reply carries it under
that key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from policy.cpu.request import ResourceRequest, TopologyHint
from policy.state.identity import ContainerIdentity

__all__ = [
    "CPUSET_OCI_PROPERTY",
    "RESOURCE_NAME",
    "AllocatableReply",
    "AllocatableResource",
    "AllocationReply",
    "CPUAllocation",
    "ContainerCPUAllocation",
    "HintsReply",
    "PluginOptions",
    "TopologyAwareQuantity",
    "TopologyAwareReply",
    "TopologyAwareResource",
]

#: The resource this plugin manages (§6.2 step 7), the key of every reply map.
RESOURCE_NAME: Final = "cpu"

#: The identity of the reference's empty response (a frozen value, shared safely).
_NO_CONTAINER: Final = ContainerIdentity()

#: The CRI field kubelet fills with a cpuset (§14, wire.md §12.2).
CPUSET_OCI_PROPERTY: Final = "CpusetCpus"


# -- Allocate and GetTopologyHints --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CPUAllocation:
    """``ResourceAllocationInfo`` for ``cpu`` (wire.md §4.3).

    Attributes:
        oci_property_name: ``CpusetCpus``, or "" when kubelet must leave the cgroup alone.
        is_node_resource: always false for cpu (kubelet reports cpu capacity itself).
        is_scalar_resource: always true.
        allocated_quantity: CPUs in ``allocation_result``.
        allocation_result: the cpuset in Linux list format ("" when empty).
        resource_hints: the hints that led here; ``None`` leaves the field out. Allocate
            puts the request's hint, which may itself be ``None`` (§7.3 step 5).
    """

    oci_property_name: str = ""
    is_node_resource: bool = False
    is_scalar_resource: bool = True
    allocated_quantity: float = 0.0
    allocation_result: str = ""
    resource_hints: tuple[TopologyHint | None, ...] | None = None


@dataclass(frozen=True, slots=True)
class AllocationReply:
    """``ResourceAllocationResponse`` (wire.md §4.3): the request's identity echoed back, and
    the ``cpu`` allocation (``None`` = no ``allocation_result`` at all).

    ``identity`` holds the six identity fields of the message (pod uid, namespace and name,
    container name, type and index).

    ``AllocationReply()`` with every field at its default is the reference's empty response
    (a sidecar whose main container is not allocated yet, §7.5.2 step 1).
    """

    identity: ContainerIdentity = _NO_CONTAINER
    pod_role: str = ""
    pod_type: str = ""
    resource_name: str = ""
    allocation: CPUAllocation | None = None
    labels: Mapping[str, str] | None = None
    annotations: Mapping[str, str] | None = None
    native_qos_class: str = ""

    @staticmethod
    def echo(
        request: ResourceRequest,
        labels: Mapping[str, str] | None,
        annotations: Mapping[str, str] | None,
        allocation: CPUAllocation | None,
        native_qos_class: str = "",
    ) -> AllocationReply:
        """A reply echoing ``request``'s identity, with normalised maps and ``allocation``."""
        return AllocationReply(
            identity=request.identity,
            pod_role=request.pod_role,
            pod_type=request.pod_type,
            resource_name=RESOURCE_NAME,
            allocation=allocation,
            labels=labels,
            annotations=annotations,
            native_qos_class=native_qos_class,
        )


@dataclass(frozen=True, slots=True)
class HintsReply:
    """``ResourceHintsResponse`` (wire.md §4.3) for ``cpu``; ``identity`` as in
    :class:`AllocationReply`.

    ``hints is None`` means no NUMA preference (leave the map key out, wire.md §1.1); an
    empty tuple means no placement fits.
    """

    identity: ContainerIdentity
    pod_role: str
    pod_type: str
    resource_name: str
    hints: tuple[TopologyHint, ...] | None
    labels: Mapping[str, str] | None
    annotations: Mapping[str, str] | None
    native_qos_class: str

    @staticmethod
    def echo(
        request: ResourceRequest,
        labels: Mapping[str, str] | None,
        annotations: Mapping[str, str] | None,
        hints: tuple[TopologyHint, ...] | None,
    ) -> HintsReply:
        """A reply echoing ``request``'s identity with normalised maps and ``hints`` (§8.1)."""
        return HintsReply(
            identity=request.identity,
            pod_role=request.pod_role,
            pod_type=request.pod_type,
            resource_name=RESOURCE_NAME,
            hints=hints,
            labels=labels,
            annotations=annotations,
            native_qos_class=request.native_qos_class,
        )


# -- GetResourcesAllocation ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ContainerCPUAllocation:
    """One container's ``cpu`` resource in the GetResourcesAllocation reply (cpu-policy §10.1
    step 2): ``ResourceAllocationInfo`` without ``resource_hints``.

    Containers on one cpuset share one value (values are immutable).
    """

    allocated_quantity: int
    allocation_result: str
    oci_property_name: str = CPUSET_OCI_PROPERTY
    is_node_resource: bool = False
    is_scalar_resource: bool = True


# -- topology-aware queries and plugin options --------------------------------------------


@dataclass(frozen=True, slots=True)
class TopologyAwareQuantity:
    """CPUs on one NUMA node (``TopologyAwareQuantity``, topology level NUMA)."""

    resource_value: float
    node: int


@dataclass(frozen=True, slots=True)
class TopologyAwareResource:
    """``TopologyAwareResource`` for ``cpu``: current and original totals and NUMA splits.

    A list is ``None`` where the reference sends none (sidecars, §10.2).
    """

    is_node_resource: bool
    is_scalar_resource: bool
    aggregated_quantity: float
    original_aggregated_quantity: float
    topology_aware_quantity_list: tuple[TopologyAwareQuantity, ...] | None
    original_topology_aware_quantity_list: tuple[TopologyAwareQuantity, ...] | None


@dataclass(frozen=True, slots=True)
class TopologyAwareReply:
    """``GetTopologyAwareResourcesResponse`` (§10.2) with its one container's ``cpu`` entry."""

    pod_uid: str
    pod_name: str
    pod_namespace: str
    container_name: str
    resource: TopologyAwareResource


@dataclass(frozen=True, slots=True)
class AllocatableResource:
    """``AllocatableTopologyAwareResource`` for ``cpu`` (§10.3)."""

    is_node_resource: bool
    is_scalar_resource: bool
    aggregated_allocatable_quantity: float
    topology_aware_allocatable_quantity_list: tuple[TopologyAwareQuantity, ...]
    aggregated_capacity_quantity: float
    topology_aware_capacity_quantity_list: tuple[TopologyAwareQuantity, ...]


@dataclass(frozen=True, slots=True)
class AllocatableReply:
    """``GetTopologyAwareAllocatableResourcesResponse``: the ``cpu`` entry (§10.3)."""

    resource: AllocatableResource


@dataclass(frozen=True, slots=True)
class PluginOptions:
    """``ResourcePluginOptions`` (§10.4); the defaults are the reference CPU plugin's."""

    pre_start_required: bool = False
    with_topology_alignment: bool = True
    need_reconcile: bool = True
