"""The ResourcePlugin handlers' contract with the Allocator: the deadline becomes the ask's
timeout, and an ask that times out answers UNAVAILABLE (DESIGN.md, wire.resource_plugin)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import grpc
import pykka
import pytest

from actors.allocator_messages import GetResourcePluginOptions, PreStartContainer
from policy.cpu.commands import PluginCall
from policy.cpu.replies import PluginOptions
from tests.wire.plugin_node import Client, short_dir
from wire.gen import resourceplugin_pb2 as pb
from wire.plugin_server import PluginServer
from wire.resource_plugin import RESOURCE_PLUGIN_RPCS, ask_allocator
from wire.rpc import ask_timeout


class RecordingRef:
    """An allocator ref that records each ask and answers, or times out when told to."""

    def __init__(self) -> None:
        self.asks: list[tuple[Any, float | None]] = []
        self.time_out = False

    def ask(self, message: Any, *, block: bool = True, timeout: float | None = None) -> Any:
        self.asks.append((message, timeout))
        if self.time_out:
            raise pykka.Timeout(f"{timeout} seconds")
        if isinstance(message, GetResourcePluginOptions):
            return PluginOptions()
        return None


@pytest.fixture
def served() -> Iterator[tuple[RecordingRef, Client]]:
    directory = short_dir()
    ref = RecordingRef()
    server = PluginServer(directory, ref, ready=lambda: True)
    server.start()
    try:
        with Client(server.socket_path) as client:
            yield ref, client
    finally:
        server.stop(grace_s=0.1)
        shutil.rmtree(directory, ignore_errors=True)


def test_the_table_serves_the_eight_methods_in_proto_order() -> None:
    assert [rpc.name for rpc in RESOURCE_PLUGIN_RPCS] == [
        "GetTopologyHints",
        "RemovePod",
        "GetResourcesAllocation",
        "GetTopologyAwareResources",
        "GetTopologyAwareAllocatableResources",
        "GetResourcePluginOptions",
        "Allocate",
        "PreStartContainer",
    ]


def test_the_remaining_deadline_less_a_margin_is_the_ask_timeout(
    served: tuple[RecordingRef, Client],
) -> None:
    ref, client = served
    client.plugin.GetResourcePluginOptions(pb.Empty(), timeout=2.0)
    (message, timeout) = ref.asks[-1]
    assert message == GetResourcePluginOptions()
    # the server sees the deadline kubelet set, to within the header's rounding
    assert timeout is not None and 1.0 < timeout <= 2.0


@pytest.mark.parametrize(
    ("call", "request_", "default_s"),
    [
        pytest.param("GetResourcePluginOptions", pb.Empty(), 10.0, id="options: 10 s"),
        pytest.param(
            "PreStartContainer",
            pb.PreStartContainerRequest(pod_uid="u", container_name="c"),
            30.0,
            id="pre-start: 30 s",
        ),
    ],
)
def test_without_a_deadline_the_rpc_default_applies(
    served: tuple[RecordingRef, Client], call: str, request_: Any, default_s: float
) -> None:
    ref, client = served
    getattr(client.plugin, call)(request_)  # no deadline, as kubelet calls options
    assert ref.asks[-1][1] == default_s


def test_a_longer_deadline_is_capped_by_the_default(served: tuple[RecordingRef, Client]) -> None:
    ref, client = served
    client.plugin.PreStartContainer(pb.PreStartContainerRequest(pod_uid="u"), timeout=600)
    assert ref.asks[-1] == (PreStartContainer("u", "", "", ""), 30.0)


def test_an_ask_that_times_out_is_unavailable(served: tuple[RecordingRef, Client]) -> None:
    ref, client = served
    ref.time_out = True
    with pytest.raises(grpc.RpcError) as caught:
        client.plugin.GetResourcePluginOptions(pb.Empty(), timeout=5)
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]
    assert "no answer from the allocator in time" in caught.value.details()  # type: ignore[attr-defined]


class Context:
    """The one thing ask_timeout reads of a ServicerContext."""

    def __init__(self, remaining: float | None) -> None:
        self.remaining = remaining

    def time_remaining(self) -> float | None:
        return self.remaining


@pytest.mark.parametrize(
    ("remaining", "want"),
    [
        pytest.param(None, 10.0, id="no deadline: the default"),
        pytest.param(1e9, 10.0, id="grpcio's far deadline: the default"),
        pytest.param(10.0, 9.95, id="kubelet's 10 s: answer 50 ms before it"),
        pytest.param(2.0, 1.95, id="a shorter deadline"),
        pytest.param(0.01, 0.0, id="already too late: no wait"),
    ],
)
def test_ask_timeout(remaining: float | None, want: float) -> None:
    got = ask_timeout(Context(remaining), 10.0)  # type: ignore[arg-type]
    assert got == pytest.approx(want)


class BrokenObserver:
    def observe(self, rpc: str, seconds: float, code: str) -> None:
        raise RuntimeError("metrics registry gone")


def test_a_failing_observer_does_not_fail_the_call() -> None:
    directory = short_dir()
    ref = RecordingRef()
    server = PluginServer(directory, ref, ready=lambda: True, observer=BrokenObserver())
    server.start()
    try:
        with Client(server.socket_path) as client:
            assert client.plugin.GetResourcePluginOptions(pb.Empty(), timeout=5).need_reconcile
    finally:
        server.stop(grace_s=0.1)
        shutil.rmtree(directory, ignore_errors=True)


def test_ask_allocator_sends_the_call_with_the_timeout_and_returns_the_reply() -> None:
    ref = RecordingRef()
    options: PluginOptions = ask_allocator(ref, GetResourcePluginOptions(), 2.5)
    assert options == PluginOptions()
    assert ref.asks == [(GetResourcePluginOptions(), 2.5)]


def test_every_row_converts_its_request_into_a_call_of_the_one_request_type() -> None:
    # The wire builds the policy's own call types (policy.cpu.commands), which the Allocator
    # and the façade take as they are: no parallel command classes.
    for rpc in RESOURCE_PLUGIN_RPCS:
        call = rpc.command(rpc.request_type())
        assert isinstance(call, PluginCall), rpc.name
        assert type(call).__module__ == "policy.cpu.commands", rpc.name
