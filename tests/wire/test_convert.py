"""Protobuf ↔ domain (wire.convert): requests, replies, and the wire rules they enforce."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from actors.allocator_messages import (
    Allocate,
    GetTopologyAwareResources,
    PreStartContainer,
    RemovePod,
)
from policy.cpu.allocation_listing import ContainerCPUAllocation, ResourcesAllocation
from policy.cpu.replies import (
    AllocationReply,
    CPUAllocation,
    HintsReply,
    PluginOptions,
    TopologyAwareQuantity,
    TopologyAwareReply,
    TopologyAwareResource,
)
from policy.cpu.request import ContainerType, RequestError, ResourceRequest, TopologyHint
from tests.wire.plugin_node import resource_request
from wire import convert
from wire.gen import resourceplugin_pb2 as pb
from wire.listing_bytes import ListingEncoder

DOMAIN = ResourceRequest(
    pod_uid="pod-a",
    pod_namespace="default",
    pod_name="name-pod-a",
    container_name="app",
    container_type=ContainerType.MAIN,
    container_index=0,
    resource_name="cpu",
    resource_requests={"cpu": 2.0},
)


def hints_reply(hints: tuple[TopologyHint, ...] | None) -> HintsReply:
    return HintsReply.echo(DOMAIN, None, None, hints)


# -- requests ---------------------------------------------------------------------------------


def test_request_converts_every_field() -> None:
    message = resource_request("pod-a", hint=(1, 0), annotations={"a": "b"})
    message.labels["l"] = "v"
    message.pod_role = "role"
    message.pod_type = "type"
    converted = convert.resource_request(message)
    assert converted == ResourceRequest(
        pod_uid="pod-a",
        pod_namespace="default",
        pod_name="name-pod-a",
        container_name="app",
        container_type=ContainerType.MAIN,
        container_index=0,
        resource_name="cpu",
        resource_requests={"cpu": 2.0},
        pod_role="role",
        pod_type="type",
        hint=TopologyHint((1, 0), True),  # kubelet's order kept
        labels={"l": "v"},
        annotations={"a": "b"},
        native_qos_class="Guaranteed",
    )


def test_absent_hint_and_empty_maps_are_none() -> None:
    converted = convert.resource_request(pb.ResourceRequest(pod_uid="p", container_name="c"))
    assert converted.hint is None
    assert converted.labels is None and converted.annotations is None


def test_present_hint_without_nodes_is_an_empty_hint_not_none() -> None:
    # kubelet sends nodes [] under topology-manager policy none (wire.md §4.3, field 10)
    message = pb.ResourceRequest(pod_uid="p", container_name="c", hint=pb.TopologyHint())
    assert convert.resource_request(message).hint == TopologyHint((), False)


@pytest.mark.parametrize("value", [4, 99, -1], ids=["EPHEMERAL+1", "99", "negative"])
def test_unknown_container_type_is_a_request_error(value: int) -> None:
    message = resource_request("pod-t", container_type=value)
    with pytest.raises(
        RequestError, match=f"pod default/name-pod-t .*unknown container_type {value}"
    ):
        convert.resource_request(message)


@pytest.mark.parametrize("field", ["annotations", "labels"])
def test_maps_beyond_kubernetes_limit_are_a_request_error(field: str) -> None:
    message = resource_request("pod-big")
    getattr(message, field)["huge"] = "x" * convert.MAX_MAP_BYTES
    with pytest.raises(RequestError, match=f"{field} hold 262148 bytes"):
        convert.resource_request(message)


@pytest.mark.parametrize(
    ("value", "refused"),
    [
        pytest.param("x" * (convert.MAX_MAP_BYTES - 1), False, id="ascii at the limit passes"),
        pytest.param("x" * convert.MAX_MAP_BYTES, True, id="ascii one byte past it is refused"),
        pytest.param(
            "é" * (convert.MAX_MAP_BYTES // 2),
            True,
            id="two-byte characters count as two bytes, though few enough as characters",
        ),
        pytest.param(
            "é" * (convert.MAX_MAP_BYTES // 2 - 1), False, id="two-byte characters within it pass"
        ),
        pytest.param("😀" * 1000, False, id="a small map of four-byte characters passes"),
    ],
)
def test_a_maps_limit_counts_utf8_bytes(value: str, refused: bool) -> None:
    message = resource_request("pod-big", annotations={"k": value})
    if refused:
        with pytest.raises(RequestError, match="annotations hold"):
            convert.resource_request(message)
    else:
        assert convert.resource_request(message).annotations == {"k": value}


def test_commands() -> None:
    assert convert.allocate_command(resource_request()) == Allocate(
        convert.resource_request(resource_request())
    )
    assert convert.remove_pod_command(pb.RemovePodRequest(pod_uid="u")) == RemovePod("u")
    assert convert.topology_aware_command(
        pb.GetTopologyAwareResourcesRequest(pod_uid="u", container_name="c")
    ) == GetTopologyAwareResources("u", "c")
    assert convert.pre_start_command(
        pb.PreStartContainerRequest(
            pod_uid="u", pod_namespace="ns", pod_name="n", container_name="c"
        )
    ) == PreStartContainer("u", "ns", "n", "c")


# -- replies: wire.md §1.1 --------------------------------------------------------------------


def test_no_preference_leaves_the_key_out() -> None:
    response = convert.hints_response(hints_reply(None))
    assert "cpu" not in response.resource_hints
    assert b"\x0a\x03cpu" not in response.SerializeToString()


def test_nothing_fits_is_the_key_with_an_empty_list() -> None:
    data = convert.hints_response(hints_reply(())).SerializeToString()
    assert b"\x52\x07\x0a\x03cpu\x12\x00" in data


def test_hints_keep_their_order() -> None:
    hints = (TopologyHint((2,), True), TopologyHint((0, 1), False))
    response = convert.hints_response(hints_reply(hints))
    got = [(list(h.nodes), h.preferred) for h in response.resource_hints["cpu"].hints]
    assert got == [([2], True), ([0, 1], False)]
    assert response.container_type == pb.MAIN


def test_allocation_without_result_leaves_the_field_out() -> None:
    reply = AllocationReply.echo(DOMAIN, None, None, None)
    response = convert.allocation_response(reply)
    assert not response.HasField("allocation_result")
    assert response.pod_uid == "pod-a" and response.resource_name == "cpu"


def test_no_reply_is_the_empty_response() -> None:
    assert convert.allocation_response(None) == pb.ResourceAllocationResponse()


@pytest.mark.parametrize(
    ("resource_hints", "want"),
    [
        pytest.param(None, None, id="no hints leaves resource_hints out"),
        pytest.param((TopologyHint((0,), True),), [([0], True)], id="the request's hint"),
        pytest.param((None,), [([], False)], id="a nil hint is an empty element"),
    ],
)
def test_allocation_info(
    resource_hints: tuple[TopologyHint | None, ...] | None,
    want: list[tuple[list[int], bool]] | None,
) -> None:
    allocation = CPUAllocation(
        oci_property_name="CpusetCpus",
        allocated_quantity=3.0,
        allocation_result="1,8-9",
        resource_hints=resource_hints,
    )
    reply = AllocationReply.echo(DOMAIN, {"q": "v"}, None, allocation)
    info = convert.allocation_response(reply).allocation_result.resource_allocation["cpu"]
    assert (info.oci_property_name, info.allocated_quantity, info.allocation_result) == (
        "CpusetCpus",
        3.0,
        "1,8-9",
    )
    assert info.is_scalar_resource and not info.is_node_resource
    if want is None:
        assert not info.HasField("resource_hints")
    else:
        assert [(list(h.nodes), h.preferred) for h in info.resource_hints.hints] == want


def test_resources_allocation_shares_one_conversion_per_cpuset() -> None:
    pool = ContainerCPUAllocation(11, "3-7,10-15")
    own = ContainerCPUAllocation(3, "1,8-9")
    reply = ResourcesAllocation({"pod-a": {"app": pool, "side": pool}, "pod-d": {"app": own}})
    data = convert.resources_allocation_response(reply)
    response = pb.GetResourcesAllocationResponse.FromString(data)
    got = {
        uid: {
            name: (a.resource_allocation["cpu"].allocation_result, a.resource_allocation["cpu"])
            for name, a in pod.container_resources.items()
        }
        for uid, pod in response.pod_resources.items()
    }
    assert {uid: {n: v[0] for n, v in c.items()} for uid, c in got.items()} == {
        "pod-a": {"app": "3-7,10-15", "side": "3-7,10-15"},
        "pod-d": {"app": "1,8-9"},
    }
    info = got["pod-d"]["app"][1]
    assert info.oci_property_name == "CpusetCpus" and info.allocated_quantity == 3
    assert not info.HasField("resource_hints")  # GetResourcesAllocation leaves it out


def test_topology_aware_sidecar_has_no_lists() -> None:
    reply = TopologyAwareReply(
        "pod-a",
        "name-pod-a",
        "default",
        "side",
        TopologyAwareResource(False, True, 0.0, 0.0, None, None),
    )
    response = convert.topology_aware_response(reply)
    data = response.SerializeToString()
    parsed = pb.GetTopologyAwareResourcesResponse.FromString(data)
    resource = parsed.container_topology_aware_resources.allocated_resources["cpu"]
    assert list(resource.topology_aware_quantity_list) == []
    assert (parsed.pod_name, parsed.pod_namespace) == ("name-pod-a", "default")


def test_topology_aware_quantities() -> None:
    quantities = (TopologyAwareQuantity(1.0, 0), TopologyAwareQuantity(2.0, 1))
    reply = TopologyAwareReply(
        "u", "n", "ns", "c", TopologyAwareResource(False, True, 3.0, 3.0, quantities, quantities)
    )
    resource = convert.topology_aware_response(
        reply
    ).container_topology_aware_resources.allocated_resources["cpu"]
    assert [
        (q.node, q.resource_value, q.topology_level) for q in resource.topology_aware_quantity_list
    ] == [
        (0, 1.0, pb.NUMA),
        (1, 2.0, pb.NUMA),
    ]


def test_options() -> None:
    assert convert.options_response(PluginOptions()) == pb.ResourcePluginOptions(
        pre_start_required=False, with_topology_alignment=True, need_reconcile=True
    )


def test_resources_allocation_bytes_equal_protobufs_own_encoding() -> None:
    # long names and many containers: multi-byte varint lengths at every level
    pool = ContainerCPUAllocation(200, "8-207")
    pods = {
        f"pod-{i:03d}-" + "u" * 150: {f"c{j}-" + "n" * 130: pool for j in range(3)}
        for i in range(40)
    }
    pods["pod-empty"] = {}
    data = convert.resources_allocation_response(ResourcesAllocation(pods))
    expected = pb.GetResourcesAllocationResponse()
    for uid, containers in pods.items():
        target = expected.pod_resources[uid]  # indexing creates the entry, as intended here
        for name, allocation in containers.items():
            info = target.container_resources[name].resource_allocation["cpu"]
            info.oci_property_name = allocation.oci_property_name
            info.is_scalar_resource = True
            info.allocated_quantity = allocation.allocated_quantity
            info.allocation_result = allocation.allocation_result
    assert pb.GetResourcesAllocationResponse.FromString(data) == expected
    assert len(data) == expected.ByteSize()


def test_empty_listing_is_the_empty_message() -> None:
    assert convert.resources_allocation_response(ResourcesAllocation({})) == b""


def test_the_same_listing_value_gets_bytes_equal_to_a_fresh_encoding() -> None:
    pool = ContainerCPUAllocation(4, "1-4")
    reply = ResourcesAllocation({"pod-1": {"c": pool}, "pod-2": {"c": pool}})
    encoder = ListingEncoder()  # what a served plugin keeps (wire.resource_plugin.handler)
    first = encoder.encode(reply)
    again = encoder.encode(reply)
    fresh = convert.resources_allocation_response(ResourcesAllocation(dict(reply.pod_resources)))
    assert again is first and fresh == first
    other = ResourcesAllocation({"pod-1": {"c": pool}})
    assert convert.resources_allocation_response(other) != first


# -- replies: messages kept by value ----------------------------------------------------------


def _fresh_hints(hints: tuple[TopologyHint | None, ...]) -> pb.ListOfTopologyHints:
    """The hint list built afresh, element by element, as a reference."""
    return pb.ListOfTopologyHints(
        hints=[
            pb.TopologyHint()
            if h is None
            else pb.TopologyHint(nodes=h.nodes, preferred=h.preferred)
            for h in hints
        ]
    )


def _fresh_allocation(allocation: CPUAllocation) -> pb.ResourceAllocation:
    info = pb.ResourceAllocationInfo(
        oci_property_name=allocation.oci_property_name,
        is_node_resource=allocation.is_node_resource,
        is_scalar_resource=allocation.is_scalar_resource,
        allocated_quantity=allocation.allocated_quantity,
        allocation_result=allocation.allocation_result,
    )
    if allocation.resource_hints is not None:
        info.resource_hints.CopyFrom(_fresh_hints(allocation.resource_hints))
    return pb.ResourceAllocation(resource_allocation={"cpu": info})


_HINTS = st.lists(
    st.none() | st.builds(TopologyHint, st.tuples(st.integers(0, 200)), st.booleans()),
    max_size=3,
).map(tuple)
_ALLOCATIONS = st.builds(
    CPUAllocation,
    oci_property_name=st.sampled_from(["", "CpusetCpus"]),
    is_node_resource=st.booleans(),
    is_scalar_resource=st.booleans(),
    allocated_quantity=st.sampled_from([0.0, -0.0, 1.0, 2, 252.0, 0.04]),
    allocation_result=st.sampled_from(["", "0-3", "1-15,17-31"]),
    resource_hints=st.none() | _HINTS,
)


@given(allocations=st.lists(_ALLOCATIONS, max_size=6), hints=st.lists(_HINTS, max_size=6))
def test_replies_answer_as_messages_built_afresh(
    allocations: list[CPUAllocation], hints: list[tuple[TopologyHint | None, ...]]
) -> None:
    # Lists of few distinct values: later elements meet the kept messages of earlier ones.
    for allocation in allocations * 2:
        got = convert.allocation_response(AllocationReply.echo(DOMAIN, None, None, allocation))
        assert got.allocation_result.SerializeToString() == (
            _fresh_allocation(allocation).SerializeToString()
        )
    for hint_list in hints * 2:
        got_hints = convert.hints_response(hints_reply(hint_list)).resource_hints["cpu"]  # type: ignore[arg-type]
        assert got_hints.SerializeToString() == _fresh_hints(hint_list).SerializeToString()


def test_a_negative_zero_quantity_is_answered_apart_from_zero() -> None:
    def quantity_bytes(quantity: float) -> bytes:
        allocation = CPUAllocation(allocated_quantity=quantity)
        reply = AllocationReply.echo(DOMAIN, None, None, allocation)
        return convert.allocation_response(reply).allocation_result.SerializeToString()

    zero = quantity_bytes(0.0)
    assert quantity_bytes(-0.0) != zero  # proto3 writes -0.0 (not all-zero bits), not 0.0
    assert quantity_bytes(0.0) == zero


def test_an_answer_its_caller_changed_does_not_change_the_next_one() -> None:
    allocation = CPUAllocation(
        allocated_quantity=2.0,
        allocation_result="0-1",
        resource_hints=(TopologyHint((0,), True),),
    )
    reply = AllocationReply.echo(DOMAIN, None, None, allocation)
    first = convert.allocation_response(reply)
    first.allocation_result.resource_allocation["cpu"].allocation_result = "changed"
    first.allocation_result.resource_allocation["cpu"].resource_hints.hints[0].preferred = False
    again = convert.allocation_response(reply).allocation_result.resource_allocation["cpu"]
    assert again.allocation_result == "0-1" and again.resource_hints.hints[0].preferred
    hints = hints_reply((TopologyHint((1,), True),))
    convert.hints_response(hints).resource_hints["cpu"].hints[0].preferred = False
    assert convert.hints_response(hints).resource_hints["cpu"].hints[0].preferred


def test_hints_given_as_a_list_convert_too() -> None:
    reply = hints_reply([TopologyHint((1,), True)])  # type: ignore[arg-type]
    got = convert.hints_response(reply).resource_hints["cpu"].hints
    assert [(list(h.nodes), h.preferred) for h in got] == [([1], True)]


def test_the_kept_messages_start_afresh_past_their_bound() -> None:
    for quantity in range(1, convert.MAX_KEPT_MESSAGES + 2):
        reply = AllocationReply.echo(DOMAIN, None, None, CPUAllocation(allocated_quantity=quantity))
        info = convert.allocation_response(reply).allocation_result.resource_allocation["cpu"]
        assert info.allocated_quantity == quantity
    assert 0 < len(convert._ALLOCATIONS) <= convert.MAX_KEPT_MESSAGES


# -- replies: maps copied key by key ----------------------------------------------------------

_MAPS = st.none() | st.dictionaries(
    st.text(min_size=1, max_size=8), st.text(max_size=8), max_size=4
)


def _fresh_response_fields(
    reply: AllocationReply | HintsReply,
) -> dict[str, object]:
    """The echo fields as constructor arguments, maps included (the reference way)."""
    identity = reply.identity
    return {
        "pod_uid": identity.pod_uid,
        "pod_namespace": identity.pod_namespace,
        "pod_name": identity.pod_name,
        "container_name": identity.container_name,
        "container_type": identity.container_type.value,
        "container_index": identity.container_index,
        "pod_role": reply.pod_role,
        "pod_type": reply.pod_type,
        "resource_name": reply.resource_name,
        "labels": reply.labels or {},
        "annotations": reply.annotations or {},
        "native_qos_class": reply.native_qos_class,
    }


@given(
    labels=_MAPS,
    annotations=_MAPS,
    allocation=st.none() | _ALLOCATIONS,
    hints=st.none() | _HINTS.map(lambda hs: tuple(h for h in hs if h is not None)),
)
def test_replies_equal_responses_built_with_their_maps_as_arguments(
    labels: dict[str, str] | None,
    annotations: dict[str, str] | None,
    allocation: CPUAllocation | None,
    hints: tuple[TopologyHint, ...] | None,
) -> None:
    allocated = AllocationReply.echo(DOMAIN, labels, annotations, allocation)
    want = pb.ResourceAllocationResponse(**_fresh_response_fields(allocated))  # type: ignore[arg-type]
    if allocation is not None:
        want.allocation_result.CopyFrom(_fresh_allocation(allocation))
    got = convert.allocation_response(allocated)
    assert got == want
    assert got.SerializeToString(deterministic=True) == want.SerializeToString(deterministic=True)
    hinted = HintsReply.echo(DOMAIN, labels, annotations, hints)
    resource_hints = {} if hints is None else {"cpu": _fresh_hints(hints)}
    fresh = pb.ResourceHintsResponse(
        resource_hints=resource_hints,
        **_fresh_response_fields(hinted),  # type: ignore[arg-type]
    )
    got_hints = convert.hints_response(hinted)
    assert got_hints == fresh
    assert ("cpu" in got_hints.resource_hints) is (hints is not None)
    assert got_hints.SerializeToString(deterministic=True) == fresh.SerializeToString(
        deterministic=True
    )


@given(labels=_MAPS, annotations=_MAPS)
def test_request_maps_copy_in_the_messages_order(
    labels: dict[str, str] | None, annotations: dict[str, str] | None
) -> None:
    message = resource_request("pod-a", annotations=annotations or {})
    for key, value in (labels or {}).items():
        message.labels[key] = value
    converted = convert.resource_request(message)
    for field, got in (("labels", converted.labels), ("annotations", converted.annotations)):
        source = getattr(message, field)
        want = dict(source.items()) or None
        assert got == want
        assert list(got or ()) == list(want or ())
    assert list(converted.resource_requests.items()) == list(message.resource_requests.items())
