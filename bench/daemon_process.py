"""``qrmd run`` as a child process, for the benches that start it (bench_wire, bench_startup).

Its command line on a synthetic 256-CPU node with everything under one directory, waiting for
its first answered GetResourcePluginOptions, filling its journal with shared pods, and the empty
gRPC server a restart is measured against.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import grpc
from bench_grpc import SERVICE, shared_message, stub

from wire.gen import resourceplugin_pb2 as pb

ROOT = Path(__file__).resolve().parents[1]
TOPOLOGY_SPEC = "synthetic:cpus=256,sockets=2,numas=8"

#: A Python process that imports grpc and serves an empty servicer on a unix socket: the
#: floor of a restart.
EMPTY_SERVER = """
import sys, grpc
from concurrent import futures
path = sys.argv[1]
server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
handler = grpc.unary_unary_rpc_method_handler(
    lambda request, context: b"", request_deserializer=None, response_serializer=None)
server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
    "resourceplugin.v1alpha1.ResourcePlugin", {"GetResourcePluginOptions": handler}),))
server.add_insecure_port("unix:" + path)
server.start()
server.wait_for_termination()
"""


#: ``--metrics-address`` of a restart with the default metrics and health endpoint on (a
#: real node's), on a port the kernel picks: the same work as the default 127.0.0.1:9316
#: without meeting whatever else listens there.
METRICS_ON = "127.0.0.1:0"


def qrmd_run_args(directory: str, metrics: str = "off") -> tuple[list[str], str]:
    """``qrmd``'s arguments for ``run`` (``run ...``, without ``--durability``; a command line
    is ``[python, "-m", "qrmd.cli", *args]``) with its state, sockets and registration under
    ``directory``, and the path of the socket it serves; the socket directory is made here.
    ``metrics`` is its ``--metrics-address`` (``off``, or ``METRICS_ON``)."""
    sockets = f"{directory}/sock"
    os.makedirs(sockets, exist_ok=True)
    args = [
        "run",
        "--state-dir", f"{directory}/state",
        "--topology", TOPOLOGY_SPEC,
        "--reserved-cpu-cores", "4",
        "--socket-dir", sockets,
        "--plugin-registration-dir", f"{directory}/reg",
        "--metrics-address", metrics,
        "--node-name", "bench",
    ]  # fmt: skip
    return args, f"{sockets}/qrm_cpu_plugin_dynamic.sock"


def wait_for_answer(socket: str, process: subprocess.Popen[bytes], started: float) -> float:
    """Seconds from ``started`` (``time.monotonic``) until GetResourcePluginOptions on
    ``socket`` is answered.

    Raises:
        RuntimeError: the process exited first (with the end of its stderr).
    """
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"exited early: {process.stderr.read().decode()[-2000:]}")  # type: ignore[union-attr]
        if os.path.exists(socket):
            channel = grpc.insecure_channel(f"unix:{socket}")
            try:
                options = channel.unary_unary(
                    f"/{SERVICE}/GetResourcePluginOptions",
                    request_serializer=lambda m: m.SerializeToString(),
                    response_deserializer=lambda b: b,
                )
                options(pb.Empty(), timeout=0.5)
                return time.monotonic() - started
            except grpc.RpcError:
                pass
            finally:
                channel.close()
        time.sleep(0.002)


def start(
    argv: list[str], socket: str, env: dict[str, str] | None = None, cwd: Path = ROOT
) -> tuple[subprocess.Popen[bytes], float, float]:
    """Start ``argv`` in ``cwd``: the process, its monotonic exec time, seconds to the answer."""
    if os.path.exists(socket):
        os.unlink(socket)
    started = time.monotonic()
    process = subprocess.Popen(
        argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env
    )
    return process, started, wait_for_answer(socket, process, started)


def fill_journal(
    daemon: list[str], socket: str, pods: int, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Run ``daemon`` (a ``qrmd run`` command line) with durability none, allocate ``pods``
    shared pods over gRPC and stop it with SIGTERM; returns the stopped process."""
    process, _, _ = start([*daemon, "--durability", "none"], socket, env)
    channel = grpc.insecure_channel(f"unix:{socket}")
    allocate = stub(channel, "Allocate", pb.ResourceAllocationResponse)
    for i in range(pods):
        allocate(shared_message(f"pod-{i:05d}"), timeout=30)
    channel.close()
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=120)
    return process
