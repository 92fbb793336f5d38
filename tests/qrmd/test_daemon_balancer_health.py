"""A broken balancer set-up does not report healthy forever: its host paths are checked at start
(a missing memory cgroup root refuses start, a missing metrics file warns, each naming its
flag), rounds that keep failing turn ``/healthz`` unhealthy after the tolerance (cpu-policy
§12.3), and the ``failed_reason`` label carries no free text (memory-balancer §12)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pykka
import pytest

from policy.balance.constants import FREE_TEXT_FAILED_REASON
from policy.topology.synthetic import parse_synthetic_spec
from qrmd.balancer.checks import check_memory_cgroup_root, metrics_file_warnings
from qrmd.balancer.settings import BalancerSettings
from qrmd.balancer.subsystem import BalancerWiring
from qrmd.config import load_config
from qrmd.config_values import settings_of
from qrmd.host.balancer_sources import BalancerSourceSettings, SourceKind
from tests.qrmd.test_daemon import http
from tests.qrmd.test_daemon_balancer import BalancerHarness, FakeClock, state

TOPOLOGY = parse_synthetic_spec("synthetic:cpus=16,sockets=2,numas=4")


@pytest.fixture
def bh(tmp_path: Path) -> Iterator[BalancerHarness]:
    yield BalancerHarness(tmp_path)
    pykka.ActorRegistry.stop_all()


def test_a_memory_cgroup_root_that_does_not_exist_refuses_start_naming_the_flag(
    tmp_path: Path,
) -> None:
    config = load_config(
        {
            "enable-memory-balancer": True,
            "memory-cgroup-root": str(tmp_path / "nonexistent"),
            "numa-metrics-source": "simulated",
            "state-dir": str(tmp_path / "state"),
        }
    )
    with pytest.raises(
        ValueError, match=r"^--memory-cgroup-root: .*nonexistent is not a directory"
    ):
        BalancerWiring(
            settings_of(BalancerSettings, config),
            TOPOLOGY,
            FakeClock(0.0),
            cpu_vendor="GenuineIntel",
        )


def test_a_metrics_file_that_does_not_exist_is_a_warning_naming_the_flag(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = load_config(
        {
            "enable-memory-balancer": True,
            "memory-cgroup-root": str(tmp_path),
            "numa-metrics-source": f"file:{tmp_path / 'metrics.json'}",
            "state-dir": str(tmp_path / "state"),
        }
    )
    with caplog.at_level(logging.WARNING, logger="qrmd.balancer"):
        BalancerWiring(
            settings_of(BalancerSettings, config),
            TOPOLOGY,
            FakeClock(0.0),
            cpu_vendor="GenuineIntel",
        )
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "--numa-metrics-file" in warning and "metrics.json: it does not exist yet" in warning


@pytest.mark.parametrize(
    ("settings", "want"),
    [
        pytest.param(BalancerSourceSettings(metrics_file=Path("/nonexistent/m.json")),
                     "its directory /nonexistent does not exist", id="a file in no directory"),
        pytest.param(BalancerSourceSettings(metrics_file=Path("/")),
                     "it is not a regular file", id="a directory for a file"),
        pytest.param(BalancerSourceSettings(latency_source=SourceKind.SIMULATOR,
                                            bandwidth_source=SourceKind.SIMULATOR,
                                            metrics_file=Path("/nonexistent/m.json")),
                     None, id="no file read, nothing checked"),
    ],
)  # fmt: skip
def test_metrics_file_warnings(settings: BalancerSourceSettings, want: str | None) -> None:
    warnings = metrics_file_warnings(settings)
    if want is None:
        assert warnings == []
    else:
        (warning,) = warnings
        assert want in warning


def test_an_existing_memory_cgroup_root_passes(tmp_path: Path) -> None:
    assert check_memory_cgroup_root(BalancerSourceSettings(memory_cgroup_root=tmp_path)) == tmp_path


def test_rounds_that_keep_failing_turn_the_daemon_unhealthy_after_the_tolerance(
    bh: BalancerHarness,
) -> None:
    daemon = bh.balancer_daemon()
    daemon.start()
    try:
        assert daemon.find(BalancerWiring) is not None
        assert http(daemon, "/healthz") == (200, "ok\n"), "not run yet: healthy"
        bh.clock.advance(5)
        daemon.find(BalancerWiring).tick()
        state(daemon)
        assert http(daemon, "/healthz") == (200, "ok\n")
        bh.metrics.make_unreadable(2, "read /run/qrmd/numa-metrics.json: errno 5")
        bh.clock.advance(5)
        daemon.find(BalancerWiring).tick()
        state(daemon)
        assert http(daemon, "/healthz")[0] == 200, "the first failure is tolerated"
        # The period is 1h here: the tolerance is three of them after the first failure.
        for _ in range(3):
            bh.clock.advance(3600)
            daemon.find(BalancerWiring).tick()
            state(daemon)
            assert http(daemon, "/healthz")[0] == 200, "within the tolerance"
        bh.clock.advance(1)
        daemon.find(BalancerWiring).tick()
        assert state(daemon).metrics["rounds_failed_total"] == 5
        status, body = http(daemon, "/healthz")
        assert status == 503
        assert "numa_memory_balancer_round not ready" in body and "numa id: 2" in body
        text = http(daemon, "/metrics")[1]
        assert "errno" not in text and "/run/qrmd" not in text
        assert f'failed_reason="{FREE_TEXT_FAILED_REASON}"' in text
        # A good round again: healthy at once.
        bh.metrics.relieve(2)
        bh.clock.advance(5)
        daemon.find(BalancerWiring).tick()
        state(daemon)
        assert http(daemon, "/healthz") == (200, "ok\n")
    finally:
        daemon.stop()
