"""The advisor link's wiring in ``qrmd run`` (qrmd.advisor.subsystem): the GetCheckpoint server's
watchdog, the fallback on ``/healthz`` and the sizing gauge."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.ports.clock import SYSTEM_CLOCK
from actors.store_messages import Snapshot
from policy.state.advisor_section import AdvisorSizingSuspended
from policy.state.sections import State, apply_all
from qrmd.advisor.settings import AdvisorLinkConfig
from qrmd.advisor.subsystem import AdvisorWiring, silence_tick_period
from qrmd.status.health import HealthRegistry
from tests.policy.pool_fixtures import fresh_state
from wire.advisor_checkpoint import read_checkpoint


class Latest:
    def __init__(self, state: State) -> None:
        self.snapshot = Snapshot(state, 1)

    def __call__(self) -> Snapshot:
        return self.snapshot


@pytest.fixture(name="sockets")
def _sockets() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="qaw", dir="/tmp"))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


def wiring_for(sockets: Path, latest: Latest, health: HealthRegistry) -> AdvisorWiring:
    config = AdvisorLinkConfig(
        True, str(sockets / "adv.sock"), str(sockets / "plug.sock"), 300.0, 2.0
    )
    return AdvisorWiring(config, SYSTEM_CLOCK, health, latest, watch_period_s=0.05)


def test_the_watchdog_serves_get_checkpoint_again_when_its_socket_is_removed(sockets: Path):
    latest = Latest(fresh_state())
    wiring = wiring_for(sockets, latest, HealthRegistry(time.monotonic))
    wiring.serve_checkpoint()
    wiring.start_watchdog()
    try:
        assert "reserve" in read_checkpoint(str(sockets / "plug.sock"))
        os.unlink(sockets / "plug.sock")
        deadline = time.monotonic() + 10
        while not (sockets / "plug.sock").exists():
            assert time.monotonic() < deadline, "GetCheckpoint was not served again"
            time.sleep(0.02)
        assert "reserve" in read_checkpoint(str(sockets / "plug.sock"))
    finally:
        wiring.stop()
        wiring.close()


def test_the_fallback_shows_on_healthz_and_in_the_sizing_gauge(sockets: Path):
    latest = Latest(fresh_state())
    health = HealthRegistry(time.monotonic)
    wiring = wiring_for(sockets, latest, health)
    collector = wiring.collector()

    def sized_by() -> dict[str, float]:
        (family,) = [m for m in collector.collect() if m.name == "qrmd_advisor_pools_sized_by"]
        return {s.labels["by"]: s.value for s in family.samples}

    assert sized_by() == {"advisor": 1.0, "requests": 0.0}
    assert not any("pools sized by requests" in r for r in health.check().reasons)
    latest.snapshot = Snapshot(
        apply_all(latest.snapshot.state, [AdvisorSizingSuspended(1.0, 300.0)]), 2
    )
    assert sized_by() == {"advisor": 0.0, "requests": 1.0}
    (reason,) = [r for r in health.check().reasons if "pools sized by requests" in r]
    assert reason.startswith("pools sized by requests: no sys-advisor result applied since ")
    assert reason.endswith("(--cpu-advisor-unhealthy-after 300 s)")
    wiring.close()


@pytest.mark.parametrize(
    ("unhealthy_after_s", "period_s"),
    [
        pytest.param(300.0, 5.0, id="the default limit is checked every 5 s"),
        pytest.param(2.0, 0.2, id="a short limit is checked ten times within it"),
    ],
)
def test_the_silence_tick_period(unhealthy_after_s: float, period_s: float):
    assert silence_tick_period(unhealthy_after_s) == period_s
