"""The demo's CPU pressure phase, without a daemon: the pods as the eviction manager sends
them, and the errors a missing socket or a dead daemon give (the whole phase runs against the
real daemon in ``tests/integration/test_demo.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from qrmd.sim.demo.pressure_phase import PressurePhase, PressurePhaseError, active_pod
from qrmd.sim.demo.workload import WORKLOAD
from wire.cpu_pressure_rpcs import active_pods
from wire.eviction_client import _pod_message


def test_a_reclaimed_pod_is_sent_with_its_tolerance_and_its_request() -> None:
    (batch,) = [p for p in WORKLOAD if p.name == "batch-1"]
    (received,) = active_pods([_pod_message(active_pod(batch))])
    assert received.uid == "uid-batch-1"
    assert received.annotations["katalyst.kubewharf.io/cpu_enhancement"] == (
        '{"suppression_tolerance_rate": "0.3"}'
    )
    assert received.containers == (
        ("worker", {"resource.katalyst.kubewharf.io/reclaimed_millicpu": "2000"}),
    )


def test_a_dead_daemon_stops_the_wait_for_the_socket(tmp_path: Path) -> None:
    def dead() -> None:
        raise PressurePhaseError("qrmd run exited")

    phase = PressurePhase(
        Console(file=None), tmp_path / "absent.sock", min_duration_s=0, check_alive=dead
    )
    with pytest.raises(PressurePhaseError, match="exited"):
        phase.run([], 4)
