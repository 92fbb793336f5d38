"""The ResourcePlugin RPCs through real gRPC on a unix socket, answered by the real Allocator.

Worked values: spec cpu-policy §16 on ``synthetic:cpus=16,sockets=2,numas=4`` with reserve
``0,2``; the no-preference rule of wire.md §1.1 checked in bytes; one case per error class of
``wire.errors``.
"""

from __future__ import annotations

import shutil
import threading

import grpc
import pytest

from policy.cpu.qos import QOS_LEVEL_KEY
from tests.wire.plugin_node import (
    DEBUG_KEY,
    WireNode,
    dedicated_annotations,
    resource_request,
    short_dir,
)
from wire.gen import resourceplugin_pb2 as pb

NO_DEADLINE = None


def cpu_info(response: pb.ResourceAllocationResponse) -> pb.ResourceAllocationInfo:
    assert response.HasField("allocation_result")
    return response.allocation_result.resource_allocation["cpu"]


def hint_nodes(response: pb.ResourceHintsResponse) -> list[tuple[tuple[int, ...], bool]]:
    hints = response.resource_hints.get("cpu")
    assert hints is not None
    return [(tuple(h.nodes), h.preferred) for h in hints.hints]


def listing(node: WireNode) -> dict[str, dict[str, str]]:
    response = node.client.plugin.GetResourcesAllocation(
        pb.GetResourcesAllocationRequest(), timeout=10
    )
    return {
        uid: {
            name: alloc.resource_allocation["cpu"].allocation_result
            for name, alloc in pod.container_resources.items()
        }
        for uid, pod in response.pod_resources.items()
    }


# -- the compatibility checklist through the wire ------------------------------------------------


def test_first_shared_container_ramps_up_on_every_pooled_cpu(node: WireNode) -> None:
    # §16 items 11-12
    response = node.client.plugin.Allocate(resource_request("pod-a", cpu=2), timeout=10)
    info = cpu_info(response)
    assert info.allocation_result == "1,3-15"
    assert info.oci_property_name == "CpusetCpus"
    assert info.allocated_quantity == 14
    assert info.is_scalar_resource and not info.is_node_resource
    assert (response.pod_uid, response.container_name, response.resource_name) == (
        "pod-a",
        "app",
        "cpu",
    )
    assert listing(node) == {"pod-a": {"app": "1,3-15"}}


def test_ramp_up_ends_at_reconcile_after_the_transition_period(node: WireNode) -> None:
    # §16 item 18, with §15.6's pre-adjustment reply
    node.client.plugin.Allocate(resource_request("pod-a", cpu=2), timeout=10)
    node.clock.advance(31)
    assert listing(node) == {"pod-a": {"app": "1,3-15"}}
    assert listing(node) == {"pod-a": {"app": "1,3-6,9,11-14"}}


def test_reclaimed_container_mirrors_the_reclaim_pool(node: WireNode) -> None:
    # §16 item 14
    request = resource_request("pod-r", qos="reclaimed_cores")
    response = node.client.plugin.Allocate(request, timeout=10)
    assert cpu_info(response).allocation_result == "1,3,9,11"


def test_exclusive_numa_binding_hints_then_allocate(node: WireNode) -> None:
    # §16 items 15 and 17: single NUMA nodes preferred, then larger sets by size and order,
    # cross-socket pairs pruned
    request = resource_request("pod-d", annotations=dedicated_annotations(exclusive=True))
    hints = node.client.plugin.GetTopologyHints(request, timeout=10)
    assert hint_nodes(hints) == [
        ((0,), True),
        ((1,), True),
        ((2,), True),
        ((3,), True),
        ((0, 1), False),
        ((2, 3), False),
        ((0, 1, 2), False),
        ((0, 1, 3), False),
        ((0, 2, 3), False),
        ((1, 2, 3), False),
        ((0, 1, 2, 3), False),
    ]
    request.hint.CopyFrom(pb.TopologyHint(nodes=[0], preferred=True))
    response = node.client.plugin.Allocate(request, timeout=10)
    info = cpu_info(response)
    assert info.allocation_result == "1,8-9"
    # §16 item 12: resource_hints = [req.hint]
    assert [(list(h.nodes), h.preferred) for h in info.resource_hints.hints] == [([0], True)]


def test_non_exclusive_numa_binding_takes_by_topology(node: WireNode) -> None:
    request = resource_request("pod-d", annotations=dedicated_annotations(), hint=(0,))
    assert cpu_info(node.client.plugin.Allocate(request, timeout=10)).allocation_result == "1,9"


def test_existing_allocation_hints_its_own_numa_nodes(node: WireNode) -> None:
    request = resource_request("pod-d", annotations=dedicated_annotations(), hint=(0,))
    node.client.plugin.Allocate(request, timeout=10)
    request.ClearField("hint")
    hints = node.client.plugin.GetTopologyHints(request, timeout=10)
    assert hint_nodes(hints) == [((0,), True)]


def test_init_container_allocate_has_no_allocation_result(node: WireNode) -> None:
    # §16 item 9
    request = resource_request("pod-i", container_type=pb.INIT)
    response = node.client.plugin.Allocate(request, timeout=10)
    assert not response.HasField("allocation_result")
    assert response.pod_uid == "pod-i"
    assert listing(node) == {}


def test_debug_pod_gets_an_allocation_leaving_cgroups_alone(node: WireNode) -> None:
    # §16 item 10
    request = resource_request("pod-g", annotations={DEBUG_KEY: "yes"})
    info = cpu_info(node.client.plugin.Allocate(request, timeout=10))
    assert (info.oci_property_name, info.allocation_result, info.is_scalar_resource) == (
        "",
        "",
        True,
    )


def test_topology_aware_and_allocatable_resources(node: WireNode) -> None:
    node.client.plugin.Allocate(resource_request("pod-a", cpu=2), timeout=10)
    aware = node.client.plugin.GetTopologyAwareResources(
        pb.GetTopologyAwareResourcesRequest(pod_uid="pod-a", container_name="app"), timeout=10
    )
    assert aware.pod_name == "name-pod-a" and aware.pod_namespace == "default"
    resource = aware.container_topology_aware_resources.allocated_resources["cpu"]
    assert resource.aggregated_quantity == 14  # §16 item 21
    assert [q.node for q in resource.topology_aware_quantity_list] == [0, 1, 2, 3]
    allocatable = node.client.plugin.GetTopologyAwareAllocatableResources(
        pb.GetTopologyAwareAllocatableResourcesRequest(), timeout=10
    ).allocatable_resources["cpu"]
    # §16 item 22
    assert [q.resource_value for q in allocatable.topology_aware_allocatable_quantity_list] == [
        3,
        3,
        4,
        4,
    ]
    assert [q.resource_value for q in allocatable.topology_aware_capacity_quantity_list] == [4] * 4
    assert allocatable.aggregated_allocatable_quantity == 14
    assert allocatable.aggregated_capacity_quantity == 16


def test_options_pre_start_and_remove_pod(node: WireNode) -> None:
    # §16 item 23, wire.md §12.6
    options = node.client.plugin.GetResourcePluginOptions(pb.Empty())  # kubelet: no deadline
    assert options == pb.ResourcePluginOptions(
        pre_start_required=False, with_topology_alignment=True, need_reconcile=True
    )
    pre = pb.PreStartContainerRequest(pod_uid="pod-a", container_name="app")
    assert node.client.plugin.PreStartContainer(pre, timeout=30) == pb.PreStartContainerResponse()
    node.client.plugin.Allocate(resource_request("pod-a"), timeout=10)
    remove = pb.RemovePodRequest(pod_uid="pod-a")
    assert node.client.plugin.RemovePod(remove, timeout=10) == pb.RemovePodResponse()
    assert listing(node) == {}
    # kubelet repeats removals: an unknown pod succeeds (wire.md §9.3)
    assert node.client.plugin.RemovePod(remove, timeout=10) == pb.RemovePodResponse()


# -- wire.md §1.1 in bytes -------------------------------------------------------------------


RESOURCE_HINTS_FIELD = b"\x52"  # field 10, length-delimited


@pytest.mark.parametrize(
    "request_",
    [
        pytest.param(resource_request("pod-s", qos="shared_cores"), id="shared cores"),
        pytest.param(resource_request("pod-r", qos="reclaimed_cores"), id="reclaimed cores"),
        pytest.param(resource_request("pod-i", container_type=pb.INIT), id="init container"),
    ],
)
def test_no_preference_leaves_the_cpu_key_out(node: WireNode, request_: pb.ResourceRequest) -> None:
    raw = node.client.raw("GetTopologyHints")
    data = raw(request_.SerializeToString(), timeout=10)
    response = pb.ResourceHintsResponse.FromString(data)
    assert "cpu" not in response.resource_hints
    assert RESOURCE_HINTS_FIELD + b"\x05\x0a\x03cpu" not in data  # not even Go's nil entry
    assert b"\x0a\x03cpu\x12\x00" not in data  # never an empty list
    # nothing but the echo: re-encoding the echo without the map gives the same bytes
    assert response.SerializeToString() == data


def test_hints_are_sent_under_the_cpu_key(node: WireNode) -> None:
    request = resource_request("pod-d", annotations=dedicated_annotations(exclusive=True))
    data = node.client.raw("GetTopologyHints")(request.SerializeToString(), timeout=10)
    assert RESOURCE_HINTS_FIELD in data and b"\x0a\x03cpu\x12" in data


# -- error codes --------------------------------------------------------------------------------


def code_of(call: object, *args: object, **kwargs: object) -> tuple[grpc.StatusCode, str]:
    with pytest.raises(grpc.RpcError) as caught:
        call(*args, **kwargs)  # type: ignore[operator]
    error = caught.value
    return error.code(), error.details()  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("request_", "code", "reason"),
    [
        pytest.param(
            resource_request("pod-q", qos="gold_cores"),
            grpc.StatusCode.INVALID_ARGUMENT,
            "qos",
            id="unknown QoS level is INVALID_ARGUMENT",
        ),
        pytest.param(
            resource_request("pod-s", qos="system_cores"),
            grpc.StatusCode.INVALID_ARGUMENT,
            "system_cores is not supported yet",
            id="system cores is INVALID_ARGUMENT",
        ),
        pytest.param(
            resource_request("pod-n", cpu=float("nan")),
            grpc.StatusCode.INVALID_ARGUMENT,
            "nan",
            id="NaN request is INVALID_ARGUMENT",
        ),
        pytest.param(
            resource_request("pod-t", container_type=7),
            grpc.StatusCode.INVALID_ARGUMENT,
            "unknown container_type 7",
            id="unknown container type is INVALID_ARGUMENT",
        ),
        pytest.param(
            resource_request("pod-x", cpu=64, annotations=dedicated_annotations(), hint=(0,)),
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "not enough",
            id="too many CPUs for one NUMA node is RESOURCE_EXHAUSTED",
        ),
        pytest.param(
            resource_request(
                "pod-e", cpu=8, annotations=dedicated_annotations(exclusive=True), hint=(0,)
            ),
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "results can't meet cpus request",
            id="exclusive NUMA node too small is RESOURCE_EXHAUSTED",
        ),
        pytest.param(
            resource_request("pod-b", annotations={QOS_LEVEL_KEY: "dedicated_cores"}, hint=(0,)),
            grpc.StatusCode.FAILED_PRECONDITION,
            "not support dedicated_cores without NUMA binding",
            id="dedicated without NUMA binding is FAILED_PRECONDITION",
        ),
        pytest.param(
            resource_request("pod-h", annotations=dedicated_annotations()),
            grpc.StatusCode.FAILED_PRECONDITION,
            "hint is nil",
            id="NUMA binding without a hint is FAILED_PRECONDITION",
        ),
    ],
)
def test_allocate_errors_map_to_one_code_and_name_the_container(
    node: WireNode, request_: pb.ResourceRequest, code: grpc.StatusCode, reason: str
) -> None:
    seq = node.seq
    got, details = code_of(node.client.plugin.Allocate, request_, timeout=10)
    assert got == code
    assert reason.lower() in details.lower()
    assert details.startswith("Allocate: ")
    assert request_.pod_uid in details and f"container {request_.container_name}" in details
    assert node.seq == seq
    assert node.observer.codes("Allocate") == [code.name]


def test_unknown_container_is_not_found(node: WireNode) -> None:
    request = pb.GetTopologyAwareResourcesRequest(pod_uid="pod-z", container_name="app")
    got, details = code_of(node.client.plugin.GetTopologyAwareResources, request, timeout=10)
    assert got == grpc.StatusCode.NOT_FOUND
    assert "pod-z" in details and "app" in details


def test_refused_commit_is_unavailable_and_changes_nothing(node: WireNode) -> None:
    node.store.refuse_next("disk full")  # type: ignore[union-attr]
    got, details = code_of(node.client.plugin.Allocate, resource_request("pod-a"), timeout=10)
    assert got == grpc.StatusCode.UNAVAILABLE and "disk full" in details
    assert listing(node) == {}


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        pytest.param(b"\xff\xff\xff", "resourceplugin.v1alpha1.ResourceRequest", id="garbage"),
        pytest.param(b"\x0a\x02\xff\xfe", "bad UTF-8", id="a pod uid that is not UTF-8"),
        pytest.param(
            resource_request("pod-e").SerializeToString() + b"\x28\x80\x80\x80\x80\x08",
            "unknown container_type -2147483648",
            id="a container type past int32, truncated as Go does",
        ),
    ],
)
def test_unparsable_bytes_are_invalid_argument(node: WireNode, data: bytes, reason: str) -> None:
    got, details = code_of(node.client.raw("Allocate"), data, timeout=10)
    assert got == grpc.StatusCode.INVALID_ARGUMENT
    assert reason in details
    assert node.seq == 1


def test_stopped_allocator_is_unavailable(node: WireNode) -> None:
    node.allocator.stop()
    got, _ = code_of(node.client.plugin.Allocate, resource_request("pod-a"), timeout=10)
    assert got == grpc.StatusCode.UNAVAILABLE


def test_not_ready_answers_unavailable_to_every_resource_plugin_rpc(node: WireNode) -> None:
    node.is_ready = False
    calls = [
        (node.client.plugin.GetTopologyHints, resource_request()),
        (node.client.plugin.Allocate, resource_request()),
        (node.client.plugin.RemovePod, pb.RemovePodRequest(pod_uid="pod-a")),
        (node.client.plugin.GetResourcesAllocation, pb.GetResourcesAllocationRequest()),
        (node.client.plugin.GetTopologyAwareResources, pb.GetTopologyAwareResourcesRequest()),
        (
            node.client.plugin.GetTopologyAwareAllocatableResources,
            pb.GetTopologyAwareAllocatableResourcesRequest(),
        ),
        (node.client.plugin.GetResourcePluginOptions, pb.Empty()),
        (node.client.plugin.PreStartContainer, pb.PreStartContainerRequest()),
    ]
    for call, message in calls:
        assert code_of(call, message, timeout=10)[0] == grpc.StatusCode.UNAVAILABLE
    # registration keeps answering, so kubelet keeps the plugin
    assert node.client.get_info().name == "cpu"
    node.is_ready = True
    assert node.client.plugin.GetResourcePluginOptions(pb.Empty(), timeout=10).need_reconcile


def test_concurrent_allocations_queue_at_the_allocator(node: WireNode) -> None:
    results: dict[str, str] = {}
    errors: list[BaseException] = []

    def admit(pod: str) -> None:
        request = resource_request(pod, qos="reclaimed_cores")
        try:
            results[pod] = cpu_info(
                node.client.plugin.Allocate(request, timeout=10)
            ).allocation_result
        except grpc.RpcError as err:
            errors.append(err)

    threads = [threading.Thread(target=admit, args=(f"pod-{i}",)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert set(results.values()) == {"1,3,9,11"}
    assert set(listing(node)) == {f"pod-{i}" for i in range(16)}
    assert node.seq == 1 + 16  # StartPolicy, then one commit per container


# -- through the real StateStore -----------------------------------------------------------------


def test_allocations_through_the_journal_survive_a_restart() -> None:
    journal = short_dir()
    try:
        node = WireNode.on_journal(journal, durability="always").start()
        try:
            node.client.plugin.Allocate(resource_request("pod-a", cpu=2), timeout=10)
            request = resource_request("pod-d", annotations=dedicated_annotations(), hint=(0,))
            node.client.plugin.Allocate(request, timeout=10)
            served = listing(node)
            seq = node.seq
        finally:
            node.close()
        assert served == {"pod-a": {"app": "3-7,10-15"}, "pod-d": {"app": "1,9"}}
        node = WireNode.on_journal(journal).start()
        try:
            assert node.seq == seq  # StartPolicy on the recovered state commits nothing
            assert listing(node) == served
        finally:
            node.close()
    finally:
        shutil.rmtree(journal, ignore_errors=True)
