"""One plugin socket through the registration machine (wire.md §8.1, §8.3; machines.registration).

The plugin here serves only ``Registration``; the eviction plugin's own tests cover a plugin
service next to it.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from machines.lifecycle import InvalidTransition, Step
from wire import plugin_socket
from wire.gen import pluginregistration_pb2 as reg
from wire.gen import pluginregistration_pb2_grpc as reg_grpc
from wire.plugin_socket import PluginIdentity, PluginSocket

IDENTITY = PluginIdentity(type="EvictionPlugin", name="probe")


class Recorder:
    """The observer: every step, and an event per trigger seen."""

    def __init__(self) -> None:
        self.steps: list[Step] = []
        self._seen: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    def __call__(self, step: Step) -> None:
        with self._lock:
            self.steps.append(step)
            self._event(step.trigger).set()

    def _event(self, trigger: str) -> threading.Event:
        return self._seen.setdefault(trigger, threading.Event())

    def wait_for(self, trigger: str) -> bool:
        with self._lock:
            event = self._event(trigger)
        return event.wait(timeout=10)

    @property
    def triggers(self) -> list[str]:
        with self._lock:
            return [s.trigger for s in self.steps]


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="qrmd-ps-", dir="/tmp"))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def make(socket_dir: Path) -> Iterator[Callable[..., tuple[PluginSocket, Recorder]]]:
    made: list[PluginSocket] = []

    def build(ready: bool = True) -> tuple[PluginSocket, Recorder]:
        recorder = Recorder()
        sock = PluginSocket(
            socket_dir / "probe.sock",
            IDENTITY,
            (),
            actors_ready=lambda: ready,
            on_step=recorder,
        )
        made.append(sock)
        return sock, recorder

    yield build
    for sock in made:
        sock.stop()


def notify(path: Path, registered: bool, error: str = "") -> None:
    with grpc.insecure_channel(f"unix:{path}") as channel:
        reg_grpc.RegistrationStub(channel).NotifyRegistrationStatus(
            reg.RegistrationStatus(plugin_registered=registered, error=error), timeout=5
        )


def get_info(path: Path) -> reg.PluginInfo:
    with grpc.insecure_channel(f"unix:{path}") as channel:
        return reg_grpc.RegistrationStub(channel).GetInfo(
            reg.InfoRequest(), timeout=1, wait_for_ready=True
        )


def test_get_info_answers_the_identity(make: Callable[..., tuple[PluginSocket, Recorder]]) -> None:
    sock, recorder = make()
    sock.serve()
    assert get_info(sock.path) == reg.PluginInfo(
        type="EvictionPlugin", name="probe", endpoint="", supported_versions=["v1alpha1"]
    )
    assert (sock.state, recorder.triggers) == ("serving", ["serve"])
    assert recorder.steps[0].actions == ("create_socket",)


def test_serve_twice_is_illegal_and_changes_nothing(
    make: Callable[..., tuple[PluginSocket, Recorder]],
) -> None:
    sock, recorder = make()
    sock.serve()
    with pytest.raises(InvalidTransition):
        sock.serve()
    assert (sock.state, recorder.triggers) == ("serving", ["serve"])
    assert get_info(sock.path).name == "probe"


def test_not_ready_creates_no_socket(make: Callable[..., tuple[PluginSocket, Recorder]]) -> None:
    sock, recorder = make(ready=False)
    with pytest.raises(RuntimeError, match="actors behind plugin 'probe' are not ready"):
        sock.serve()
    assert not sock.path.exists()
    assert (sock.state, recorder.triggers) == ("not_serving", [])


def test_a_failed_recreation_is_retried_until_it_succeeds(
    make: Callable[..., tuple[PluginSocket, Recorder]], monkeypatch: pytest.MonkeyPatch
) -> None:
    sock, recorder = make()
    sock.serve()
    real_bind = plugin_socket.bind_owner_only
    failures = iter([OSError("disk gone"), OSError("still gone")])

    def flaky_bind(server: grpc.Server, path: Path) -> object:
        failure = next(failures, None)
        if failure is not None:
            raise failure
        return real_bind(server, path)

    monkeypatch.setattr(plugin_socket, "bind_owner_only", flaky_bind)
    monkeypatch.setattr(plugin_socket, "RETRY_PERIOD_S", 0.01)

    notify(sock.path, registered=False, error="name taken")

    assert recorder.wait_for("socket_recreated")
    assert recorder.triggers == ["serve", "registration_rejected", "socket_recreated"]
    assert next(failures, None) is None  # both failures were met before it succeeded
    assert get_info(sock.path).name == "probe"


def test_stop_ends_the_retries_and_leaves_no_socket(
    make: Callable[..., tuple[PluginSocket, Recorder]], monkeypatch: pytest.MonkeyPatch
) -> None:
    sock, recorder = make()
    sock.serve()
    attempted = threading.Event()

    def failing_bind(server: grpc.Server, path: Path) -> object:
        attempted.set()
        raise OSError("disk gone")

    monkeypatch.setattr(plugin_socket, "bind_owner_only", failing_bind)
    notify(sock.path, registered=False)
    assert attempted.wait(timeout=10)

    sock.stop()  # returns without waiting out the 5 s retry period

    assert sock.state == "deregistered"
    assert recorder.triggers == ["serve", "registration_rejected", "stop"]
    assert not sock.path.exists()


def test_a_status_after_stop_is_ignored(
    make: Callable[..., tuple[PluginSocket, Recorder]],
) -> None:
    sock, recorder = make()
    sock.serve()
    sock.stop()
    sock.notify(True, "")
    sock.notify(False, "late")
    assert (sock.state, recorder.triggers) == ("deregistered", ["serve", "stop"])


def test_a_status_while_recreating_is_ignored(
    make: Callable[..., tuple[PluginSocket, Recorder]], monkeypatch: pytest.MonkeyPatch
) -> None:
    sock, recorder = make()
    sock.serve()
    attempted = threading.Event()

    def failing_bind(server: grpc.Server, path: Path) -> object:
        attempted.set()
        raise OSError("disk gone")

    monkeypatch.setattr(plugin_socket, "bind_owner_only", failing_bind)
    notify(sock.path, registered=False)
    assert attempted.wait(timeout=10)

    # A status for the old socket, arriving while the new one is being made (between retries).
    sock.notify(True, "")
    sock.notify(False, "again")

    assert sock.state == "recreating_socket"
    assert recorder.triggers == ["serve", "registration_rejected"]
