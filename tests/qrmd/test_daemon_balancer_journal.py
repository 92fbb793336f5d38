"""The daemon's balancer journals an idle node's quiet rounds coalesced, as
``--balance-round-summary-every`` says (policy.balance.coalesce), and refuses a bad period
naming the flag."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pykka
import pytest

from qrmd.balancer.subsystem import BalancerWiring
from qrmd.cli import main
from qrmd.config import ConfigError, load_config
from tests.qrmd.test_daemon_balancer import BalancerHarness, state


@pytest.fixture
def bh(tmp_path: Path) -> Iterator[BalancerHarness]:
    yield BalancerHarness(tmp_path)
    pykka.ActorRegistry.stop_all()


def journaled_rounds(directory: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    capsys.readouterr()
    for kind in ("BalanceRoundRecorded", "BalanceRoundsCoalesced"):
        assert main(["journal", "show", str(directory), "--kind", kind, "--json"]) in (0, 1)
    lines = capsys.readouterr().out.splitlines()
    return [e["kind"] for line in lines for e in json.loads(line)["events"]]


@pytest.mark.parametrize(
    ("flags", "records"),
    [
        pytest.param({}, ["BalanceRoundRecorded"], id="by default ten quiet rounds are one record"),
        pytest.param({"balance-round-summary-every": "0s"}, ["BalanceRoundRecorded"] * 10,
                     id="0s journals every round"),
        pytest.param({"balance-round-summary-every": "20s"},
                     ["BalanceRoundRecorded", "BalanceRoundsCoalesced", "BalanceRoundRecorded",
                      "BalanceRoundsCoalesced", "BalanceRoundRecorded"],
                     id="a short period: a summary every four rounds"),
    ],
)  # fmt: skip
def test_quiet_rounds_in_the_daemons_journal(
    bh: BalancerHarness,
    capsys: pytest.CaptureFixture[str],
    flags: dict[str, str],
    records: list[str],
) -> None:
    daemon = bh.balancer_daemon(**flags)
    daemon.start()
    try:
        assert daemon.find(BalancerWiring) is not None
        for _ in range(10):
            bh.clock.advance(5)
            daemon.find(BalancerWiring).tick()
        view = state(daemon)
        assert view.metrics["rounds_stored_total"] == 10
    finally:
        daemon.stop()
    kinds = journaled_rounds(bh.root / "state", capsys)
    assert sorted(kinds) == sorted(records)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        pytest.param("-5s", "--balance-round-summary-every", id="a negative period"),
        pytest.param("soon", "is not a duration", id="not a duration"),
        pytest.param("inf", "is not a finite duration", id="an infinite period"),
    ],
)
def test_a_bad_summary_period_names_the_flag(raw: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config({"balance-round-summary-every": raw, "node-name": "n"})
