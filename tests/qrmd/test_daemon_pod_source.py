"""``qrmd run`` with and without a pod source, in process (qrmd.daemon, qrmd.pods.subsystem):
the start-up line of ``--pod-source none``, and with ``--pod-source kubelet`` the checkers child,
its handlers on /healthz, its metrics, and a clean stop."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pykka
import pytest

from qrmd.pods.subsystem import CHECKERS_CHILD, CheckersWiring
from qrmd.sim.kubelet import Container, Kubelet, Pod
from qrmd.sim.kubelet.pods_endpoint import PodsEndpoint
from tests.qrmd.test_daemon import Harness, harness, http, wait_until

__all__ = ["harness"]  # the fixture, shared with test_daemon


@pytest.fixture
def pods() -> Iterator[PodsEndpoint]:
    kubelet = Kubelet([0, 1, 2, 3])
    kubelet.admit(Pod("uid-qrmd", "qrmd", "kube-system", (Container("qrmd"),)))
    with PodsEndpoint(kubelet) as endpoint:
        yield endpoint


def test_without_a_pod_source_no_checker_runs_and_the_log_says_so(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    daemon = harness.daemon()
    with caplog.at_level(logging.INFO, "qrmd.daemon"):
        daemon.start()
    try:
        assert daemon.find(CheckersWiring) is None
        assert any(
            "residual state of a pod kubelet forgot" in r.getMessage() for r in caplog.records
        )
        assert daemon.supervisor is not None
        assert CHECKERS_CHILD not in {c.name for c in daemon.supervisor.status().children}
    finally:
        daemon.stop()


def test_with_the_kubelet_pod_source_the_checkers_run_report_and_stop(
    harness: Harness, pods: PodsEndpoint, tmp_path: Path
) -> None:
    daemon = harness.daemon(**{
        "pod-source": "kubelet",
        "kubelet-read-only-port": str(pods.port),
        "residual-check-period": "100ms",
        "residual-max-age": "1s",
        "cpuset-check-period": "100ms",
        "cpuset-cgroup-root": str(tmp_path),
    })  # fmt: skip
    daemon.start()
    try:
        assert daemon.supervisor is not None
        children = [c.name for c in daemon.supervisor.status().children]
        assert children[-1] == CHECKERS_CHILD and children.index("allocator") < len(children) - 1
        assert daemon.context is not None and daemon.context.residual_sightings == 10
        wait_until(lambda: http(daemon, "/healthz")[0] == 200)
        wait_until(lambda: "qrmd_pod_source_pods 1.0" in http(daemon, "/metrics")[1])
        metrics = http(daemon, "/metrics")[1]
        assert 'cpuset_overlap{policy="dynamic"} 0.0' in metrics
        assert "qrmd_residual_pods 0.0" in metrics
        pods.fail_with(500)
        wait_until(lambda: "qrmd_pod_source_fetch not ready" in http(daemon, "/healthz")[1])
        assert daemon.find(CheckersWiring) is not None
        tickers = list(daemon.find(CheckersWiring).tickers)
        assert len(tickers) == 2  # the fetch (the pod handlers run on it), the heartbeat
    finally:
        daemon.stop()
    assert pykka.ActorRegistry.get_all() == []
    assert not any(t.running for t in tickers)
