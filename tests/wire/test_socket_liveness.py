"""A socket file is stale only if nothing answers on it; a served one watches its file
(wire.md §2; wire.md §2, §8.1).

* A second plugin socket on a path another server answers on is refused, naming the path and
  that another process serves it; the live file is left as it was.
* A socket file nobody answers on (left by a killed process) is removed and served.
* A served socket whose file disappears, or is replaced by one nobody answers on, is
  re-created at the next check (the tick is called directly here), and says so; one replaced
  by a file that answers is left to its new owner.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from machines import registration
from tests.wire.test_plugin_socket import IDENTITY, Recorder, get_info, make, socket_dir
from wire.plugin_socket import PluginSocket
from wire.sockets import ServingError, SocketInUseError

__all__ = ["make", "socket_dir"]  # the fixtures, shared with the plugin socket tests

Make = Callable[..., tuple[PluginSocket, Recorder]]


def inode(path: Path) -> int:
    return path.lstat().st_ino


def dead_socket_file(path: Path) -> None:
    """A socket file whose listener is gone: what a SIGKILLed server leaves."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.close()


def test_a_second_socket_on_a_live_path_is_refused_and_the_first_keeps_its_file(
    make: Make,
) -> None:
    first, _ = make()
    first.serve()
    before = inode(first.path)
    second, recorder = make()
    with pytest.raises(SocketInUseError) as caught:
        second.serve()
    message = str(caught.value)
    assert str(first.path) in message and "another process" in message
    assert isinstance(caught.value, ServingError)  # OSError: `qrmd run` exits 2 with it
    assert (second.state, recorder.triggers) == (registration.NOT_SERVING, [])
    second.stop()
    assert inode(first.path) == before
    assert get_info(first.path).name == "probe"


def test_a_socket_file_nobody_answers_on_is_stale_and_replaced(
    make: Make, socket_dir: Path
) -> None:
    path = socket_dir / "probe.sock"
    dead_socket_file(path)
    sock, _ = make()
    sock.serve()  # would fail with "address in use" had the file not been removed
    assert get_info(path).name == "probe"


def test_a_regular_file_in_the_way_is_stale_and_replaced(make: Make, socket_dir: Path) -> None:
    (socket_dir / "probe.sock").write_bytes(b"left over")
    sock, _ = make()
    sock.serve()
    assert get_info(sock.path).name == "probe"


def test_a_deleted_socket_file_is_recreated_at_the_next_check(
    make: Make, caplog: pytest.LogCaptureFixture
) -> None:
    sock, recorder = make()
    sock.serve()
    assert sock.check_socket() is False  # nothing to do while the file is ours
    os.unlink(sock.path)
    with caplog.at_level(logging.WARNING, logger="wire.plugin_socket"):
        assert sock.check_socket() is True
    # (The new file may get the old inode number back: the file system reuses it.)
    assert sock.path.exists()
    assert get_info(sock.path).name == "probe"
    assert "serving_failed" in recorder.triggers and "socket_recreated" in recorder.triggers
    assert sock.state == registration.SERVING
    assert any(
        "disappeared" in r.getMessage() and str(sock.path) in r.getMessage() for r in caplog.records
    )


def test_a_socket_file_replaced_by_a_dead_one_is_recreated(
    make: Make, caplog: pytest.LogCaptureFixture
) -> None:
    sock, _ = make()
    sock.serve()
    other = sock.path.with_name("other.sock")
    dead_socket_file(other)  # made before the unlink, so it cannot reuse the inode
    os.replace(other, sock.path)
    with caplog.at_level(logging.WARNING, logger="wire.plugin_socket"):
        assert sock.check_socket() is True
    assert get_info(sock.path).name == "probe"
    assert any("replaced" in r.getMessage() for r in caplog.records)


def test_a_socket_file_taken_over_by_a_live_server_is_left_to_it(
    make: Make, caplog: pytest.LogCaptureFixture
) -> None:
    sock, _ = make()
    sock.serve()
    other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        other.bind(str(sock.path.with_name("other.sock")))
        other.listen(8)
        os.replace(sock.path.with_name("other.sock"), sock.path)
        theirs = inode(sock.path)
        with caplog.at_level(logging.ERROR, logger="wire.plugin_socket"):
            assert sock.check_socket() is False
        assert inode(sock.path) == theirs
        assert any("another process" in r.getMessage() for r in caplog.records)
    finally:
        other.close()


def test_the_watch_thread_recreates_a_deleted_file(socket_dir: Path) -> None:
    sock = PluginSocket(
        socket_dir / "probe.sock", IDENTITY, (), actors_ready=lambda: True, watch_period_s=0.05
    )
    try:
        sock.serve()
        os.unlink(sock.path)
        # Waits for the effect (bounded), not for a period: the thread's own tick is the wiring.
        deadline = time.monotonic() + 10
        while not sock.path.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert get_info(sock.path).name == "probe"
    finally:
        sock.stop()
    assert not sock.path.exists()
