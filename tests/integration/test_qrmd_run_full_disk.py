"""kubelet's reconcile against a real ``qrmd run`` whose state directory is a small tmpfs that
the test fills (a real ENOSPC): GetResourcesAllocation keeps answering, from the state as it
is, while the commit of the ramp-up it would end is refused; once space is freed it settles
(cpu-policy §10.1; DESIGN.md, the commit protocol step 3). Under ``CI=true`` the mount must
work (``tests.mounts``).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from tests.actors.test_allocator_full_disk import RAMPING_PODS, fill
from tests.integration.daemon_process import PluginClient, QrmdProcess, wait_for
from tests.mounts import small_tmpfs

pytestmark = pytest.mark.slow

RAMPING = "1,3-15"
REFUSED_LINE = "answering from the state as it is"


@pytest.fixture
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="qd") as root:
        yield Path(root)


def allocate_until_refused(client: PluginClient, disk: Path) -> None:
    """A tmpfs file has room up to the end of its last page: commit until that is used up,
    then take back whatever the cut-back of the refused record gave back."""
    for i in range(200):
        try:
            client.allocate(f"pod-filler-{i}", cores=1)
        except grpc.RpcError as err:
            assert err.code() is grpc.StatusCode.UNAVAILABLE, err.details()
            fill(disk)
            return
    raise AssertionError("the full disk took 200 records")


def test_on_a_full_disk_the_reconcile_answers_ramping_and_settles_once_space_is_freed(
    workdir: Path,
) -> None:
    with small_tmpfs(workdir / "disk", 2 << 20) as disk:
        flags = ["--checkpoint-every-records", "100000"]
        proc = QrmdProcess(disk / "state", [workdir / "k"], flags)
        proc.log_path = workdir / "qrmd.log"  # not on the full disk
        try:
            proc.start()
            client = PluginClient(proc.socket_paths[0])
            try:
                for pod in RAMPING_PODS:
                    assert client.allocate(pod, cores=1) == RAMPING
                ballast = fill(disk)
                allocate_until_refused(client, disk)
                # The 1 s transition period passes; every reconcile still answers, ramping.
                wait_for(
                    lambda: (
                        client.allocations()["pod-a"]["app"] == RAMPING
                        and REFUSED_LINE in proc.log()
                    ),
                    15,
                    f"a refused ramp-up commit; log:\n{proc.log()}",
                )
                assert client.allocations()["pod-a"]["app"] == RAMPING
                ballast.unlink()
                wait_for(
                    lambda: client.allocations()["pod-a"]["app"] != RAMPING,
                    15,
                    f"the ramp-up settled; log:\n{proc.log()}",
                )
            finally:
                client.close()
        finally:
            proc.close()


def healthy_gauge(proc: QrmdProcess) -> str:
    _, body = proc.http("/metrics")
    return next(line for line in body.splitlines() if line.startswith("qrmd_healthy "))


def test_while_the_disk_refuses_commits_healthz_says_why_and_recovers_on_an_idle_node(
    workdir: Path,
) -> None:
    with small_tmpfs(workdir / "disk", 2 << 20) as disk:
        # Checkpoints are time-due every second, so the store's ticker runs every 0.25 s.
        flags = ["--checkpoint-every-records", "100000", "--checkpoint-every", "1s"]
        proc = QrmdProcess(disk / "state", [workdir / "k"], flags)
        proc.log_path = workdir / "qrmd.log"
        try:
            proc.start()
            client = PluginClient(proc.socket_paths[0])
            try:
                assert proc.http("/healthz") == (200, "ok\n")
                ballast = fill(disk)
                allocate_until_refused(client, disk)
                status, body = proc.http("/healthz")
                assert status == 503, body
                assert "state store refuses commits" in body and "No space left" in body, body
                assert healthy_gauge(proc) in ("qrmd_healthy 0", "qrmd_healthy 0.0")
                refusals = [line for line in proc.log().splitlines() if "not journaled" in line]
                assert refusals and all(" WARNING " in line for line in refusals), refusals
                # Space comes back; kubelet calls nothing: the tick's probe write finds it.
                ballast.unlink()
                wait_for(
                    lambda: proc.http("/healthz") == (200, "ok\n"), 15, "health after space freed"
                )
                assert healthy_gauge(proc) in ("qrmd_healthy 1", "qrmd_healthy 1.0")
                assert client.allocate("pod-after", cores=1) == RAMPING
            finally:
                client.close()
        finally:
            proc.close()
