"""A plugin socket accepts at most ``max_connections`` connections at once (the connection cap).

The cap is gRPC core's ``grpc.max_allowed_incoming_connections``: one connection past it is
closed right after ``accept``, so the peer's call fails UNAVAILABLE; a connection that closes
frees its place. Each channel here has its own subchannel (``grpc.use_local_subchannel_pool``)
so that each is one connection, as separate processes would be.
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
        assert [answers(c) for c in held] == [True] * CAP
        extra = connection(capped.path, CAP)
        assert not answers(extra)
        extra.close()
        held.pop().close()
        assert served_again(capped.path, first_attempt=CAP + 1)
        assert all(answers(c) for c in held)  # the held ones were never disturbed
    finally:
        for c in held:
            c.close()


def test_idle_raw_connections_count_against_the_cap(capped: PluginSocket) -> None:
    """A client that connects and never speaks (the fd-exhaustion attack) holds a place."""
    raw = []
    try:
        for _ in range(CAP):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(str(capped.path))
            raw.append(s)
        # The server counts a connection when it accepts it, which on a loaded machine can
        # lag the client's connect: until it has accepted the idle ones, a late client may
        # still get in. Once it has, every late client is refused.
        deadline = time.monotonic() + 10
        while True:
            late = connection(capped.path, 99)
            refused = not answers(late)
            late.close()
            if refused or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert refused
    finally:
        for s in raw:
            s.close()
    assert served_again(capped.path, first_attempt=100)
