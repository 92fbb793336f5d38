"""``qrmd run`` starts without the cyclic garbage collector and collects once it serves: the
command turns the collector off before its imports (``qrmd.cli``), ``run_daemon`` freezes what
start-up built and turns it on after the start, and the command turns it on whatever happened."""

from __future__ import annotations

import functools
import gc
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import qrmd.commands.run
import qrmd.commands.topology
from qrmd.cli import main
from qrmd.config import load_config
from qrmd.cpu_plugin import subsystem as cpu_plugin
from qrmd.daemon import run_daemon

SYNTH = "synthetic:cpus=16,sockets=2,numas=4"


@pytest.fixture(autouse=True)
def collector_restored() -> Iterator[None]:
    was_enabled = gc.isenabled()
    yield
    gc.unfreeze()
    if was_enabled:
        gc.enable()
    else:
        gc.disable()


class StopsAtStart:
    """A plugin server that notes whether the collector runs, then asks the daemon to stop."""

    def __init__(self, seen: list[bool], *_args: Any) -> None:
        self.seen = seen

    def start(self) -> None:
        self.seen.append(gc.isenabled())
        signal.raise_signal(signal.SIGTERM)  # run_daemon's handler: stop after the start

    def stop(self, grace_s: float) -> None:
        del grace_s


def test_run_daemon_freezes_what_start_up_built_and_collects_once_serving(
    tmp_path: Path,
) -> None:
    config = load_config(
        {
            "topology": SYNTH,
            "state-dir": str(tmp_path / "state"),
            "socket-dir": [str(tmp_path / "k1")],
            "metrics-address": "off",
            "durability": "none",
        }
    )
    seen: list[bool] = []

    def factory(*args: Any) -> StopsAtStart:
        return StopsAtStart(seen, *args)

    gc.disable()  # as `qrmd run` starts (qrmd.cli)

    builders = {"cpu_plugin": functools.partial(cpu_plugin.build, server_factory=factory)}
    assert run_daemon(config, builders=builders) == 0

    assert seen == [False]  # the start ran without the collector
    assert gc.isenabled()
    assert gc.get_freeze_count() > 0  # start-up's objects are out of the collector's walks


def test_qrmd_run_runs_without_the_collector_and_turns_it_on_when_it_returns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[bool] = []

    def command(_args: Any) -> int:
        seen.append(gc.isenabled())
        return 0

    monkeypatch.setattr(qrmd.commands.run, "run", command)
    gc.enable()

    assert main(["run"]) == 0

    assert seen == [False]
    assert gc.isenabled()


def test_a_failed_qrmd_run_leaves_the_collector_on(capsys: pytest.CaptureFixture[str]) -> None:
    gc.enable()

    assert main(["run", "--max-hints", "0"]) == 2

    assert "--max-hints" in capsys.readouterr().err
    assert gc.isenabled()


def test_other_commands_leave_the_collector_on(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []

    def command(_args: Any) -> int:
        seen.append(gc.isenabled())
        return 0

    monkeypatch.setattr(qrmd.commands.topology, "run", command)
    gc.enable()

    assert main(["topology"]) == 0

    assert seen == [True]
    assert gc.isenabled() and gc.get_freeze_count() == 0
