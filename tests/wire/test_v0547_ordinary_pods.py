"""Ordinary pods at ``--reference-version v0.5.47``: the v0.5.3 → v0.5.47 changes of spec
cpu-policy-v0.5.47 (c), through real gRPC with the kubelet fork's protos.

Provenance: katalyst-core v0.5.47 ``pkg/agent/qrm-plugins/cpu/dynamicpolicy/policy_test.go``,
whose harness is this node (``GenerateDummyCPUTopology(16, 2, 4)``, reserve ``0,2`` from
TakeHTByNUMABalance, reclaim disabled): TestAllocate "req for reclaimed_cores main container",
TestGetTopologyAwareResources, TestGetResourcesAllocation. The v0.5.3 values of the same
flows stay asserted by ``tests/wire/test_plugin_rpcs.py`` at the default level.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import grpc
import pytest

from policy.cpu.reference import V0_5_47
from tests.policy.decision_fixtures import CTX
from tests.wire.plugin_node import WireNode, dedicated_annotations, resource_request
from wire.gen import resourceplugin_pb2 as pb

AT_47 = replace(CTX, reference_version=V0_5_47)


@pytest.fixture
def node47() -> Iterator[WireNode]:
    node = WireNode(ctx=AT_47).start()
    try:
        yield node
    finally:
        node.close()


def allocated(node: WireNode, request: pb.ResourceRequest) -> str:
    response = node.client.plugin.Allocate(request, timeout=10)
    return str(response.allocation_result.resource_allocation["cpu"].allocation_result)


def listing(node: WireNode) -> dict[str, str]:
    response = node.client.plugin.GetResourcesAllocation(
        pb.GetResourcesAllocationRequest(), timeout=10
    )
    return {
        uid: pod.container_resources["app"].resource_allocation["cpu"].allocation_result
        for uid, pod in response.pod_resources.items()
    }


def per_numa(node: WireNode, pod: str) -> tuple[float, list[tuple[int, float]]]:
    aware = node.client.plugin.GetTopologyAwareResources(
        pb.GetTopologyAwareResourcesRequest(pod_uid=pod, container_name="app"), timeout=10
    )
    resource = aware.container_topology_aware_resources.allocated_resources["cpu"]
    quantities = [(q.node, q.resource_value) for q in resource.topology_aware_quantity_list]
    return resource.aggregated_quantity, quantities


def test_the_start_up_reclaim_pool_is_balanced_by_hyper_thread(node47: WireNode) -> None:
    # (c) 1: TestAllocate "req for reclaimed_cores main container" → 1,3-4,6 (v0.5.3: 1,3,9,11)
    assert allocated(node47, resource_request("pod-r", qos="reclaimed_cores")) == "1,3-4,6"
    # TestGetTopologyAwareResources: the reclaimed container holds one CPU on each NUMA
    assert per_numa(node47, "pod-r") == (4, [(0, 1), (1, 1), (2, 1), (3, 1)])


def test_the_call_that_ends_ramp_up_reports_the_pool_grown_by_hyper_threads(
    node47: WireNode,
) -> None:
    # TestGetTopologyAwareResources: while ramping, every pooled CPU (3,3,4,4 per NUMA)
    assert allocated(node47, resource_request("pod-a", cpu=2)) == "1,3-15"
    assert per_numa(node47, "pod-a") == (14, [(0, 3), (1, 3), (2, 4), (3, 4)])
    node47.clock.advance(31)
    # (c) 3: the reconcile that ends ramp-up already answers the pool (v0.5.3 answered
    # 1,3-15 once more); (c) 2: the surplus is handed out by hyper-thread (v0.5.3: 1,3-6,9,11-14)
    assert listing(node47) == {"pod-a": "1,3-11"}
    assert listing(node47) == {"pod-a": "1,3-11"}
    assert per_numa(node47, "pod-a") == (10, [(0, 3), (1, 3), (2, 2), (3, 2)])
    # TestGetResourcesAllocation: a later reclaimed container gets what reclaim kept
    assert allocated(node47, resource_request("pod-r", qos="reclaimed_cores")) == "12-15"
    assert listing(node47) == {"pod-a": "1,3-11", "pod-r": "12-15"}


# -- (c) 7: system_cores ----------------------------------------------------------------------

CPU_ENHANCEMENT = "katalyst.kubewharf.io/cpu_enhancement"


@pytest.mark.parametrize(
    ("annotations", "want"),
    [
        pytest.param({CPU_ENHANCEMENT: '{"cpuset_pool": "reserve"}'}, ("0,2", 2.0),
                     id="TestAllocate: system_cores with cpuset_pool reserve gets the reserve"),
        pytest.param({}, ("0-15", 16.0),
                     id="TestAllocate: system_cores without a cpuset pool gets every CPU"),
    ],
)  # fmt: skip
def test_system_cores_are_accepted_at_v0_5_47(
    node47: WireNode, annotations: dict[str, str], want: tuple[str, float]
) -> None:
    request = resource_request("pod-sys", qos="system_cores", annotations=annotations)
    hints = node47.client.plugin.GetTopologyHints(request, timeout=10)
    assert "cpu" not in hints.resource_hints  # no NUMA preference
    response = node47.client.plugin.Allocate(request, timeout=10)
    info = response.allocation_result.resource_allocation["cpu"]
    assert (info.allocation_result, info.allocated_quantity) == want
    # the pools move around it; its CPUs follow the pools it names
    node47.client.plugin.Allocate(resource_request("pod-a", cpu=2), timeout=10)
    node47.clock.advance(31)
    assert listing(node47)["pod-sys"] == want[0]
    node47.client.plugin.RemovePod(pb.RemovePodRequest(pod_uid="pod-sys"), timeout=10)
    assert "pod-sys" not in listing(node47)


def test_system_cores_are_still_refused_at_v0_5_3(node: WireNode) -> None:
    with pytest.raises(grpc.RpcError) as err:
        node.client.plugin.Allocate(resource_request("pod-sys", qos="system_cores"), timeout=10)
    assert "katalyst QoS level: system_cores is not supported yet" in str(err.value.details())


# -- (c) 4: the kept annotations ----------------------------------------------------------------

AGGREGATED = "pod.kubernetes.io/pod-aggregated-requests"
RESIZING = "pod.kubernetes.io/inplace-update-resizing"


def test_the_kept_annotations_are_stored_and_echoed_at_v0_5_47_only(
    node: WireNode, node47: WireNode
) -> None:
    notes = {AGGREGATED: '{"cpu": "2"}', RESIZING: "false", "team": "payments"}
    for at, kept in ((node, {}), (node47, {AGGREGATED: '{"cpu": "2"}', RESIZING: "false"})):
        response = at.client.plugin.Allocate(
            resource_request("pod-a", cpu=2, annotations=notes), timeout=10
        )
        assert dict(response.annotations) == {"katalyst.kubewharf.io/qos_level": "shared_cores",
                                              **kept}  # fmt: skip
        stored = at.core.snapshot.state.cpu.require_entry("pod-a", "app")
        assert "team" not in (stored.annotations or {})


# -- (c) 10: sidecars follow their main container at the listing ---------------------------------


def test_a_dedicated_sidecar_takes_its_main_containers_owner_at_the_listing_at_v0_5_47(
    node: WireNode, node47: WireNode
) -> None:
    for at, owner_after in ((node, ""), (node47, "dedicated")):
        main = resource_request("pod-d", cpu=2, annotations=dedicated_annotations(), hint=(0,))
        at.client.plugin.Allocate(main, timeout=10)
        side = resource_request("pod-d", "side", cpu=1, annotations=dedicated_annotations(),
                                hint=(0,), container_type=pb.SIDECAR)  # fmt: skip
        at.client.plugin.Allocate(side, timeout=10)
        stored = at.core.snapshot.state.cpu.require_entry("pod-d", "side")
        assert stored.owner_pool_name == ""  # a sidecar is stored without an owner
        listed = listing(at)
        assert listed["pod-d"] == "1,9"
        stored = at.core.snapshot.state.cpu.require_entry("pod-d", "side")
        assert stored.owner_pool_name == owner_after
