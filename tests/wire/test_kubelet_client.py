"""The kubelet's client (wire.kubelet_client) against the real plugin server on a unix socket.

The node is the spec's example (cpu-policy §16, ``tests.wire.plugin_node``): what the kubelet
reads back through plain values is what ``test_plugin_rpcs`` checks in protobuf.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import replace

import pytest

from policy.cpu.replies import PluginOptions
from policy.cpu.request import ContainerType, ResourceRequest, TopologyHint
from tests.wire.plugin_node import WireNode, dedicated_annotations, short_dir
from wire.kubelet_client import PluginCallError, PluginConnection
from wire.kubelet_convert import AllocationInfo, NUMAQuantity

SHARED = ResourceRequest(
    pod_uid="pod-a",
    pod_namespace="default",
    pod_name="name-pod-a",
    container_name="app",
    container_type=ContainerType.MAIN,
    container_index=0,
    resource_name="cpu",
    resource_requests={"cpu": 2.0},
    annotations={"katalyst.kubewharf.io/qos_level": "shared_cores"},
    native_qos_class="Burstable",
)
DEDICATED = replace(
    SHARED,
    pod_uid="pod-d",
    pod_name="name-pod-d",
    annotations=dedicated_annotations(exclusive=True),
)


@pytest.fixture
def kubelet(node: WireNode) -> Iterator[PluginConnection]:
    connection = PluginConnection(node.servers[0].socket_path)
    try:
        yield connection
    finally:
        connection.close()


def test_registration_handshake(kubelet: PluginConnection) -> None:
    info = kubelet.get_info()
    assert (info.type, info.name) == ("ResourcePlugin", "cpu")
    assert "v1alpha1" in info.supported_versions
    kubelet.notify_registration_status(True)
    # wire.md §12.6: the reference cpu plugin's options
    assert kubelet.get_resource_plugin_options() == PluginOptions(
        pre_start_required=False, with_topology_alignment=True, need_reconcile=True
    )


def test_shared_container_has_no_preference_then_ramps_up(kubelet: PluginConnection) -> None:
    # wire.md §1.1: no preference is None, not an empty tuple
    assert kubelet.get_topology_hints(SHARED) is None
    # §16 items 11-12: the first shared container ramps up on every pooled CPU
    (info,) = (kubelet.allocate(SHARED) or {}).values()
    assert (info.oci_property_name, info.allocation_result, info.allocated_quantity) == (
        "CpusetCpus",
        "1,3-15",
        14.0,
    )
    assert info.is_scalar_resource


def test_exclusive_container_gets_hints_then_its_numa_node(kubelet: PluginConnection) -> None:
    hints = kubelet.get_topology_hints(DEDICATED)
    assert hints is not None
    assert hints[:5] == (
        TopologyHint((0,), True),
        TopologyHint((1,), True),
        TopologyHint((2,), True),
        TopologyHint((3,), True),
        TopologyHint((0, 1), False),
    )
    answer = kubelet.allocate(replace(DEDICATED, hint=TopologyHint((0,), True)))
    # §16 items 12 and 17: the cpuset and resource_hints = [req.hint]
    assert answer == {
        "cpu": AllocationInfo("CpusetCpus", "1,8-9", 3.0, True, (TopologyHint((0,), True),))
    }


def test_init_container_allocate_is_none(kubelet: PluginConnection) -> None:
    # §16 item 9: no allocation_result, so the kubelet records nothing
    assert kubelet.allocate(replace(SHARED, container_type=ContainerType.INIT)) is None


def test_listing_topology_aware_queries_and_removal(
    node: WireNode, kubelet: PluginConnection
) -> None:
    kubelet.allocate(SHARED)
    # GetResourcesAllocation leaves resource_hints out
    assert kubelet.get_resources_allocation() == {
        "pod-a": {"app": {"cpu": AllocationInfo("CpusetCpus", "1,3-15", 14.0, True, None)}}
    }
    aware = kubelet.get_topology_aware_resources("pod-a", "app")["cpu"]
    assert aware.aggregated == 14.0  # §16 item 21
    assert [q.node for q in aware.per_numa] == [0, 1, 2, 3]
    allocatable, capacity = kubelet.get_topology_aware_allocatable_resources()["cpu"]
    # §16 item 22
    assert allocatable == tuple(NUMAQuantity(n, v) for n, v in enumerate([3.0, 3.0, 4.0, 4.0]))
    assert capacity == tuple(NUMAQuantity(n, 4.0) for n in range(4))
    kubelet.pre_start_container("pod-a", "default", "name-pod-a", "app")
    kubelet.remove_pod("pod-a")
    assert kubelet.get_resources_allocation() == {}
    kubelet.remove_pod("pod-a")  # kubelet repeats removals (wire.md §9.3)


def test_error_status_is_a_plugin_call_error_naming_method_and_code(
    kubelet: PluginConnection,
) -> None:
    with pytest.raises(PluginCallError) as caught:
        kubelet.get_topology_aware_resources("pod-z", "app")
    assert (caught.value.method, caught.value.code) == ("GetTopologyAwareResources", "NOT_FOUND")
    assert "pod-z" in caught.value.details
    assert str(caught.value).startswith("GetTopologyAwareResources failed: NOT_FOUND: ")


def test_closed_connection_fails_as_cancelled(node: WireNode) -> None:
    connection = PluginConnection(node.servers[0].socket_path)
    connection.close()
    with pytest.raises(PluginCallError) as caught:
        connection.get_info()
    assert (caught.value.method, caught.value.code) == ("GetInfo", "CANCELLED")


def test_dialing_a_socket_nobody_serves_times_out() -> None:
    path = os.path.join(short_dir(), "absent.sock")
    with pytest.raises(PluginCallError) as caught:
        PluginConnection(path, dial_timeout_s=0.2)
    assert (caught.value.method, caught.value.code) == ("dial", "DEADLINE_EXCEEDED")
    assert path in caught.value.details and "0.2 s" in caught.value.details
