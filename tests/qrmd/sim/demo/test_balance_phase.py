"""The balancer phase fails with one clear line when its round never comes or the journal is
unreadable (the whole phase against a real daemon is in ``tests/integration/test_demo.py``)."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console

from qrmd.sim.demo.balance_phase import BalancePhase, BalancePhaseError
from qrmd.sim.demo.node_files import NumaMetricsCollector
from qrmd.sim.demo.workload import WORKLOAD


def alive() -> None:
    pass


def phase(tmp_path: Path, state_dir: Path, check_alive: Callable[[], None] = alive) -> BalancePhase:
    collector = NumaMetricsCollector(tmp_path / "m.json", 4, "GenuineIntel")
    return BalancePhase(
        Console(file=io.StringIO()),
        state_dir,
        collector=collector,
        cgroup_root=tmp_path / "cgroup",
        eviction_socket=tmp_path / "ev.sock",
        period_s=0.05,
        check_alive=check_alive,
        log_lines=lambda _: [],
        round_timeout_s=0.3,
        cool_down_s=0.0,
    )


def test_no_round_in_time_is_a_timeout_naming_the_round(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    with pytest.raises(BalancePhaseError, match=r"a quiet round: no such round journaled within"):
        phase(tmp_path, state).run(WORKLOAD, 3)
    # The pods' cgroups were written before waiting.
    assert (tmp_path / "cgroup" / "kubepods" / "burstable" / "poduid-web").is_dir()


def test_a_missing_journal_is_named(tmp_path: Path) -> None:
    with pytest.raises(BalancePhaseError, match=r"reading the journal .*does not exist"):
        phase(tmp_path, tmp_path / "nowhere").run(WORKLOAD, 3)


def test_a_dead_daemon_stops_the_wait(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()

    def dead() -> None:
        raise RuntimeError("qrmd run exited with status 1")

    with pytest.raises(RuntimeError, match="exited"):
        phase(tmp_path, state, dead).run(WORKLOAD, 3)
