"""A real full disk: ``qrmd run`` with its state directory on a small tmpfs the test mounts,
filled while kubelet-like clients allocate (the fault suite; DESIGN.md, the commit
protocol, step 3).

While the disk is full, each Allocate is refused (UNAVAILABLE: the record was cut back, state
unchanged); once space is freed, commits succeed again without a restart; after SIGKILL and a
restart the daemon holds every acknowledged allocation and none it refused. Under ``CI=true``
the mount must work (``tests.mounts``).
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.burst import Burst, durable_pods
from tests.faults.ledger import Ledger
from tests.integration.daemon_process import QrmdProcess, wait_for
from tests.mounts import small_tmpfs

pytestmark = pytest.mark.slow

DISK_BYTES = 4 << 20
#: Room left beside the ballast: some dozens of records, then ENOSPC.
LEFT_BYTES = 48 << 10


@pytest.fixture
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="qd") as root:
        yield Path(root)


def fill(disk: Path, leave: int) -> Path:
    """Fill the file system with a ballast file until ENOSPC, then give back ``leave`` bytes."""
    ballast = disk / "ballast"
    chunk = b"\0" * (64 << 10)
    fd = os.open(ballast, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, chunk)  # unbuffered: the ENOSPC comes here, not at close
    except OSError as err:
        assert err.errno == errno.ENOSPC, err
    finally:
        os.close(fd)
    size = ballast.stat().st_size
    os.truncate(ballast, max(0, size - leave))
    return ballast


def test_a_full_disk_refuses_commits_loses_nothing_and_recovers(workdir: Path) -> None:
    with small_tmpfs(workdir / "disk", DISK_BYTES) as disk:
        state = disk / "state"
        flags = ["--checkpoint-every-records", "100000"]  # records only: the disk fills steadily
        proc = QrmdProcess(state, [workdir / "k"], flags)
        proc.log_path = workdir / "qrmd.log"  # not on the full disk
        ledger = Ledger()
        try:
            proc.start()
            socket_path = str(proc.socket_paths[0])
            ballast = fill(disk, LEFT_BYTES)
            burst = Burst(socket_path, ledger, timeout_s=5.0).start()
            wait_for(lambda: len(ledger.refused) >= 20, 30, "commits refused on the full disk")
            full_acks = len(ledger.acknowledged)
            assert any("commit refused" in r for r in ledger.reasons.values()), ledger.reasons
            ballast.unlink()  # the operator frees space: no restart needed
            wait_for(
                lambda: len(ledger.acknowledged) >= full_acks + 20, 30, "commits after space freed"
            )
            burst.stop()
            proc.kill()
            restarted = QrmdProcess(state, [workdir / "k"], flags)
            restarted.log_path = workdir / "qrmd-restarted.log"
            restarted.start()
            try:
                ledger.check(durable_pods(socket_path))
            finally:
                restarted.close()
        finally:
            proc.close()
