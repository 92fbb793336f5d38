"""One plugin socket through the registration machine (wire.md §8.1, §8.3; machines.registration).

The plugin here serves only ``Registration``; the eviction plugin's own tests cover a plugin
service next to it.
"""

from __future__ import annotations

import shutil
import stat
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from machines import registration
from machines.lifecycle import InvalidTransition, Step
from wire import plugin_socket
from wire.errors import NotReady
from wire.gen import pluginregistration_pb2 as reg
from wire.gen import pluginregistration_pb2_grpc as reg_grpc
from wire.plugin_socket import PluginIdentity, PluginSocket
from wire.sockets import MAX_SOCKET_PATH_BYTES, ServingError, SocketPathError

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

    def build(ready: bool = True, path: Path | None = None) -> tuple[PluginSocket, Recorder]:
        recorder = Recorder()
        sock = PluginSocket(
            path or socket_dir / "probe.sock",
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
    with pytest.raises(RuntimeError, match="actors behind plugin 'probe' are not ready") as caught:
        sock.serve()
    assert isinstance(caught.value, NotReady)
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


def test_recreate_socket_serves_a_new_file(
    make: Callable[..., tuple[PluginSocket, Recorder]],
) -> None:
    sock, recorder = make()
    sock.serve()
    before = sock.path.lstat()

    sock.recreate_socket()  # the first attempt runs on this thread

    assert (sock.state, recorder.triggers) == (
        "serving",
        ["serve", "serving_failed", "socket_recreated"],
    )
    assert sock.wait_for_state(registration.SERVING, timeout_s=0)
    after = sock.path.lstat()
    assert after.st_ctime_ns > before.st_ctime_ns
    assert stat.S_IMODE(after.st_mode) == 0o600
    assert get_info(sock.path).name == "probe"


@pytest.mark.parametrize(
    "stop_first",
    [
        pytest.param(False, id="before serving, recreate_socket does nothing"),
        pytest.param(True, id="after stop, recreate_socket does nothing"),
    ],
)
def test_recreate_socket_does_nothing_unless_serving(
    make: Callable[..., tuple[PluginSocket, Recorder]], stop_first: bool
) -> None:
    sock, recorder = make()
    if stop_first:
        sock.stop()
    before = (sock.state, recorder.triggers)
    sock.recreate_socket()
    assert (sock.state, recorder.triggers) == before
    assert not sock.path.exists()


def test_wait_for_state_gives_up_after_its_timeout(
    make: Callable[..., tuple[PluginSocket, Recorder]],
) -> None:
    sock, _ = make()
    sock.serve()
    assert not sock.wait_for_state(registration.REGISTERED, timeout_s=0.05)
    notify(sock.path, registered=True)
    assert sock.wait_for_state(registration.REGISTERED, timeout_s=5)


def test_a_path_over_107_bytes_is_refused_at_serve_before_anything_is_made(
    socket_dir: Path, make: Callable[..., tuple[PluginSocket, Recorder]]
) -> None:
    deep = socket_dir / ("d" * MAX_SOCKET_PATH_BYTES)
    sock, recorder = make(path=deep / "probe.sock")  # built: the check is the socket's to make
    with pytest.raises(SocketPathError, match="limited to 107 bytes"):
        sock.serve()
    assert not deep.exists()
    assert (sock.state, recorder.triggers) == ("not_serving", [])


def test_a_server_that_does_not_answer_is_not_served(
    make: Callable[..., tuple[PluginSocket, Recorder]], monkeypatch: pytest.MonkeyPatch
) -> None:
    def silent(path: Path, identity: PluginIdentity) -> None:
        raise ServingError(f"{str(path)!r} does not answer GetInfo: test")

    monkeypatch.setattr(plugin_socket, "_verify_serving", silent)
    sock, recorder = make()
    # The CPU plugin documented RuntimeError, the eviction plugin OSError: both hold.
    with pytest.raises(OSError, match="does not answer GetInfo") as caught:
        sock.serve()
    assert isinstance(caught.value, RuntimeError)
    assert not sock.path.exists()
    assert (sock.state, recorder.triggers) == ("not_serving", [])
    assert _pool_threads() == []


def _pool_threads() -> list[threading.Thread]:
    """The gRPC handler threads of the probe plugin's servers still alive."""
    return [t for t in threading.enumerate() if t.name.startswith("grpc-probe_")]


def test_stop_shuts_the_handler_threads_down(
    make: Callable[..., tuple[PluginSocket, Recorder]],
) -> None:
    sock, _ = make()
    sock.serve()
    notify(sock.path, registered=True)
    assert _pool_threads()  # the self-check and the status were answered on them
    sock.stop()
    for thread in _pool_threads():
        thread.join(timeout=5)
    assert _pool_threads() == []


def test_stop_leaves_a_file_it_did_not_bind(
    make: Callable[..., tuple[PluginSocket, Recorder]],
) -> None:
    sock, _ = make()
    sock.serve()
    sock.path.unlink()
    sock.path.write_text("a newer qrmd's")  # stands for a socket re-created by someone else
    sock.stop()
    assert sock.path.read_text() == "a newer qrmd's"
