"""The generated stubs serve and call over a real unix socket (wire.md §1.2, §3).

The socket lives in a short directory under /tmp: unix socket paths stop at 107 bytes,
and pytest's tmp_path can be longer than that.
"""

import shutil
import tempfile
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from wire.gen import pluginregistration_pb2 as reg
from wire.gen import pluginregistration_pb2_grpc as reg_grpc


class CPUPluginInfo(reg_grpc.RegistrationServicer):
    """Answers GetInfo as a QRM CPU plugin does (wire.md §3)."""

    def GetInfo(self, request: reg.InfoRequest, context: grpc.ServicerContext) -> reg.PluginInfo:
        return reg.PluginInfo(type="ResourcePlugin", name="cpu", supported_versions=["v1alpha1"])


@pytest.fixture
def socket_path() -> Iterator[Path]:
    directory = tempfile.mkdtemp(prefix="qrmd-", dir="/tmp")
    try:
        yield Path(directory) / "plugin.sock"
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def test_get_info_over_a_unix_socket(socket_path: Path) -> None:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    reg_grpc.add_RegistrationServicer_to_server(CPUPluginInfo(), server)
    assert server.add_insecure_port(f"unix://{socket_path}") != 0
    server.start()
    try:
        assert socket_path.is_socket()
        with grpc.insecure_channel(f"unix://{socket_path}") as channel:
            # The kubelet gives GetInfo a 1 s deadline (wire.md §8.1).
            info = reg_grpc.RegistrationStub(channel).GetInfo(reg.InfoRequest(), timeout=1.0)
    finally:
        server.stop(grace=None).wait()
    assert info == reg.PluginInfo(
        type="ResourcePlugin", name="cpu", endpoint="", supported_versions=["v1alpha1"]
    )
