"""The clients' blocking dial (``wire.sockets.dial``): a plain connect to the unix socket,
retried until the deadline, with the clock and the pause injected so nothing here waits.

* A listening socket is dialled at once, with no pause.
* No file, a file nobody listens on (what a killed server leaves), and a regular file are
  tried until the deadline and answer False; the pauses double from 20 ms to at most 200 ms
  and the last one ends at the deadline.
* A server that starts listening while the dial waits is found at the next attempt.
* The advisor client and the simulated kubelet's connection fail their dial with their own
  errors, and reach a live server: end to end over real gRPC the advisor's dial leaves no
  connectivity-polling thread behind to die on the closed channel.
"""

from __future__ import annotations

import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from actors.ports.advisor import AdvisorSick
from wire.advisor_client import GrpcAdvisorClient
from wire.kubelet_client import PluginCallError, PluginConnection
from wire.sockets import dial


@pytest.fixture
def short_dir() -> Iterator[Path]:
    # Unix socket paths are short (107 bytes): pytest's tmp_path can be too long.
    path = Path(tempfile.mkdtemp(prefix="qrmd-dial-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


class FakeTime:
    """A monotonic clock that only moves when ``sleep`` is called; records the pauses."""

    def __init__(self) -> None:
        self.now = 100.0
        self.pauses: list[float] = []
        self.on_sleep: list[object] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.pauses.append(round(seconds, 6))
        self.now += seconds
        for action in self.on_sleep:
            assert callable(action)
            action()


def listen(path: Path) -> socket.socket:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(4)
    return listener


def dead_socket_file(path: Path) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.close()  # the file stays, nobody listens: connect is refused


def test_a_listening_socket_is_dialled_at_once(short_dir: Path) -> None:
    path = short_dir / "s.sock"
    clock = FakeTime()
    with listen(path):
        assert dial(str(path), 1.0, monotonic=clock.monotonic, sleep=clock.sleep)
    assert clock.pauses == []


@pytest.mark.parametrize(
    "make_path",
    [
        pytest.param(lambda path: None, id="no file at the path is tried until the deadline"),
        pytest.param(dead_socket_file, id="a socket file nobody listens on is not a server"),
        pytest.param(lambda path: path.write_text("x"), id="a regular file is not a server"),
    ],
)
def test_nothing_to_dial_answers_false_at_the_deadline(short_dir: Path, make_path: object) -> None:
    path = short_dir / "s.sock"
    assert callable(make_path)
    make_path(path)
    clock = FakeTime()
    assert not dial(str(path), 1.0, monotonic=clock.monotonic, sleep=clock.sleep)
    assert clock.pauses == [0.02, 0.04, 0.08, 0.16, 0.2, 0.2, 0.2, 0.1]
    assert clock.now == pytest.approx(101.0)


def test_a_zero_timeout_tries_once(short_dir: Path) -> None:
    clock = FakeTime()
    path = short_dir / "s.sock"
    assert not dial(str(path), 0.0, monotonic=clock.monotonic, sleep=clock.sleep)
    assert clock.pauses == []
    with listen(path):
        assert dial(str(path), 0.0, monotonic=clock.monotonic, sleep=clock.sleep)


def test_a_server_that_starts_while_waiting_is_found_at_the_next_attempt(short_dir: Path) -> None:
    path = short_dir / "s.sock"
    clock = FakeTime()
    listeners: list[socket.socket] = []

    def start_on_third_pause() -> None:
        if len(clock.pauses) == 3:
            listeners.append(listen(path))

    clock.on_sleep.append(start_on_third_pause)
    try:
        assert dial(str(path), 10.0, monotonic=clock.monotonic, sleep=clock.sleep)
    finally:
        for listener in listeners:
            listener.close()
    assert clock.pauses == [0.02, 0.04, 0.08]


def test_the_advisor_client_dial_fails_as_sick_naming_the_socket(short_dir: Path) -> None:
    path = short_dir / "advisor.sock"
    client = GrpcAdvisorClient(str(path))
    with pytest.raises(AdvisorSick, match=f"no connection to {path} within 0\\.05 s"):
        client.connect(0.05)


def test_the_simulated_kubelet_dial_fails_with_its_own_error(short_dir: Path) -> None:
    path = short_dir / "plugin.sock"
    with pytest.raises(PluginCallError, match=r"DEADLINE_EXCEEDED.*not ready in 0\.05 s"):
        PluginConnection(str(path), dial_timeout_s=0.05)


def test_the_advisor_dial_leaves_no_polling_thread_to_die_on_close(short_dir: Path) -> None:
    # grpc.channel_ready_future left a connectivity-polling thread running for up to 0.2 s;
    # closing the channel meanwhile killed it with "Channel closed!". The plain dial starts
    # no thread at all, so closing at once is safe.
    path = short_dir / "advisor.sock"
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    server.add_insecure_port(f"unix:{path}")
    server.start()
    try:
        before = {thread.ident for thread in threading.enumerate()}
        client = GrpcAdvisorClient(str(path))
        client.connect(1.0)
        started = [t.name for t in threading.enumerate() if t.ident not in before]
        client.close()
        assert started == []
    finally:
        server.stop(None).wait()
