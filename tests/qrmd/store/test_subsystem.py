"""The store's checkpoint ticker inside the daemon, in-process on a fake clock: an idle node
writes its checkpoint once ``--checkpoint-every`` has passed, the ticker follows the store
across a restart, starts after it and stops before it."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pykka
import pytest

from actors.allocator_messages import Allocate
from actors.store_messages import GetSnapshot, Snapshot
from qrmd.daemon import Daemon
from qrmd.store.subsystem import (
    MAX_CHECKPOINT_TICK_S,
    STORE_CHILD,
    StoreWiring,
    checkpoint_tick_period,
)
from tests.journal.helpers import FakeClock
from tests.qrmd.test_daemon import Harness, shared, wait_until


@pytest.mark.parametrize(
    ("every_s", "period_s"),
    [
        pytest.param(300.0, 30.0, id="the default 5m is checked every 30 s"),
        pytest.param(60.0, 15.0, id="a minute is checked every quarter minute"),
        pytest.param(1.0, 0.25, id="the shortest interval"),
        pytest.param(3600.0, MAX_CHECKPOINT_TICK_S, id="an hour still every 30 s"),
    ],
)
def test_the_tick_period_is_a_quarter_of_the_interval_at_most_30s(
    every_s: float, period_s: float
) -> None:
    assert checkpoint_tick_period(every_s) == period_s


def test_a_period_for_no_interval_is_refused() -> None:
    with pytest.raises(ValueError, match="must be positive, got 0"):
        checkpoint_tick_period(0.0)


class TickHarness(Harness):
    """The daemon harness on a fake clock, a checkpoint every minute or 1,000 records."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.clock = FakeClock()

    def tick_daemon(self, **flags: Any) -> Daemon:
        config = self.config(
            **{"checkpoint-every": "1m", "checkpoint-every-records": "1000", **flags}
        )
        return Daemon(config, builders=self.builders(), clock=self.clock)

    def checkpoints(self) -> list[str]:
        return sorted(p.name for p in (self.root / "state").glob("*.ckpt"))


@pytest.fixture
def th() -> Iterator[TickHarness]:
    with tempfile.TemporaryDirectory(dir="/tmp", prefix="qt") as root:
        yield TickHarness(Path(root))
    pykka.ActorRegistry.stop_all()


def tick(daemon: Daemon) -> int:
    """One checkpoint tick, handled: the store's seq afterwards."""
    assert daemon.find(StoreWiring) is not None and daemon.supervisor is not None
    assert daemon.find(StoreWiring).tick()
    snapshot = daemon.supervisor.ref(STORE_CHILD).ask(GetSnapshot(), timeout=10)
    assert isinstance(snapshot, Snapshot)
    return snapshot.seq


def test_an_idle_node_writes_its_checkpoint_after_the_interval(th: TickHarness) -> None:
    daemon = th.tick_daemon()
    daemon.start()
    try:
        assert daemon.find(StoreWiring) is not None and daemon.find(StoreWiring).ticker is not None
        assert (
            daemon.find(StoreWiring).ticker.running
            and daemon.find(StoreWiring).ticker.period_s == 15.0
        )
        th.servers[0].allocator.ask(Allocate(shared("pod-a")))
        seq = tick(daemon)
        assert seq >= 1 and th.checkpoints() == []  # recorded, not yet due
        th.clock.advance(59)
        tick(daemon)
        assert th.checkpoints() == []
        th.clock.advance(1)  # a minute since the store opened, and nothing committed since
        assert tick(daemon) == seq
        assert th.checkpoints() == [f"checkpoint-{seq:016d}.ckpt"]
        assert daemon.find(StoreWiring).status is not None  # what the store published, not its core
        assert daemon.find(StoreWiring).status.checkpoint_seq == seq
        th.clock.advance(600)  # idle: nothing new, nothing written
        tick(daemon)
        assert th.checkpoints() == [f"checkpoint-{seq:016d}.ckpt"]
    finally:
        daemon.stop()
    assert daemon.find(StoreWiring) is not None and daemon.find(StoreWiring).ticker is not None
    assert not daemon.find(StoreWiring).ticker.running


def test_the_ticker_reaches_the_restarted_store(th: TickHarness) -> None:
    daemon = th.tick_daemon()
    daemon.start()
    try:
        assert daemon.supervisor is not None and daemon.find(StoreWiring) is not None
        daemon.supervisor.current(STORE_CHILD).stop()  # it writes a checkpoint as it stops
        wait_until(lambda: daemon.supervisor is not None and daemon.supervisor.available())
        before = th.checkpoints()
        th.servers[0].allocator.ask(Allocate(shared("pod-b")))
        seq = tick(daemon)
        assert f"checkpoint-{seq:016d}.ckpt" not in before
        th.clock.advance(60)
        assert tick(daemon) == seq
        assert th.checkpoints() == sorted({*before, f"checkpoint-{seq:016d}.ckpt"})
        assert (
            daemon.find(StoreWiring).ticker is not None
            and daemon.find(StoreWiring).ticker.ticks_missed == 0
        )
    finally:
        daemon.stop()


def test_the_record_limit_reaches_the_store(th: TickHarness) -> None:
    daemon = th.tick_daemon(**{"checkpoint-every-records": "2"})
    daemon.start()
    try:
        for pod in ("pod-a", "pod-b", "pod-c"):
            th.servers[0].allocator.ask(Allocate(shared(pod)))
        seq = tick(daemon)  # no time has passed: only the record count made them due
        assert seq >= 3
        assert th.checkpoints() == [f"checkpoint-{n:016d}.ckpt" for n in range(2, seq + 1, 2)]
    finally:
        daemon.stop()


def test_a_tick_while_the_store_is_down_is_missed_not_an_error(th: TickHarness) -> None:
    daemon = th.tick_daemon()
    daemon.start()
    assert daemon.find(StoreWiring) is not None and daemon.supervisor is not None
    store = daemon.find(StoreWiring)
    ticker = store.ticker
    assert ticker is not None
    daemon.supervisor.stop()  # the actors are gone, the ticker not yet
    assert not store.tick() and ticker.ticks_missed == 1
    daemon.stop()
    assert not ticker.running


def test_the_published_status_follows_the_store_across_a_restart(th: TickHarness) -> None:
    daemon = th.tick_daemon()
    daemon.start()
    try:
        assert daemon.supervisor is not None and daemon.find(StoreWiring) is not None
        th.servers[0].allocator.ask(Allocate(shared("pod-a")))
        seq = tick(daemon)  # the store has handled everything before this
        before = daemon.find(StoreWiring).status
        assert before is not None and before.last_seq == seq and before.commits_total >= 1
        as_published = (before.last_seq, before.commits_total, before.recovery)
        daemon.supervisor.current(STORE_CHILD).stop()
        wait_until(lambda: daemon.supervisor is not None and daemon.supervisor.available())
        after = daemon.find(StoreWiring).status
        assert after is not None and after is not before
        # The restarted store's own figures: it recovered what the old one acknowledged.
        assert after.recovery.last_seq == seq and after.recovery is not before.recovery
        assert after.commits_total == after.last_seq - seq
        assert (before.last_seq, before.commits_total, before.recovery) == as_published
    finally:
        daemon.stop()
