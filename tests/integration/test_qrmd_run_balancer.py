"""The real ``qrmd run --enable-memory-balancer`` process: katalyst-agent registers its eviction
plugin over the unix socket and polls it (wire.md §8.3, §11; memory-balancer §9, §10), rounds
run on the ticker with a simulated node under pressure, the §12 metric is on the endpoint, the
rounds are in the journal, and SIGTERM removes the socket."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.daemon_process import REPO, QrmdProcess, wait_for
from tests.wire.eviction_agent import EvictionAgent, go_pod
from wire.gen import evictionplugin_pb2 as ep

pytestmark = pytest.mark.slow

EVICTION_SOCKET = "numa_memory_balancer.sock"


@pytest.fixture
def workdir() -> Iterator[Path]:
    # Short: the socket path must stay under 107 bytes.
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="qb") as root:
        yield Path(root)


@pytest.fixture
def balancer_process(workdir: Path) -> Iterator[QrmdProcess]:
    proc = QrmdProcess(
        workdir / "state",
        [workdir / "k"],
        [
            "--enable-memory-balancer",
            "--numa-metrics-source", "simulated:pressure=0",
            "--plugin-registration-dir", str(workdir / "ev"),
            "--qos-aware-sync-period", "200ms",
            "--durability", "none",
        ],
    )  # fmt: skip
    try:
        yield proc.start()
    finally:
        proc.close()


def test_the_agent_registers_and_polls_the_eviction_plugin(
    workdir: Path, balancer_process: QrmdProcess
) -> None:
    socket_path = workdir / "ev" / EVICTION_SOCKET
    # The socket exists before the daemon says it serves.
    assert socket_path.is_socket()
    assert socket_path.stat().st_mode & 0o077 == 0
    assert "memory balancer: every 0.2 s, dry run, eviction plugin" in balancer_process.log()
    agent = EvictionAgent(socket_path)
    try:
        info = agent.register()
        assert (info.type, info.name, list(info.supported_versions)) == (
            "EvictionPlugin",
            "numa_memory_balancer",
            ["v1alpha1"],
        )
        assert info.endpoint == ""
        assert agent.token == ""
        manager_pass = agent.run_pass([go_pod("web", "uid-web"), go_pod("batch", "uid-batch")])
        # No reclaimed pod holds memory on the pressured node: nothing to evict (§9.1), and
        # the threshold is the reference's all-default NOT_MET answer (§9.2).
        assert list(manager_pass.evict.evict_pods) == []
        assert manager_pass.threshold.met_type == ep.NOT_MET
        assert manager_pass.top is None
    finally:
        agent.close()

    # The ticker's rounds see NUMA 0 under pressure (§12 metric on the endpoint).
    def pressure_round_counted() -> bool:
        text = balancer_process.http("/metrics")[1]
        return any(
            line.startswith("numa_memory_balance{") and 'need_balance="true"' in line
            for line in text.splitlines()
        )

    wait_for(pressure_round_counted, 20, "a balance round under pressure on /metrics")
    metrics = balancer_process.http("/metrics")[1]
    assert "qrmd_balancer_eviction_polls_total 1.0" in metrics
    assert 'qrmd_actor_up{actor="memory_balancer"} 1.0' in metrics
    assert balancer_process.http("/healthz") == (200, "ok\n")

    balancer_process.signal(signal.SIGTERM)
    assert balancer_process.wait(10) == 0
    assert not socket_path.exists()

    shown = subprocess.run(
        [sys.executable, "-m", "qrmd.cli", "journal", "show", str(workdir / "state"),
         "--kind", "BalanceRoundRecorded", "--json"],
        env=dict(os.environ, PYTHONPATH=str(REPO)), cwd=REPO, capture_output=True, text=True,
        timeout=60, check=True,
    )  # fmt: skip
    records = [json.loads(line) for line in shown.stdout.splitlines()]
    assert records
    assert "BalanceRoundRecorded" in shown.stdout
