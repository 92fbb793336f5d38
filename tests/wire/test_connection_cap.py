"""A plugin socket accepts at most ``max_connections`` connections at once (the connection cap).

The cap is gRPC core's ``grpc.max_allowed_incoming_connections``: one connection past it is
closed right after ``accept`` without a byte, so the peer's call fails UNAVAILABLE. A
connection holds its place from ``accept`` (the server then sends its HTTP/2 SETTINGS at once),
even one that never speaks; one that closes frees its place once the server has seen it close,
which happens asynchronously, so a connection made just after another closed may still be
refused. ``serve``'s own check dial (``_verify_serving``) is such a connection: right after
``serve`` one place may still be taken by it. Each channel here has its own subchannel
(``grpc.use_local_subchannel_pool``) so that each is one connection, as separate processes
would be.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from tests.wire.test_plugin_socket import IDENTITY, socket_dir
from wire.gen import pluginregistration_pb2 as reg
from wire.gen import pluginregistration_pb2_grpc as reg_grpc
from wire.plugin_socket import PluginSocket

__all__ = ["socket_dir"]

CAP = 3


@pytest.fixture
def capped(socket_dir: Path) -> Iterator[PluginSocket]:
    sock = PluginSocket(
        socket_dir / "probe.sock",
        IDENTITY,
        (),
        actors_ready=lambda: True,
        watch_period_s=None,
        max_connections=CAP,
    )
    sock.serve()
    try:
        yield sock
    finally:
        sock.stop()


def connection(path: Path, n: int) -> grpc.Channel:
    return grpc.insecure_channel(
        f"unix:{path}", options=[("grpc.use_local_subchannel_pool", 1), ("qrmd.test.n", n)]
    )


def answers(channel: grpc.Channel) -> bool:
    try:
        reg_grpc.RegistrationStub(channel).GetInfo(reg.InfoRequest(), timeout=2)  # type: ignore[no-untyped-call]
    except grpc.RpcError as err:
        assert err.code() == grpc.StatusCode.UNAVAILABLE, err
        return False
    return True


def answers_soon(channel: grpc.Channel) -> bool:
    """Whether ``channel`` is served within 10 s: its first connection may be refused while
    ``serve``'s own check connection still holds a place, and the channel reconnects."""
    deadline = time.monotonic() + 10
    while not answers(channel):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def served_again(path: Path, first_attempt: int) -> bool:
    """Whether a new connection is served within 20 s.

    A closed connection frees its place once the server has seen it close, which it does
    asynchronously; each attempt is a connection of its own.
    """
    deadline = time.monotonic() + 20
    attempt = first_attempt
    while time.monotonic() < deadline:
        fresh = connection(path, attempt)
        attempt += 1
        try:
            if answers(fresh):
                return True
        finally:
            fresh.close()
    return False


def test_connections_past_the_cap_are_refused_and_a_closed_one_frees_its_place(
    capped: PluginSocket,
) -> None:
    held = [connection(capped.path, n) for n in range(CAP)]
    try:
        assert [answers_soon(c) for c in held] == [True] * CAP
        extra = connection(capped.path, CAP)
        assert not answers(extra)
        extra.close()
        held.pop().close()
        assert served_again(capped.path, first_attempt=CAP + 1)
        assert all(answers(c) for c in held)  # the held ones were never disturbed
    finally:
        for c in held:
            c.close()


def held_raw(path: Path) -> socket.socket | None:
    """A connection that never speaks, once the server has accepted (and counted) it.

    The server writes its HTTP/2 SETTINGS right after accepting a connection it keeps, and
    closes one past the cap without a byte, so the first read tells which it did: the socket if
    kept, ``None`` if refused.
    """
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(path))
    s.settimeout(5)
    try:
        first = s.recv(1, socket.MSG_PEEK)
    except TimeoutError:
        first = b""
    if not first:
        s.close()
        return None
    return s


def still_open(s: socket.socket) -> bool:
    """Whether the server has not closed ``s``: what it sent is read away, then EOF or not."""
    s.setblocking(False)
    try:
        while s.recv(4096):
            pass
    except BlockingIOError:
        return True
    return False


def test_idle_raw_connections_count_against_the_cap(capped: PluginSocket) -> None:
    """A client that connects and never speaks (the fd-exhaustion attack) holds a place.

    ``serve`` dials the socket itself to check it answers (``_verify_serving``); that closed
    connection keeps its place until the server has seen it close, asynchronously, so a raw
    connection made right after ``serve`` may be refused. Those are retried until ``CAP`` raw
    connections are held: then every place is an idle raw one and a late client must be
    refused at once, while the idle ones stay open.
    """
    raw: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 10
        while len(raw) < CAP and time.monotonic() < deadline:
            s = held_raw(capped.path)
            if s is None:
                time.sleep(0.05)  # the cap is still full of a closed connection
            else:
                raw.append(s)
        assert len(raw) == CAP, f"only {len(raw)} of {CAP} idle connections were accepted"
        late = connection(capped.path, 99)
        try:
            assert not answers(late)
        finally:
            late.close()
        assert all(still_open(s) for s in raw)  # the server kept the idle ones
    finally:
        for s in raw:
            s.close()
    assert served_again(capped.path, first_attempt=100)
