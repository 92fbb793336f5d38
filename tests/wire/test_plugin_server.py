"""The plugin socket and its registration (wire.md §1.2, §2, §3, §8.1; machines.registration).

Real gRPC on real unix sockets in short directories under /tmp, the real Allocator actor.
"""

from __future__ import annotations

import os
import shutil
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from machines import registration
from machines.lifecycle import InvalidTransition
from tests.wire.plugin_node import Client, WireNode, resource_request, short_dir
from wire import plugin_socket
from wire.errors import NotReady
from wire.gen import pluginregistration_pb2 as reg
from wire.gen import resourceplugin_pb2 as pb
from wire.plugin_server import (
    MAX_SOCKET_PATH_BYTES,
    PluginServer,
    SocketPathError,
    distinct_socket_dirs,
    plugin_socket_path,
)
from wire.plugin_socket import PluginIdentity


@pytest.fixture
def directory() -> Iterator[str]:
    path = short_dir()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


class Unused:
    """An allocator ref for tests that never reach the Allocator."""

    def ask(self, message: object, *, block: bool = True, timeout: float | None = None) -> object:
        raise AssertionError(f"unexpected ask {message!r}")


def test_socket_is_named_after_the_plugin_and_owner_only(node: WireNode) -> None:
    server = node.servers[0]
    assert server.socket_path == os.path.join(node.dirs[0], "qrm_cpu_plugin_dynamic.sock")
    mode = os.stat(server.socket_path).st_mode
    assert stat.S_ISSOCK(mode)
    assert stat.S_IMODE(mode) == 0o600
    assert server.state == registration.SERVING


def test_registration_handshake_as_kubelet_does_it(node: WireNode) -> None:
    # wire.md §8.1 steps 3-5: GetInfo (1 s), GetResourcePluginOptions (no deadline), notify
    server = node.servers[0]
    info = node.client.get_info()
    assert info == reg.PluginInfo(
        type="ResourcePlugin", name="cpu", endpoint="", supported_versions=["v1alpha1"]
    )
    endpoint = info.endpoint or server.socket_path
    with Client(endpoint) as kubelet:
        options = kubelet.plugin.GetResourcePluginOptions(pb.Empty())
        assert (options.with_topology_alignment, options.need_reconcile) == (True, True)
        status = reg.RegistrationStatus(plugin_registered=True)
        assert (
            kubelet.registration.NotifyRegistrationStatus(status, timeout=5)
            == reg.RegistrationStatusResponse()
        )
    assert server.wait_for_state(registration.REGISTERED, timeout_s=5)
    # a kubelet restart re-registers: still registered
    node.client.registration.NotifyRegistrationStatus(status, timeout=5)
    assert server.wait_for_state(registration.REGISTERED, timeout_s=5)


def test_rejected_registration_recreates_the_socket(node: WireNode) -> None:
    server = node.servers[0]
    before = os.stat(server.socket_path)
    status = reg.RegistrationStatus(plugin_registered=False, error="GetResourcePluginOptions: EOF")
    assert (
        node.client.registration.NotifyRegistrationStatus(status, timeout=5)
        == reg.RegistrationStatusResponse()
    )
    assert server.wait_for_state(registration.SERVING, timeout_s=10)
    after = os.stat(server.socket_path)
    # a new file: kubelet's plugin watcher sees a new creation and registers again
    assert (after.st_ino, after.st_ctime_ns) != (before.st_ino, before.st_ctime_ns)
    assert after.st_ctime_ns > before.st_ctime_ns
    assert stat.S_IMODE(after.st_mode) == 0o600
    with Client(server.socket_path) as kubelet:
        assert kubelet.get_info().name == "cpu"
        response = kubelet.plugin.Allocate(resource_request("pod-a"), timeout=10)
        assert response.allocation_result.resource_allocation["cpu"].allocation_result == "1,3-15"


def test_stop_removes_the_socket_and_is_final(node: WireNode) -> None:
    server = node.servers[0]
    server.stop(grace_s=0.5)
    assert server.state == registration.DEREGISTERED
    assert not os.path.exists(server.socket_path)
    server.stop()  # a second stop does nothing
    with pytest.raises(InvalidTransition):
        server.start()


def test_stale_socket_file_is_replaced_at_start(directory: str) -> None:
    path = plugin_socket_path(directory)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(path)  # a previous run's socket, nobody listening
    stale.close()
    assert os.path.exists(path)
    server = PluginServer(directory, Unused(), ready=lambda: True)
    server.start()
    try:
        with Client(path) as kubelet:
            assert kubelet.get_info().type == "ResourcePlugin"
    finally:
        server.stop()
    assert not os.path.exists(path)


def test_stale_regular_file_is_replaced_too(directory: str) -> None:
    path = plugin_socket_path(directory)
    with open(path, "w") as leftover:
        leftover.write("not a socket")
    server = PluginServer(directory, Unused(), ready=lambda: True)
    server.start()
    try:
        assert stat.S_ISSOCK(os.stat(path).st_mode)
    finally:
        server.stop()


def test_a_directory_in_the_way_is_a_clear_error(directory: str) -> None:
    os.mkdir(plugin_socket_path(directory))
    server = PluginServer(directory, Unused(), ready=lambda: True)
    with pytest.raises(SocketPathError, match="a directory is in the way"):
        server.start()
    assert server.state == registration.NOT_SERVING


def test_socket_path_too_long_is_a_clear_error_before_binding(directory: str) -> None:
    deep = os.path.join(directory, "d" * (MAX_SOCKET_PATH_BYTES - len(directory)))
    server = PluginServer(deep, Unused(), ready=lambda: True)
    with pytest.raises(SocketPathError) as caught:
        server.start()
    message = str(caught.value)
    assert server.socket_path in message and "107" in message
    assert not os.path.exists(deep)  # nothing created, nothing bound
    assert server.state == registration.NOT_SERVING


def test_path_of_exactly_107_bytes_is_accepted(directory: str) -> None:
    name_len = len("/qrm_cpu_plugin_dynamic.sock")
    deep = os.path.join(directory, "d" * (MAX_SOCKET_PATH_BYTES - len(directory) - 1 - name_len))
    server = PluginServer(deep, Unused(), ready=lambda: True)
    assert len(server.socket_path) == MAX_SOCKET_PATH_BYTES
    server.start()
    try:
        with Client(server.socket_path) as kubelet:
            assert kubelet.get_info().name == "cpu"
        assert stat.S_IMODE(os.stat(deep).st_mode) == 0o755  # created as the reference does
    finally:
        server.stop()


def test_not_ready_creates_no_socket(directory: str) -> None:
    server = PluginServer(directory, Unused(), ready=lambda: False)
    with pytest.raises(NotReady):
        server.start()
    assert server.state == registration.NOT_SERVING
    assert not os.path.exists(server.socket_path)


def test_two_socket_dirs_serve_the_same_allocator() -> None:
    node = WireNode(socket_dirs=2).start()
    try:
        first, second = node.clients
        assert first.get_info() == second.get_info()
        response = first.plugin.Allocate(resource_request("pod-a"), timeout=10)
        assert response.allocation_result.resource_allocation["cpu"].allocation_result == "1,3-15"
        listing = second.plugin.GetResourcesAllocation(
            pb.GetResourcesAllocationRequest(), timeout=10
        )
        assert list(listing.pod_resources) == ["pod-a"]
        node.servers[0].stop()
        assert not os.path.exists(node.servers[0].socket_path)
        assert second.get_info().name == "cpu"  # the other socket keeps serving
    finally:
        node.close()


def test_distinct_socket_dirs_drops_the_same_directory(directory: str) -> None:
    alias = directory + "-alias"
    os.symlink(directory, alias)
    missing = os.path.join(directory, "new")
    try:
        dirs = distinct_socket_dirs([directory, alias, directory + "/.", missing])
    finally:
        os.unlink(alias)
    assert dirs == [directory, missing]
    assert stat.S_IMODE(os.stat(missing).st_mode) == 0o755


def test_every_call_is_observed_with_its_code(node: WireNode) -> None:
    node.client.plugin.Allocate(resource_request("pod-a"), timeout=10)
    with pytest.raises(grpc.RpcError):
        node.client.plugin.Allocate(resource_request("pod-b", cpu=-1), timeout=10)
    assert node.observer.codes("Allocate") == ["OK", "INVALID_ARGUMENT"]
    assert all(seconds >= 0 for _, seconds, _ in node.observer.calls)
    assert "GetInfo" in {rpc for rpc, _, _ in node.observer.calls}  # the server's own dial


def test_recreate_socket_serves_a_new_file(node: WireNode) -> None:
    server = node.servers[0]
    before = os.stat(server.socket_path)
    server.recreate_socket()
    assert server.state == registration.SERVING
    assert os.stat(server.socket_path).st_ctime_ns > before.st_ctime_ns
    with Client(server.socket_path) as kubelet:
        assert kubelet.get_info().name == "cpu"


def test_a_failed_recreation_is_retried_until_it_serves(
    node: WireNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_confirm = plugin_socket._verify_serving
    failures = []

    def flaky_confirm(path: Path, identity: PluginIdentity) -> None:
        if not failures:
            failures.append(str(path))
            raise RuntimeError(f"the server on {path} does not answer GetInfo: test")
        real_confirm(path, identity)

    monkeypatch.setattr(plugin_socket, "RETRY_PERIOD_S", 0.05)
    monkeypatch.setattr(plugin_socket, "_verify_serving", flaky_confirm)
    server = node.servers[0]
    server.recreate_socket()
    assert server.state == registration.RECREATING_SOCKET
    assert not os.path.exists(server.socket_path)  # the failed attempt left nothing behind
    assert server.wait_for_state(registration.SERVING, timeout_s=5)
    assert failures == [server.socket_path]
    with Client(server.socket_path) as kubelet:
        assert kubelet.get_info().name == "cpu"


def test_stop_cancels_a_pending_retry(node: WireNode, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing_confirm(path: Path, identity: PluginIdentity) -> None:
        raise RuntimeError("never serves")

    monkeypatch.setattr(plugin_socket, "RETRY_PERIOD_S", 0.05)
    monkeypatch.setattr(plugin_socket, "_verify_serving", failing_confirm)
    server = node.servers[0]
    server.recreate_socket()
    server.stop()
    assert server.state == registration.DEREGISTERED
    assert not server.wait_for_state(registration.SERVING, timeout_s=0.3)
    assert not os.path.exists(server.socket_path)
