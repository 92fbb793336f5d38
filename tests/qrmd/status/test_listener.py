"""The metrics/health endpoint's port, bound before recovery and served later."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from qrmd.status.endpoint import StatusEndpoint
from qrmd.status.health import HealthRegistry
from qrmd.status.listener import listen
from qrmd.status.metrics import DaemonMetrics, MetricSources


@pytest.fixture
def taken() -> Iterator[int]:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        yield holder.getsockname()[1]


@pytest.mark.parametrize(
    ("host", "why"),
    [
        pytest.param("127.0.0.1", "in use", id="a taken port names the flag and the address"),
        pytest.param("no-such-host.invalid", "", id="an unknown host names the flag"),
    ],
)
def test_an_address_it_cannot_bind_fails_at_once(taken: int, host: str, why: str) -> None:
    with pytest.raises(
        OSError, match=rf"cannot listen on --metrics-address {host}:{taken}: .*{why}"
    ):
        listen(host, taken)


def test_a_request_sent_before_the_endpoint_exists_is_answered_once_it_serves() -> None:
    listener = listen("127.0.0.1", 0)
    port = listener.getsockname()[1]
    with socket.create_connection(("127.0.0.1", port), timeout=5) as client:
        client.sendall(b"GET /livez HTTP/1.0\r\n\r\n")
        endpoint = StatusEndpoint(
            "127.0.0.1",
            port,
            DaemonMetrics(MetricSources()),
            HealthRegistry(lambda: 0.0),
            listener=listener,
        )
        assert endpoint.address == ("127.0.0.1", port)
        endpoint.start()
        try:
            answer = b""
            while chunk := client.recv(4096):
                answer += chunk
        finally:
            endpoint.stop()
    assert answer.startswith(b"HTTP/1.0 200 ")
    assert answer.endswith(b"\r\n\r\nok\n")
    assert listener.fileno() == -1, "the endpoint's stop closes the socket it was handed"
