"""The kubelet's half of the QRM conversions (wire.kubelet_convert): requests out, answers in.

Where the plugin's half (``wire.convert``) exists, the two are checked against each other
through serialized bytes, so a rule one side writes is the rule the other side reads.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TypeVar

import pytest
from google.protobuf.message import Message
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.allocator_messages import PreStartContainer
from policy.cpu.allocation_listing import ContainerCPUAllocation, ResourcesAllocation
from policy.cpu.replies import (
    AllocatableReply,
    AllocatableResource,
    AllocationReply,
    CPUAllocation,
    HintsReply,
    PluginOptions,
    TopologyAwareQuantity,
    TopologyAwareReply,
)
from policy.cpu.replies import TopologyAwareResource as PolicyTopologyAwareResource
from policy.cpu.request import ContainerType, ResourceRequest, TopologyHint
from wire import convert, kubelet_convert
from wire.gen import pluginregistration_pb2 as reg_pb
from wire.gen import resourceplugin_pb2 as pb
from wire.kubelet_convert import AllocationInfo, NUMAQuantity, PluginInfo, TopologyAwareResource

M = TypeVar("M", bound=Message)

REQUEST = ResourceRequest(
    pod_uid="uid-1",
    pod_namespace="default",
    pod_name="web",
    container_name="app",
    container_type=ContainerType.MAIN,
    container_index=0,
    resource_name="cpu",
    resource_requests={"cpu": 1.5},
    pod_role="role",
    pod_type="type",
    hint=TopologyHint((1, 0), True),
    labels={"app": "web"},
    annotations={"katalyst.kubewharf.io/qos_level": "shared_cores"},
    native_qos_class="Burstable",
)


def over_the_wire(message: M) -> M:
    """The message as the peer parses it: serialized, then parsed by the generated class."""
    return type(message).FromString(message.SerializeToString())


# -- requests ---------------------------------------------------------------------------------


def test_request_writes_every_field() -> None:
    message = kubelet_convert.request_message(REQUEST)
    assert message == pb.ResourceRequest(
        pod_uid="uid-1",
        pod_namespace="default",
        pod_name="web",
        container_name="app",
        container_type=pb.MAIN,
        container_index=0,
        pod_role="role",
        pod_type="type",
        resource_name="cpu",
        hint=pb.TopologyHint(nodes=[1, 0], preferred=True),
        resource_requests={"cpu": 1.5},
        labels={"app": "web"},
        annotations={"katalyst.kubewharf.io/qos_level": "shared_cores"},
        native_qos_class="Burstable",
    )


@pytest.mark.parametrize(
    ("hint", "has_hint", "nodes", "preferred"),
    [
        pytest.param(None, False, [], False, id="no hint leaves the field unset, as in hints"),
        pytest.param(
            TopologyHint((), False),
            True,
            [],
            False,
            id="an empty hint is still sent (topology policy none)",
        ),
        pytest.param(TopologyHint((2, 3), False), True, [2, 3], False, id="nodes keep order"),
    ],
)
def test_request_hint(
    hint: TopologyHint | None, has_hint: bool, nodes: list[int], preferred: bool
) -> None:
    message = over_the_wire(kubelet_convert.request_message(replace(REQUEST, hint=hint)))
    assert message.HasField("hint") is has_hint
    assert (list(message.hint.nodes), message.hint.preferred) == (nodes, preferred)


@pytest.mark.parametrize("container_type", list(ContainerType), ids=[t.name for t in ContainerType])
def test_request_container_type_is_the_enum_number(container_type: ContainerType) -> None:
    request = replace(REQUEST, container_type=container_type)
    assert kubelet_convert.request_message(request).container_type == int(container_type)


def test_request_without_maps_sends_them_empty() -> None:
    request = replace(REQUEST, labels=None, annotations=None)
    message = kubelet_convert.request_message(request)
    assert dict(message.labels) == {} and dict(message.annotations) == {}


_names = st.text(min_size=1, max_size=12)
_maps = st.dictionaries(_names, st.text(max_size=12), max_size=3)
_requests = st.builds(
    ResourceRequest,
    pod_uid=_names,
    pod_namespace=_names,
    pod_name=_names,
    container_name=_names,
    container_type=st.sampled_from(ContainerType),
    container_index=st.integers(0, 2**31 - 1),
    resource_name=st.sampled_from(["cpu", "memory"]),
    resource_requests=st.dictionaries(
        st.sampled_from(["cpu", "resource.katalyst.kubewharf.io/reclaimed_millicpu"]),
        st.floats(allow_nan=False, allow_infinity=False),
        min_size=1,
        max_size=1,
    ),
    pod_role=st.text(max_size=8),
    pod_type=st.text(max_size=8),
    hint=st.none()
    | st.builds(TopologyHint, st.tuples(*[st.integers(0, 7)] * 2), st.booleans())
    | st.just(TopologyHint((), False)),
    labels=st.none() | _maps.filter(bool),
    annotations=st.none() | _maps.filter(bool),
    native_qos_class=st.sampled_from(["", "Guaranteed", "Burstable", "BestEffort"]),
)


@settings(max_examples=60, deadline=None)
@given(_requests)
def test_plugin_parses_back_the_request_the_kubelet_writes(request: ResourceRequest) -> None:
    message = over_the_wire(kubelet_convert.request_message(request))
    assert convert.resource_request(message) == request


# -- GetTopologyHints: wire.md §1.1 -----------------------------------------------------------


@pytest.mark.parametrize(
    ("resource_hints", "want"),
    [
        pytest.param({}, None, id="cpu key absent is no preference"),
        pytest.param(
            {"memory": pb.ListOfTopologyHints(hints=[pb.TopologyHint(nodes=[0])])},
            None,
            id="another resource's hints are no preference for cpu",
        ),
        pytest.param(
            {"cpu": pb.ListOfTopologyHints()}, (), id="cpu key with an empty list is nothing fits"
        ),
        pytest.param(
            {
                "cpu": pb.ListOfTopologyHints(
                    hints=[
                        pb.TopologyHint(nodes=[2, 3], preferred=False),
                        pb.TopologyHint(nodes=[1], preferred=True),
                    ]
                )
            },
            (TopologyHint((2, 3), False), TopologyHint((1,), True)),
            id="hints keep the plugin's order",
        ),
    ],
)
def test_hints_for(
    resource_hints: dict[str, pb.ListOfTopologyHints], want: tuple[TopologyHint, ...] | None
) -> None:
    message = over_the_wire(pb.ResourceHintsResponse(resource_hints=resource_hints))
    assert kubelet_convert.hints_for(message, "cpu") == want


def test_reading_a_missing_key_does_not_create_it() -> None:
    message = pb.ResourceHintsResponse()
    assert kubelet_convert.hints_for(message, "cpu") is None
    assert "cpu" not in message.resource_hints
    assert kubelet_convert.hints_for(message, "cpu") is None


@pytest.mark.parametrize(
    "hints",
    [
        pytest.param(None, id="no preference"),
        pytest.param((), id="nothing fits"),
        pytest.param((TopologyHint((0, 1), True), TopologyHint((2,), False)), id="two hints"),
    ],
)
def test_kubelet_reads_the_hints_the_plugin_writes(
    hints: tuple[TopologyHint, ...] | None,
) -> None:
    reply = HintsReply.echo(REQUEST, None, None, hints)
    message = over_the_wire(convert.hints_response(reply))
    assert kubelet_convert.hints_for(message, "cpu") == hints


# -- Allocate and GetResourcesAllocation ------------------------------------------------------


def test_allocate_without_allocation_result_is_none_not_empty() -> None:
    absent = pb.ResourceAllocationResponse(pod_uid="u")
    assert kubelet_convert.allocation(over_the_wire(absent)) is None
    # An empty submessage is still on the wire (tag and zero length): present, with no entry.
    empty = pb.ResourceAllocationResponse(allocation_result=pb.ResourceAllocation())
    assert kubelet_convert.allocation(over_the_wire(empty)) == {}


@pytest.mark.parametrize(
    ("allocation", "want"),
    [
        pytest.param(
            CPUAllocation("CpusetCpus", False, True, 4.0, "4-7", (TopologyHint((1,), True),)),
            AllocationInfo("CpusetCpus", "4-7", 4.0, True, (TopologyHint((1,), True),)),
            id="dedicated: cpuset and the echoed hint",
        ),
        pytest.param(
            CPUAllocation("CpusetCpus", False, True, 1.5, "1,3-15", None),
            AllocationInfo("CpusetCpus", "1,3-15", 1.5, True, None),
            id="absent resource_hints is None",
        ),
        pytest.param(
            CPUAllocation("", False, False, 0.0, "", ()),
            AllocationInfo("", "", 0.0, False, ()),
            id="present empty resource_hints is an empty tuple",
        ),
        pytest.param(
            CPUAllocation("CpusetCpus", False, True, 2.0, "8-9", (None,)),
            AllocationInfo("CpusetCpus", "8-9", 2.0, True, (TopologyHint((), False),)),
            id="a nil hint echoed by the plugin reads as an empty hint",
        ),
    ],
)
def test_kubelet_reads_the_allocation_the_plugin_writes(
    allocation: CPUAllocation, want: AllocationInfo
) -> None:
    reply = AllocationReply.echo(REQUEST, None, None, allocation)
    message = over_the_wire(convert.allocation_response(reply))
    assert kubelet_convert.allocation(message) == {"cpu": want}


def test_init_container_reply_reads_as_no_allocation() -> None:
    reply = AllocationReply.echo(REQUEST, None, None, None)
    assert kubelet_convert.allocation(over_the_wire(convert.allocation_response(reply))) is None


def test_resources_allocation_reads_the_plugins_own_bytes() -> None:
    shared = ContainerCPUAllocation(allocated_quantity=12, allocation_result="1,3-8,10-15")
    listing = ResourcesAllocation(
        pod_resources={
            "uid-1": {"app": shared, "envoy": shared},
            "uid-2": {"main": ContainerCPUAllocation(4, "4-7")},
        }
    )
    message = pb.GetResourcesAllocationResponse.FromString(
        convert.resources_allocation_response(listing)
    )
    shared_info = AllocationInfo("CpusetCpus", "1,3-8,10-15", 12.0, True, None)
    assert kubelet_convert.resources_allocation(message) == {
        "uid-1": {"app": {"cpu": shared_info}, "envoy": {"cpu": shared_info}},
        "uid-2": {"main": {"cpu": AllocationInfo("CpusetCpus", "4-7", 4.0, True, None)}},
    }


def test_empty_resources_allocation_is_an_empty_dict() -> None:
    assert kubelet_convert.resources_allocation(pb.GetResourcesAllocationResponse()) == {}


# -- topology-aware queries -------------------------------------------------------------------


def _numa(*pairs: tuple[int, float]) -> tuple[TopologyAwareQuantity, ...]:
    return tuple(TopologyAwareQuantity(resource_value=value, node=node) for node, value in pairs)


def test_topology_aware_resources_per_numa() -> None:
    reply = TopologyAwareReply(
        pod_uid="uid-2",
        pod_name="db",
        pod_namespace="default",
        container_name="main",
        resource=PolicyTopologyAwareResource(
            is_node_resource=False,
            is_scalar_resource=True,
            aggregated_quantity=4.0,
            original_aggregated_quantity=4.0,
            topology_aware_quantity_list=_numa((1, 4.0)),
            original_topology_aware_quantity_list=_numa((1, 2.0), (2, 2.0)),
        ),
    )
    message = pb.GetTopologyAwareResourcesResponse.FromString(
        convert.topology_aware_response(reply).SerializeToString()
    )
    assert kubelet_convert.topology_aware_resources(message) == {
        "cpu": TopologyAwareResource(
            aggregated=4.0,
            original_aggregated=4.0,
            per_numa=(NUMAQuantity(1, 4.0),),
            original_per_numa=(NUMAQuantity(1, 2.0), NUMAQuantity(2, 2.0)),
        )
    }


def test_topology_aware_sidecar_without_lists_reads_empty() -> None:
    reply = TopologyAwareReply(
        "uid-1",
        "web",
        "default",
        "envoy",
        PolicyTopologyAwareResource(False, True, 0.0, 0.0, None, None),
    )
    (resource,) = kubelet_convert.topology_aware_resources(
        convert.topology_aware_response(reply)
    ).values()
    assert resource.per_numa == () and resource.original_per_numa == ()


def test_allocatable_resources_pairs_allocatable_with_capacity() -> None:
    reply = AllocatableReply(
        AllocatableResource(
            is_node_resource=False,
            is_scalar_resource=True,
            aggregated_allocatable_quantity=14.0,
            topology_aware_allocatable_quantity_list=_numa((0, 3.0), (1, 4.0)),
            aggregated_capacity_quantity=16.0,
            topology_aware_capacity_quantity_list=_numa((0, 4.0), (1, 4.0)),
        )
    )
    message = pb.GetTopologyAwareAllocatableResourcesResponse.FromString(
        convert.allocatable_response(reply).SerializeToString()
    )
    assert kubelet_convert.allocatable_resources(message) == {
        "cpu": (
            (NUMAQuantity(0, 3.0), NUMAQuantity(1, 4.0)),
            (NUMAQuantity(0, 4.0), NUMAQuantity(1, 4.0)),
        )
    }


# -- registration, options, PreStartContainer -------------------------------------------------


def test_plugin_info() -> None:
    message = reg_pb.PluginInfo(
        type="ResourcePlugin",
        name="cpu",
        endpoint="/var/lib/kubelet/plugins/qrm_cpu_plugin_dynamic.sock",
        supported_versions=["v1alpha1"],
    )
    assert kubelet_convert.plugin_info(message) == PluginInfo(
        "ResourcePlugin",
        "cpu",
        "/var/lib/kubelet/plugins/qrm_cpu_plugin_dynamic.sock",
        ("v1alpha1",),
    )


@pytest.mark.parametrize(
    "options",
    [
        pytest.param(PluginOptions(), id="the reference cpu plugin's options"),
        pytest.param(PluginOptions(True, False, False), id="every flag flipped"),
    ],
)
def test_kubelet_reads_the_options_the_plugin_writes(options: PluginOptions) -> None:
    assert kubelet_convert.plugin_options(convert.options_response(options)) == options


def test_pre_start_message() -> None:
    message = kubelet_convert.pre_start_message("uid-1", "default", "web", "app")
    assert convert.pre_start_command(message) == PreStartContainer("uid-1", "default", "web", "app")
