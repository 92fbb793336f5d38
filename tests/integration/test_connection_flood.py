"""``qrmd run`` under a connection flood with a low ``nofile`` limit (the connection cap).

Started with a soft open-file limit of 256 (hard 4096) and ``--max-connections 64``, flooded
with 600 idle connections — more than the soft limit it was started with: the daemon raised
the soft limit to the hard one at start (logged), refuses the connections past its cap, and
keeps answering ``/healthz``, committing allocations for a client that was connected before
the flood, and writing checkpoints; gRPC never meets EMFILE.
"""

from __future__ import annotations

import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.daemon_process import PluginClient, QrmdProcess, wait_for

pytestmark = pytest.mark.slow

FLOOD = 600


@pytest.fixture
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="qf") as root:
        yield Path(root)


def test_a_flood_of_connections_leaves_health_and_commits_working(workdir: Path) -> None:
    proc = QrmdProcess(
        workdir / "state",
        [workdir / "k"],
        ["--max-connections", "64", "--checkpoint-every-records", "5"],
    )
    proc.argv = ["prlimit", "--nofile=256:4096", "--", *proc.argv]
    flood: list[socket.socket] = []
    client: PluginClient | None = None
    try:
        proc.start()
        # Logged once the daemon has started, just after it says it serves.
        raised = "raised the open-file limit (soft nofile) from 256 to the hard limit 4096"
        wait_for(lambda: raised in proc.log(), 10.0, f"{raised!r} in the log")
        client = PluginClient(proc.socket_paths[0])
        client.handshake()  # kubelet's one connection, made before the flood
        for _ in range(FLOOD):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(str(proc.socket_paths[0]))  # accepted by the kernel's backlog, then shed
            flood.append(s)
        status, body = proc.http("/healthz")
        assert status == 200, body
        for n in range(12):  # two checkpoints' worth of commits
            assert client.allocate(f"pod-{n}", cores=0.1)
        wait_for(
            lambda: any(p.name.startswith("checkpoint-") for p in (workdir / "state").iterdir()),
            10,
            "a checkpoint",
        )
        assert proc.http("/healthz")[0] == 200
        log = proc.log()
        assert "File descriptor limit reached" not in log
        assert "Too many open files" not in log
    finally:
        for s in flood:
            s.close()
        if client is not None:
            client.close()
        proc.close()
