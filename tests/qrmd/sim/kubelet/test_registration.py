"""The simulator's plugin watcher against a fake plugin on a real socket (wire.md §8.1, §9.6)."""

from __future__ import annotations

import functools
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from qrmd.sim.kubelet import Kubelet, PluginConnection, PluginWatcher, TopologyPolicy
from tests.qrmd.sim.kubelet.fake_qrm_plugin import (
    FakeQRMPlugin,
    ServedPlugin,
    has_deadline,
    short_socket_dir,
)
from wire.gen import pluginregistration_pb2 as reg_pb


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    with short_socket_dir() as directory:
        yield directory


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def serve(socket_dir: Path, **knobs: object) -> ServedPlugin:
    served = ServedPlugin(FakeQRMPlugin(**knobs), socket_dir)  # type: ignore[arg-type]
    served.start()
    return served


def watcher_for(socket_dir: Path, clock: FakeClock) -> tuple[PluginWatcher, Kubelet]:
    kubelet = Kubelet([0, 1, 2, 3], topology_policy=TopologyPolicy.BEST_EFFORT)
    return PluginWatcher(socket_dir, {"ResourcePlugin": kubelet.endpoints}, clock=clock), kubelet


def test_handshake_calls_in_kubelet_order_with_kubelet_deadlines(
    socket_dir: Path, clock: FakeClock
) -> None:
    served = serve(socket_dir)
    try:
        watcher, kubelet = watcher_for(socket_dir, clock)
        (outcome,) = watcher.poll_once()
        plugin = served.plugin
        assert outcome.registered and outcome.name == "cpu"
        assert plugin.methods() == [
            "GetInfo",
            "GetResourcePluginOptions",
            "NotifyRegistrationStatus",
        ]
        (info,) = plugin.calls_of("GetInfo")
        (options,) = plugin.calls_of("GetResourcePluginOptions")
        (notify,) = plugin.calls_of("NotifyRegistrationStatus")
        assert has_deadline(info, 1.0)
        assert options.time_remaining is None  # no deadline (wire.md §8.1 step 4)
        assert has_deadline(notify, 5.0)
        assert notify.request == reg_pb.RegistrationStatus(plugin_registered=True)
        endpoint = kubelet.endpoints.get("cpu")
        assert endpoint is not None and not endpoint.stopped
        assert endpoint.socket_path == str(served.socket_path)
        assert endpoint.options.with_topology_alignment and endpoint.options.need_reconcile
        assert watcher.poll_once() == []  # registered sockets are not dialed again
        assert len(plugin.calls_of("GetInfo")) == 1
    finally:
        served.stop()


@pytest.mark.parametrize(
    ("info", "error_part"),
    [
        pytest.param(
            reg_pb.PluginInfo(type="DevicePlugin", name="cpu", supported_versions=["v1alpha1"]),
            "no handler registered for plugin type: 'DevicePlugin'",
            id="a plugin type the kubelet has no handler for is refused",
        ),
        pytest.param(
            reg_pb.PluginInfo(type="ResourcePlugin", name="cpu", supported_versions=["v1beta1"]),
            "do not include v1alpha1",
            id="a plugin without version v1alpha1 is refused",
        ),
    ],
)
def test_validation_failure_is_notified_and_retried_with_backoff(
    socket_dir: Path, clock: FakeClock, info: reg_pb.PluginInfo, error_part: str
) -> None:
    served = serve(socket_dir, info=info)
    try:
        watcher, kubelet = watcher_for(socket_dir, clock)
        (outcome,) = watcher.poll_once()
        assert not outcome.registered and error_part in outcome.error
        (notify,) = served.plugin.calls_of("NotifyRegistrationStatus")
        assert notify.request.plugin_registered is False  # type: ignore[attr-defined]
        assert error_part in notify.request.error  # type: ignore[attr-defined]
        assert served.plugin.calls_of("GetResourcePluginOptions") == []
        assert kubelet.endpoints.get("cpu") is None
        assert watcher.poll_once() == []  # backing off: 0.5 s first
        clock.advance(0.5)
        assert len(watcher.poll_once()) == 1
        clock.advance(0.5)
        assert watcher.poll_once() == []  # then 1 s
        clock.advance(0.5)
        assert len(watcher.poll_once()) == 1
    finally:
        served.stop()


def test_options_failure_waits_for_the_socket_to_be_recreated(
    socket_dir: Path, clock: FakeClock
) -> None:
    served = serve(socket_dir, options_error=True)
    try:
        watcher, kubelet = watcher_for(socket_dir, clock)
        (outcome,) = watcher.poll_once()
        assert not outcome.registered and "UNAVAILABLE" in outcome.error
        (notify,) = served.plugin.calls_of("NotifyRegistrationStatus")
        assert notify.request.plugin_registered is False  # type: ignore[attr-defined]
        clock.advance(600)
        assert watcher.poll_once() == []  # recorded as registered: no retry (wire.md §8.1)
        served.plugin.options_error = False
        served.restart()  # the plugin re-creates its socket
        (outcome,) = watcher.poll_once()
        assert outcome.registered
        assert kubelet.endpoints.get("cpu") is not None
    finally:
        served.stop()


def test_recreated_socket_registers_again_and_replaces_the_endpoint(
    socket_dir: Path, clock: FakeClock
) -> None:
    served = serve(socket_dir)
    try:
        watcher, kubelet = watcher_for(socket_dir, clock)
        watcher.poll_once()
        first = kubelet.endpoints.get("cpu")
        assert first is not None and first.generation == 1
        served.restart()
        (outcome,) = watcher.poll_once()
        second = kubelet.endpoints.get("cpu")
        assert outcome.registered and second is not None and second.generation == 2
        assert first.stopped and not second.stopped
        assert served.plugin.methods().count("GetInfo") == 2
    finally:
        served.stop()


def test_deleted_socket_stops_the_endpoint(socket_dir: Path, clock: FakeClock) -> None:
    served = serve(socket_dir)
    try:
        watcher, kubelet = watcher_for(socket_dir, clock)
        watcher.poll_once()
        served.stop()
        served.socket_path.unlink(missing_ok=True)  # grpcio removes it on stop already
        assert watcher.poll_once() == []
        endpoint = kubelet.endpoints.get("cpu")
        assert endpoint is not None and endpoint.stopped
    finally:
        served.stop()


def test_hidden_names_and_non_sockets_are_ignored(socket_dir: Path, clock: FakeClock) -> None:
    (socket_dir / "notes.txt").write_text("not a socket")
    hidden = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    hidden.bind(str(socket_dir / ".hidden.sock"))
    try:
        watcher, kubelet = watcher_for(socket_dir, clock)
        assert watcher.poll_once() == []
        assert kubelet.endpoints.get("cpu") is None
    finally:
        hidden.close()


def test_a_socket_nobody_serves_is_a_failed_dial_retried_later(
    socket_dir: Path, clock: FakeClock
) -> None:
    dead = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    dead.bind(str(socket_dir / "dead.sock"))  # bound, never listening: connect is refused
    try:
        watcher = PluginWatcher(
            socket_dir,
            {"ResourcePlugin": Kubelet([0])},
            clock=clock,
            dial=functools.partial(PluginConnection, dial_timeout_s=0.2),
        )
        (outcome,) = watcher.poll_once()
        assert not outcome.registered and "dial" in outcome.error
        assert watcher.poll_once() == []
    finally:
        dead.close()
