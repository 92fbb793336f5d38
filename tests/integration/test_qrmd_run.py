"""The real ``qrmd run`` process driven over its unix sockets as kubelet would (wire.md §8.1, §9):
registration handshake, the spec's cpusets through the wire, SIGKILL mid-workload and a restart
that brings back every acknowledged allocation, a stale socket, a socket path too long, two
socket directories, SIGTERM, metrics and health, bad configuration."""

from __future__ import annotations

import os
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from tests.integration.daemon_process import (
    REPO,
    SOCKET_NAME,
    SYNTH_16_2_4,
    PluginClient,
    QrmdProcess,
    wait_for,
)
from wire.gen import resourceplugin_pb2 as rp

pytestmark = pytest.mark.slow

STOP_WITHIN_S = 5.0


@pytest.fixture
def workdir() -> Iterator[Path]:
    # Short: the socket path must stay under 107 bytes.
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="qi") as root:
        yield Path(root)


@pytest.fixture
def processes() -> Iterator[list[QrmdProcess]]:
    started: list[QrmdProcess] = []
    yield started
    for proc in started:
        proc.close()


def run(
    workdir: Path, processes: list[QrmdProcess], socket_dirs: list[Path] | None = None
) -> QrmdProcess:
    proc = QrmdProcess(workdir / "state", socket_dirs or [workdir / "k"])
    processes.append(proc)
    return proc.start()


def test_registration_handshake_and_the_first_shared_container(
    workdir: Path, processes: list[QrmdProcess]
) -> None:
    proc = run(workdir, processes)
    socket_path = proc.socket_paths[0]
    mode = os.stat(socket_path).st_mode
    assert stat.S_ISSOCK(mode)
    assert mode & 0o077 == 0, "the socket is owner-only"
    client = PluginClient(socket_path)
    try:
        info = client.handshake()
        assert (info.type, info.name, list(info.supported_versions)) == (
            "ResourcePlugin",
            "cpu",
            ["v1alpha1"],
        )
        # Compatibility checklist 11: reserve 0,2, the first shared container ramps up on
        # every pooled CPU.
        assert client.allocate("pod-1") == "1,3-15"
        # Checklist 18: once the transition period (1 s here) has passed, a reconcile moves
        # it into the share pool, reported from the next reconcile on (§10.1 step 3).
        wait_for(
            lambda: client.allocations() == {"pod-1": {"app": "1,3-6,9,11-14"}},
            10,
            "ramp-up to end",
        )
        with pytest.raises(grpc.RpcError) as err:
            client.plugin.GetTopologyAwareResources(
                rp.GetTopologyAwareResourcesRequest(pod_uid="nope", container_name="app"),
                timeout=5,
            )
        assert err.value.code() is grpc.StatusCode.NOT_FOUND
    finally:
        client.close()


def test_sigkill_mid_workload_loses_no_acknowledged_allocation(
    workdir: Path, processes: list[QrmdProcess]
) -> None:
    proc = run(workdir, processes)
    client = PluginClient(proc.socket_paths[0])
    for i in range(3):
        client.allocate(f"settled-{i}", cores=1)

    # Allocate busy-i, then remove busy-(i-4): at most 4 busy pods at once, so the share pool
    # never runs out. ``present`` holds what kubelet was told; ``uncertain`` the pod of the
    # call the kill interrupted (it may or may not have been committed).
    present = {f"settled-{i}" for i in range(3)}
    uncertain: set[str] = set()
    done = [0]

    def workload() -> None:
        for i in range(100_000):
            pod, old = f"busy-{i}", f"busy-{i - 4}"
            for call, target in (("allocate", pod), ("remove", old)):
                if call == "remove" and i < 4:
                    continue
                uncertain.add(target)
                try:
                    if call == "allocate":
                        client.allocate(target, cores=1)
                    else:
                        client.plugin.RemovePod(rp.RemovePodRequest(pod_uid=target), timeout=5)
                except grpc.RpcError:
                    return  # the daemon died under this call
                uncertain.discard(target)
                if call == "allocate":
                    present.add(target)
                else:
                    present.discard(target)
            done[0] = i

    worker = threading.Thread(target=workload)
    worker.start()
    wait_for(lambda: done[0] >= 40, 60, "40 rounds of allocate and remove")
    proc.kill()
    worker.join(timeout=30)
    client.close()
    assert len(uncertain) <= 1

    restarted = run(workdir, processes)
    client = PluginClient(restarted.socket_paths[0])
    try:
        recovered = set(client.allocations())
        assert present - uncertain <= recovered
        assert recovered <= present | uncertain
        assert "records replayed" in restarted.log()
    finally:
        client.close()


def test_sigkill_when_idle_then_restart_answers_the_same_allocation(
    workdir: Path, processes: list[QrmdProcess]
) -> None:
    proc = run(workdir, processes)
    client = PluginClient(proc.socket_paths[0])
    for i in range(3):
        client.allocate(f"pod-{i}")
    settled = {f"pod-{i}": {"app": "1,3-6,9,11-14"} for i in range(3)}
    wait_for(lambda: client.allocations() == settled, 10, "ramp-up to end")
    before = client.allocations()
    client.close()
    proc.kill()
    restarted = run(workdir, processes)
    client = PluginClient(restarted.socket_paths[0])
    try:
        assert client.allocations() == before
    finally:
        client.close()


def test_a_stale_socket_file_is_replaced(workdir: Path, processes: list[QrmdProcess]) -> None:
    socket_dir = workdir / "k"
    socket_dir.mkdir()
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(socket_dir / SOCKET_NAME))  # bound, never listening: a dead plugin's
    stale.close()
    proc = run(workdir, processes)
    client = PluginClient(proc.socket_paths[0])
    try:
        assert client.get_info().name == "cpu"
    finally:
        client.close()


def test_two_socket_dirs_serve_the_same_state(workdir: Path, processes: list[QrmdProcess]) -> None:
    proc = run(workdir, processes, [workdir / "k1", workdir / "k2"])
    first, second = (PluginClient(p) for p in proc.socket_paths)
    try:
        assert first.handshake().name == second.handshake().name == "cpu"
        first.allocate("pod-1")
        assert set(second.allocations()) == {"pod-1"}
    finally:
        first.close()
        second.close()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_exits_cleanly_and_removes_the_socket(
    workdir: Path, processes: list[QrmdProcess], signum: int
) -> None:
    proc = run(workdir, processes, [workdir / "k1", workdir / "k2"])
    client = PluginClient(proc.socket_paths[0])
    client.allocate("pod-1")
    client.close()
    started = time.monotonic()
    proc.signal(signum)
    assert proc.wait(STOP_WITHIN_S) == 0, proc.log()
    assert time.monotonic() - started < STOP_WITHIN_S
    assert not any(p.exists() for p in proc.socket_paths)
    assert "qrmd stopped" in proc.log()
    assert "still alive after shutdown" not in proc.log()
    # The clean stop wrote a checkpoint: the next start replays no record.
    restarted = run(workdir, processes)
    assert "0 records replayed" in restarted.log()


def test_metrics_and_health_answer(workdir: Path, processes: list[QrmdProcess]) -> None:
    proc = run(workdir, processes)
    client = PluginClient(proc.socket_paths[0])
    try:
        client.allocate("pod-1")
        with pytest.raises(grpc.RpcError):
            client.plugin.Allocate(
                rp.ResourceRequest(pod_uid="bad", container_name="app", resource_name="cpu"),
                timeout=5,
            )
    finally:
        client.close()
    assert proc.http("/healthz") == (200, "ok\n")
    status, text = proc.http("/metrics")
    assert status == 200
    lines = text.splitlines()
    assert 'heartbeat{policy="dynamic"} 1.0' in lines
    assert 'alloc_failed{policy="dynamic"} 1.0' in lines
    assert 'pool_size{policy="dynamic",poolName="reserve",pool_type="reserve"} 2.0' in lines
    assert any(
        line.startswith('qrmd_rpc_duration_seconds_count{code="OK",rpc="Allocate"}')
        for line in lines
    )
    assert any(line.startswith("qrmd_journal_fsyncs_total ") for line in lines)


def one_shot(*args: str) -> subprocess.CompletedProcess[str]:
    """``qrmd run`` expected to exit by itself (a refusal before serving)."""
    return subprocess.run(
        [sys.executable, "-m", "qrmd.cli", "run", *args],
        check=False,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )


def test_a_socket_path_too_long_is_one_line_and_nothing_served(workdir: Path) -> None:
    deep = workdir / ("d" * 90)
    done = one_shot(
        "--topology", SYNTH_16_2_4, "--state-dir", str(workdir / "state"),
        "--socket-dir", str(deep), "--metrics-address", "off",
    )  # fmt: skip
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("qrmd run: error: --socket-dir: socket path ")
    assert "longer than a unix socket allows (107)" in lines[0]
    assert not (workdir / "state").exists()
    assert not deep.exists()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        pytest.param(
            ["--transition-period", "3x"],
            "--transition-period: '3x' is not a duration (use 0s, 10ms, 1m30s)",
            id="transition period",
        ),
        pytest.param(
            ["--reserved-cpu-cores", "many"],
            "--reserved-cpu-cores: 'many' is not a whole number",
            id="reserved cores",
        ),
        pytest.param(
            ["--durability", "fast"],
            "--durability: 'fast' is not one of always, none",
            id="durability",
        ),
        pytest.param(
            ["--metrics-address", "everywhere"],
            "--metrics-address: 'everywhere' is not HOST:PORT or off",
            id="metrics address",
        ),
    ],
)
def test_a_bad_value_is_one_error_line_naming_its_key(
    workdir: Path, flags: list[str], message: str
) -> None:
    done = one_shot("--state-dir", str(workdir / "state"), *flags)
    assert done.returncode == 2
    assert done.stderr == f"qrmd run: error: {message}\n"
