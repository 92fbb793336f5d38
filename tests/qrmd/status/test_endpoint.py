"""The status endpoint's probes, ``HEAD``, build info and process metrics."""

from __future__ import annotations

import http.client
from collections.abc import Iterator

import pytest

from qrmd.cli import main
from qrmd.status.endpoint import StatusEndpoint
from qrmd.status.health import HealthRegistry
from qrmd.status.metrics import DaemonMetrics, MetricSources
from qrmd.version import VERSION


class Probes:
    def __init__(self) -> None:
        self.alive: list[str] = []
        self.ready: list[str] = ["not serving kubelet yet"]
        self.health = HealthRegistry(lambda: 0.0)
        self.health.add_source(lambda: list(self.unhealthy))
        self.unhealthy: list[str] = []


@pytest.fixture
def served() -> Iterator[tuple[StatusEndpoint, Probes]]:
    probes = Probes()
    metrics = DaemonMetrics(MetricSources())
    endpoint = StatusEndpoint(
        "127.0.0.1",
        0,
        metrics,
        probes.health,
        liveness=lambda: probes.alive,
        readiness=lambda: probes.ready,
    )
    endpoint.start()
    try:
        yield endpoint, probes
    finally:
        endpoint.stop()


def ask(endpoint: StatusEndpoint, method: str, path: str) -> tuple[int, bytes, str]:
    host, port = endpoint.address
    conn = http.client.HTTPConnection(host, port, timeout=5)
    try:
        conn.request(method, path)
        answer = conn.getresponse()
        return answer.status, answer.read(), answer.getheader("Content-Length") or ""
    finally:
        conn.close()


def test_readyz_follows_registration_and_livez_only_the_process(
    served: tuple[StatusEndpoint, Probes],
) -> None:
    endpoint, probes = served
    assert ask(endpoint, "GET", "/livez")[:2] == (200, b"ok\n")
    assert ask(endpoint, "GET", "/readyz")[:2] == (503, b"not serving kubelet yet\n")
    probes.ready = []
    probes.unhealthy = ["handler checkCPUSet failed"]
    assert ask(endpoint, "GET", "/readyz")[:2] == (200, b"ok\n")
    # An unhealthy handler fails /healthz (alerting), never /livez (restarts).
    assert ask(endpoint, "GET", "/healthz")[:2] == (503, b"handler checkCPUSet failed\n")
    assert ask(endpoint, "GET", "/livez")[0] == 200
    probes.alive = ["actor allocator is down"]
    assert ask(endpoint, "GET", "/livez")[:2] == (503, b"actor allocator is down\n")


@pytest.mark.parametrize(
    "path",
    [
        pytest.param("/metrics", id="head on metrics has no body"),
        pytest.param("/healthz", id="head on healthz has no body"),
        pytest.param("/livez", id="head on livez has no body"),
        pytest.param("/readyz", id="head on readyz has no body"),
        pytest.param("/nope", id="head on an unknown path is 404 without body"),
    ],
)
def test_head_answers_as_get_without_the_body(
    served: tuple[StatusEndpoint, Probes], path: str
) -> None:
    endpoint, _ = served
    get_status, get_body, _ = ask(endpoint, "GET", path)
    head_status, head_body, length = ask(endpoint, "HEAD", path)
    assert head_status == get_status and head_body == b""
    if path != "/metrics":  # the exposition's size changes between two scrapes
        assert int(length) == len(get_body)


def test_metrics_carry_build_info_and_process_figures(
    served: tuple[StatusEndpoint, Probes],
) -> None:
    endpoint, _ = served
    text = ask(endpoint, "GET", "/metrics")[1].decode()
    assert 'qrmd_build_info{python_version="' in text
    assert f'version="{VERSION}"}} 1.0' in text
    for name in ("process_cpu_seconds_total", "process_resident_memory_bytes", "process_open_fds"):
        assert any(line.startswith(name + " ") for line in text.splitlines()), name


def test_version_flag_names_the_release(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"qrmd {VERSION}"
    assert VERSION != "0+unknown"  # the package is installed (make venv)
