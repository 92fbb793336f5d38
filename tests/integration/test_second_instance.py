"""Two ``qrmd run`` on one socket directory, a socket file deleted under a running daemon, and
the modes of what ``qrmd run`` creates under ``umask 000`` (wire.md §2).

kubelet and katalyst-agent use the same socket names, so during a rollout or a side-by-side
migration a second process may be pointed at a live socket: it must refuse (exit 2, naming
the path) and leave the first one's socket in place, rather than delete it as "stale".
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.daemon_process import SYNTH_16_2_4, PluginClient, QrmdProcess, wait_for
from tests.integration.test_qrmd_run import one_shot

pytestmark = pytest.mark.slow


@pytest.fixture
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="qs") as root:
        os.chmod(root, 0o755)
        yield Path(root)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_a_second_daemon_on_a_live_socket_exits_2_and_the_first_keeps_serving(
    workdir: Path,
) -> None:
    previous = os.umask(0)  # the first daemon inherits it: modes must not depend on it
    try:
        (workdir / "logs").mkdir()  # the test's log directory, not qrmd's
        first = QrmdProcess(workdir / "logs" / "a" / "state", [workdir / "s" / "k"])
        first.log_path = workdir / "logs" / "qrmd.log"
        first.start()
    finally:
        os.umask(previous)
    try:
        socket_path = first.socket_paths[0]
        # Defect 7: owner-only state, 0755 socket directories it created, 0600 sockets.
        state = workdir / "logs" / "a" / "state"
        assert [oct(mode(p)) for p in (state.parent, state)] == ["0o700", "0o700"]
        assert {oct(mode(p)) for p in state.iterdir()} == {"0o600"}
        assert [oct(mode(p)) for p in (workdir / "s", workdir / "s" / "k")] == ["0o755", "0o755"]
        assert mode(socket_path) == 0o600 and mode(workdir) == 0o755
        inode = socket_path.lstat().st_ino

        second = one_shot(
            "--topology", SYNTH_16_2_4, "--reserved-cpu-cores", "2",
            "--state-dir", str(workdir / "b"), "--socket-dir", str(workdir / "s" / "k"),
            "--metrics-address", "off",
        )  # fmt: skip
        assert second.returncode == 2, second.stderr
        error = second.stderr.strip().splitlines()[-1]
        assert error.startswith("qrmd run: error: ")
        assert str(socket_path) in error and "another process" in error

        # The first daemon's socket is the same file, answers, and health is still ok.
        assert socket_path.lstat().st_ino == inode
        client = PluginClient(socket_path)
        try:
            client.handshake()
            assert client.allocate("pod-1") == "1,3-15"
        finally:
            client.close()
        assert first.http("/healthz")[0] == 200

        # A socket file deleted under the daemon comes back, and the log says so.
        socket_path.unlink()
        wait_for(socket_path.exists, 20, f"the socket to be re-created; log:\n{first.log()}")
        assert "the socket file disappeared; re-creating it" in first.log()
        client = PluginClient(socket_path)
        try:
            assert client.get_info().name == "cpu"
            assert client.allocations()  # pod-1, recovered state served on the new socket
        finally:
            client.close()
    finally:
        first.close()
