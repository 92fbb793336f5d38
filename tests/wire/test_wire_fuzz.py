"""Bad input over the wire never crashes qrmd, always gets an error status, and changes nothing.

Hypothesis builds kubelet requests with random strings and maps and at least one defect each
(a missing field, an unknown container type, a NaN, infinite, negative or absurd quantity, the
wrong number of resources, an unknown QoS level, a hint naming a NUMA node twice, 1 MiB of
annotations), sends them to the real Allocator through a real socket, and checks that each gets
an error status that is not INTERNAL, that the server keeps answering, and that the Allocator's
snapshot (sequence number and state) is the one from before. Random bytes get the same
treatment (they may happen to parse; then only "no crash, state as the answer says" holds).

One served node per test (hypothesis reruns the body, not the fixture), pre-loaded with a shared
and a dedicated container so that there is state to damage.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import grpc
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policy.cpu.qos import QOS_LEVEL_KEY
from policy.cpu.request import MAX_CPU_REQUEST, RESOURCE_CPU, RESOURCE_RECLAIMED_MILLICPU
from tests.wire.plugin_node import WireNode, dedicated_annotations, resource_request
from wire.gen import resourceplugin_pb2 as pb

FUZZ = settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
ONE_MIB = 1024 * 1024
NOT_ANSWERS = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN, grpc.StatusCode.OK}

text = st.text(max_size=40)
small_maps = st.dictionaries(text, text, max_size=4)
defect_quantities = st.one_of(
    st.just(math.nan),
    st.just(math.inf),
    st.just(-math.inf),
    st.floats(max_value=-1e-9, allow_nan=False),
    st.floats(min_value=MAX_CPU_REQUEST * 1.01, allow_nan=False),
)


def _set_quantity(value: float) -> Callable[[pb.ResourceRequest], None]:
    def damage(message: pb.ResourceRequest) -> None:
        message.resource_requests.clear()
        message.resource_requests[RESOURCE_CPU] = value

    return damage


def _clear(field: str) -> Callable[[pb.ResourceRequest], None]:
    return lambda message: message.ClearField(field)


def _two_resources(message: pb.ResourceRequest) -> None:
    message.resource_requests[RESOURCE_CPU] = 1.0
    message.resource_requests[RESOURCE_RECLAIMED_MILLICPU] = 1000.0


def _unknown_resource(name: str) -> Callable[[pb.ResourceRequest], None]:
    def damage(message: pb.ResourceRequest) -> None:
        message.resource_requests.clear()
        message.resource_requests[f"example.com/{name}"] = 1.0

    return damage


def _container_type(value: int) -> Callable[[pb.ResourceRequest], None]:
    def damage(message: pb.ResourceRequest) -> None:
        message.container_type = value  # type: ignore[assignment]

    return damage


def _qos(level: str) -> Callable[[pb.ResourceRequest], None]:
    def damage(message: pb.ResourceRequest) -> None:
        message.annotations[QOS_LEVEL_KEY] = f"x-{level}"

    return damage


def _twice_named_hint(node: int) -> Callable[[pb.ResourceRequest], None]:
    def damage(message: pb.ResourceRequest) -> None:
        message.hint.CopyFrom(pb.TopologyHint(nodes=[node, node], preferred=True))

    return damage


def _huge_map(field: str, key: str) -> Callable[[pb.ResourceRequest], None]:
    def damage(message: pb.ResourceRequest) -> None:
        getattr(message, field)[f"big-{key}"] = "x" * ONE_MIB

    return damage


defects = st.one_of(
    st.just(_clear("pod_uid")),
    st.just(_clear("container_name")),
    st.just(_clear("resource_requests")),
    st.just(_two_resources),
    defect_quantities.map(_set_quantity),
    text.map(_unknown_resource),
    st.integers(min_value=4, max_value=2**31 - 1).map(_container_type),
    st.integers(min_value=-(2**31), max_value=-1).map(_container_type),
    text.map(_qos),
    st.integers(min_value=0, max_value=2**64 - 1).map(_twice_named_hint),
    st.sampled_from(["annotations", "labels"]).flatmap(
        lambda field: text.map(lambda key: _huge_map(field, key))
    ),
)


@st.composite
def bad_requests(draw: st.DrawFn) -> pb.ResourceRequest:
    """A ResourceRequest with random content and at least one defect."""
    message = pb.ResourceRequest(
        pod_uid=draw(text),
        pod_namespace=draw(text),
        pod_name=draw(text),
        container_name=draw(text),
        container_type=draw(st.sampled_from([pb.INIT, pb.MAIN, pb.SIDECAR])),
        container_index=draw(st.integers(min_value=0, max_value=2**64 - 1)),
        pod_role=draw(text),
        pod_type=draw(text),
        resource_name=draw(st.sampled_from(["cpu", "", "memory"])),
        resource_requests={
            RESOURCE_CPU: draw(st.floats(min_value=0, max_value=64, allow_nan=False))
        },
        labels=draw(small_maps),
        annotations=draw(small_maps),
        native_qos_class=draw(text),
    )
    if draw(st.booleans()):
        nodes = draw(st.lists(st.integers(min_value=0, max_value=2**64 - 1), max_size=4))
        message.hint.CopyFrom(pb.TopologyHint(nodes=nodes, preferred=draw(st.booleans())))
    # Each defect is fatal on its own, and a later one never repairs an earlier one (the
    # resource_requests defects each leave the map bad, whichever comes last).
    for damage in draw(st.lists(defects, min_size=1, max_size=3)):
        damage(message)
    return message


@contextmanager
def loaded_node() -> Iterator[WireNode]:
    node = WireNode().start()
    try:
        node.client.plugin.Allocate(resource_request("pod-a", cpu=2), timeout=10)
        request = resource_request("pod-d", annotations=dedicated_annotations(), hint=(2,))
        node.client.plugin.Allocate(request, timeout=10)
        yield node
    finally:
        node.close()


def answer_code(call: Callable[..., object], payload: object) -> grpc.StatusCode:
    try:
        call(payload, timeout=10)
    except grpc.RpcError as err:
        return err.code()  # type: ignore[attr-defined, no-any-return]
    return grpc.StatusCode.OK


def assert_still_serving(node: WireNode) -> None:
    assert node.client.get_info().name == "cpu"
    options = node.client.plugin.GetResourcePluginOptions(pb.Empty(), timeout=10)
    assert options.with_topology_alignment


def test_bad_requests_get_an_error_and_change_nothing() -> None:
    with loaded_node() as node:
        before = node.core.snapshot

        @FUZZ
        @given(request=bad_requests(), method=st.sampled_from(["Allocate", "GetTopologyHints"]))
        def check(request: pb.ResourceRequest, method: str) -> None:
            code = answer_code(getattr(node.client.plugin, method), request)
            assert code not in NOT_ANSWERS, (method, code)
            assert node.core.snapshot.seq == before.seq
            assert node.core.snapshot.state == before.state

        check()
        assert_still_serving(node)
        assert node.observer.codes("Allocate").count("INTERNAL") == 0


def test_random_bytes_never_crash_the_server() -> None:
    with loaded_node() as node:

        @FUZZ
        @given(
            data=st.binary(max_size=512),
            method=st.sampled_from(
                ["Allocate", "GetTopologyHints", "GetTopologyAwareResources", "PreStartContainer"]
            ),
        )
        def check(data: bytes, method: str) -> None:
            before = node.core.snapshot
            code = answer_code(node.client.raw(method), data)
            assert code not in {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN}, code
            if code != grpc.StatusCode.OK:
                assert node.core.snapshot == before

        check()
        assert_still_serving(node)


def test_unknown_pods_and_containers_change_nothing() -> None:
    with loaded_node() as node:
        before = node.core.snapshot

        @FUZZ
        @given(pod=text.filter(lambda uid: uid not in {"pod-a", "pod-d"}), container=text)
        def check(pod: str, container: str) -> None:
            query = pb.GetTopologyAwareResourcesRequest(pod_uid=pod, container_name=container)
            code = answer_code(node.client.plugin.GetTopologyAwareResources, query)
            assert code == grpc.StatusCode.NOT_FOUND
            # an unknown pod's removal succeeds (kubelet retries removals, wire.md §9.3)
            removal = pb.RemovePodRequest(pod_uid=pod)
            assert answer_code(node.client.plugin.RemovePod, removal) == grpc.StatusCode.OK
            assert node.core.snapshot == before

        check()
        assert_still_serving(node)
