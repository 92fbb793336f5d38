"""SIGSTOP/SIGCONT and SIGTERM while kubelet-like clients allocate (the fault suite).

* Stopped for a second mid-burst, the daemon answers nothing; the clients' deadlines pass (in
  doubt). Continued, it serves again, ``/healthz`` is ok, and a restart after SIGKILL holds
  every acknowledged allocation and none it refused.
* SIGTERM mid-burst stops it cleanly (exit 0 within the stop budget): calls in flight are
  answered or never reached it; the restarted daemon holds every acknowledged allocation.
"""

from __future__ import annotations

import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults.burst import Burst, durable_pods
from tests.faults.ledger import Ledger
from tests.integration.daemon_process import QrmdProcess

pytestmark = pytest.mark.slow

STOP_WITHIN_S = 10.0


@pytest.fixture
def workdir() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="qg") as root:
        yield Path(root)


def daemon(workdir: Path) -> QrmdProcess:
    return QrmdProcess(workdir / "state", [workdir / "k"])


def test_sigstop_and_sigcont_mid_burst_lose_nothing(workdir: Path) -> None:
    ledger = Ledger()
    proc = daemon(workdir).start()
    try:
        socket_path = str(proc.socket_paths[0])
        burst = Burst(socket_path, ledger, timeout_s=0.5).start()
        burst.wait_for_sent(40)
        proc.signal(signal.SIGSTOP)
        time.sleep(1.0)  # the fault itself: a second stopped (no period is waited for)
        stopped_at = len(ledger.acknowledged)
        proc.signal(signal.SIGCONT)
        burst.wait_for_sent(burst.sent + 60)
        burst.stop()
        assert proc.http("/healthz")[0] == 200
        # It served again after SIGCONT (if not, what the calls since were told says why).
        assert len(ledger.acknowledged) > stopped_at, sorted(ledger.reasons.items())[-8:]
        assert ledger.in_doubt, "the stop must have left calls without an answer"
        proc.kill()
        restarted = daemon(workdir).start()
        try:
            ledger.check(durable_pods(socket_path))
        finally:
            restarted.close()
    finally:
        proc.signal(signal.SIGCONT) if proc.proc and proc.proc.poll() is None else None
        proc.close()


def test_sigterm_mid_burst_stops_cleanly_and_loses_nothing(workdir: Path) -> None:
    ledger = Ledger()
    proc = daemon(workdir).start()
    try:
        socket_path = str(proc.socket_paths[0])
        burst = Burst(socket_path, ledger, timeout_s=5.0).start()
        burst.wait_for_sent(60)
        proc.signal(signal.SIGTERM)
        assert proc.wait(STOP_WITHIN_S) == 0, proc.log()
        burst.stop()
        assert len(ledger.acknowledged) >= 50
        restarted = daemon(workdir).start()
        try:
            ledger.check(durable_pods(socket_path))
        finally:
            restarted.close()
    finally:
        proc.close()
