"""A plugin socket accepts at most ``max_connections`` connections at once (issue 12, defect 9).

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
        again = connection(capped.path, CAP + 1)
        held.append(again)
        assert answers(again)
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
        late = connection(capped.path, 99)
        assert not answers(late)
        late.close()
    finally:
        for s in raw:
            s.close()
    # Closed, they free their places once the server has seen them close: a new connection
    # is served again (each attempt a connection of its own, bounded in time).
    deadline = time.monotonic() + 20
    served = False
    attempt = 100
    while not served and time.monotonic() < deadline:
        fresh = connection(capped.path, attempt)
        attempt += 1
        try:
            served = answers(fresh)
        finally:
            fresh.close()
    assert served
