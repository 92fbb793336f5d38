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

import pytest

from policy.cpu.reference import V0_5_47
from tests.policy.decision_fixtures import CTX
from tests.wire.plugin_node import WireNode, resource_request
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
