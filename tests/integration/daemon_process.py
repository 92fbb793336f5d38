"""A real ``qrmd run`` process for integration tests, and a gRPC client for its socket.

The process is ``python -m qrmd.cli run`` with this checkout on ``PYTHONPATH``. Sockets live
under a short directory in ``/tmp`` (a unix socket path stops at 107 bytes; pytest's
``tmp_path`` is too deep). Waits poll with a deadline; nothing sleeps for a fixed period.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

import grpc

from wire.gen import pluginregistration_pb2 as reg
from wire.gen import pluginregistration_pb2_grpc as reg_grpc
from wire.gen import resourceplugin_pb2 as rp
from wire.gen import resourceplugin_pb2_grpc as rp_grpc

REPO = Path(__file__).resolve().parents[2]
SOCKET_NAME = "qrm_cpu_plugin_dynamic.sock"
SYNTH_16_2_4 = "synthetic:cpus=16,sockets=2,numas=4"
START_TIMEOUT_S = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.02)


class QrmdProcess:
    """One ``qrmd run`` process.

    Args:
        state_dir: ``--state-dir``.
        socket_dirs: ``--socket-dir`` values.
        extra: more flags.
    """

    def __init__(self, state_dir: Path, socket_dirs: Sequence[Path], extra: Sequence[str] = ()):
        self.state_dir = state_dir
        self.socket_dirs = list(socket_dirs)
        self.metrics_port = free_port()
        self.log_path = state_dir.parent / f"qrmd-{time.monotonic_ns()}.log"
        self.argv = [
            sys.executable, "-m", "qrmd.cli", "run",
            "--topology", SYNTH_16_2_4, "--reserved-cpu-cores", "2",
            "--state-dir", str(state_dir), "--transition-period", "1s",
            "--metrics-address", f"127.0.0.1:{self.metrics_port}",
            *(arg for d in socket_dirs for arg in ("--socket-dir", str(d))),
            *extra,
        ]  # fmt: skip
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def socket_paths(self) -> list[Path]:
        return [d / SOCKET_NAME for d in self.socket_dirs]

    def start(self) -> QrmdProcess:
        env = dict(os.environ, PYTHONPATH=str(REPO))
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(self.argv, env=env, stderr=log, stdout=log, cwd=REPO)
        wait_for(self._serving, START_TIMEOUT_S, f"qrmd to serve; log:\n{self.log()}")
        return self

    def _serving(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"qrmd exited with {self.proc.returncode}:\n{self.log()}")
        return "qrmd serving:" in self.log()

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def signal(self, signum: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(signum)

    def kill(self) -> None:
        """SIGKILL and reap."""
        self.signal(signal.SIGKILL)
        assert self.proc is not None
        self.proc.wait(timeout=10)

    def wait(self, timeout_s: float) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout=timeout_s)

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill()

    def http(self, path: str) -> tuple[int, str]:
        url = f"http://127.0.0.1:{self.metrics_port}{path}"
        try:
            with urllib.request.urlopen(url, timeout=5) as answer:
                return answer.status, answer.read().decode()
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode()


class PluginClient:
    """kubelet's side of one plugin socket: Registration and ResourcePlugin stubs."""

    def __init__(self, socket_path: Path) -> None:
        self.channel = grpc.insecure_channel(f"unix://{socket_path}")
        self.registration = reg_grpc.RegistrationStub(self.channel)
        self.plugin = rp_grpc.ResourcePluginStub(self.channel)

    def close(self) -> None:
        self.channel.close()

    def get_info(self) -> reg.PluginInfo:
        return self.registration.GetInfo(reg.InfoRequest(), timeout=1)

    def handshake(self) -> reg.PluginInfo:
        """wire.md §8.1: GetInfo, GetResourcePluginOptions, NotifyRegistrationStatus(true)."""
        info = self.get_info()
        self.plugin.GetResourcePluginOptions(rp.Empty(), timeout=10)
        self.registration.NotifyRegistrationStatus(
            reg.RegistrationStatus(plugin_registered=True), timeout=5
        )
        return info

    def allocate(self, pod: str, cores: float = 2.0, container: str = "app") -> str:
        """Allocate a shared_cores MAIN container; returns its cpuset."""
        answer = self.plugin.Allocate(shared_request(pod, cores, container), timeout=10)
        return str(answer.allocation_result.resource_allocation["cpu"].allocation_result)

    def allocations(self) -> dict[str, dict[str, str]]:
        """GetResourcesAllocation as pod → container → cpuset."""
        answer = self.plugin.GetResourcesAllocation(rp.GetResourcesAllocationRequest(), timeout=10)
        return {
            pod: {
                name: alloc.resource_allocation["cpu"].allocation_result
                for name, alloc in containers.container_resources.items()
            }
            for pod, containers in answer.pod_resources.items()
        }


def shared_request(pod: str, cores: float, container: str = "app") -> rp.ResourceRequest:
    return rp.ResourceRequest(
        pod_uid=pod,
        pod_namespace="default",
        pod_name=f"name-{pod}",
        container_name=container,
        container_type=rp.MAIN,
        container_index=0,
        resource_name="cpu",
        resource_requests={"cpu": cores},
        annotations={"katalyst.kubewharf.io/qos_level": "shared_cores"},
        labels={"katalyst.kubewharf.io/qos_level": "shared_cores"},
    )
