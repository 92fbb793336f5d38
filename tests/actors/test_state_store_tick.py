"""Time-due checkpoints on a tick: ``CheckpointIfDue`` writes one when ``checkpoint_every_s``
has passed on the store's clock and a record is not covered yet, and nothing otherwise; a
failure is counted and never stops the actor (DESIGN.md, Journal: checkpoints "every N
records", and qrmd's time limit besides)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pykka
import pytest

from actors.state_store import StateStoreActor, StateStoreCore, StoreConfig
from actors.store_messages import CheckpointIfDue, Commit, GetSnapshot, GetStatus, Snapshot
from actors.store_status import StoreStatus
from tests.actors.store_helpers import NODE, TOPO, share_pool, shared_container
from tests.journal.helpers import FakeClock, FaultyFileOps

EVERY_S = 60.0


def checkpoints(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob("*.ckpt"))


def ckpt(seq: int) -> str:
    return f"checkpoint-{seq:016d}.ckpt"


class StoreUnderTest:
    """A StateStore actor on a fake clock and faulty files; a checkpoint every 60 s only."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.clock = FakeClock()
        self.fs = FaultyFileOps()
        config = StoreConfig(
            str(directory),
            NODE,
            durability="none",
            checkpoint_every_records=1_000,
            checkpoint_every_s=EVERY_S,
        )
        self.core: StateStoreCore | None = None

        def opener() -> StateStoreCore:
            self.core = StateStoreCore.open(config, TOPO, fs=self.fs, clock=self.clock)
            return self.core

        self.ref = StateStoreActor.start(opener)
        self.pods = 0

    def commit(self) -> Snapshot:
        events = (shared_container(f"pod-{self.pods}"),) if self.pods else (share_pool(),)
        self.pods += 1
        snapshot = self.ref.ask(Commit(events, {"rpc": "Allocate"}), timeout=5)
        assert isinstance(snapshot, Snapshot)
        return snapshot

    def tick(self) -> Any:
        """Tell a tick, as the ticker does, then wait until the store has handled it."""
        self.ref.tell(CheckpointIfDue(self.clock.time()))
        self.ref.ask(GetSnapshot(), timeout=5)  # one mailbox: the tick went first
        return self.ref.ask(CheckpointIfDue(self.clock.time()), timeout=5)

    @property
    def status(self) -> StoreStatus:
        """The store's status, asked as any other actor would (never read off the core)."""
        status = self.ref.ask(GetStatus(), timeout=5)
        assert isinstance(status, StoreStatus)
        return status


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StoreUnderTest]:
    under_test = StoreUnderTest(tmp_path / "j")
    yield under_test
    if under_test.ref.is_alive():
        under_test.ref.stop()


def test_a_commit_then_time_past_the_limit_makes_a_tick_write_a_checkpoint(
    store: StoreUnderTest,
) -> None:
    store.commit()
    store.commit()
    store.clock.advance(EVERY_S - 1)
    assert store.tick() is None
    assert checkpoints(store.directory) == []
    store.clock.advance(1)
    store.ref.tell(CheckpointIfDue(store.clock.time()))
    assert store.ref.ask(GetSnapshot(), timeout=5).seq == 2
    assert checkpoints(store.directory) == [ckpt(2)]
    assert (store.status.checkpoints_total, store.status.checkpoint_seq) == (1, 2)


def test_no_commit_after_a_checkpoint_means_no_new_checkpoint(store: StoreUnderTest) -> None:
    store.commit()
    store.clock.advance(EVERY_S)
    assert store.tick() is None  # the told tick wrote it; the asked one finds nothing new
    assert checkpoints(store.directory) == [ckpt(1)]
    for _ in range(3):
        store.clock.advance(EVERY_S * 2)
        assert store.tick() is None
    assert checkpoints(store.directory) == [ckpt(1)]
    assert store.status.checkpoints_total == 1


def test_a_tick_on_a_store_with_nothing_recorded_writes_nothing(store: StoreUnderTest) -> None:
    store.clock.advance(EVERY_S * 10)
    assert store.tick() is None
    assert checkpoints(store.directory) == []
    assert (store.status.checkpoints_total, store.status.checkpoint_failures_total) == (0, 0)


def test_the_time_limit_restarts_at_each_checkpoint(store: StoreUnderTest) -> None:
    store.commit()
    store.clock.advance(EVERY_S)
    store.tick()
    store.commit()
    store.clock.advance(EVERY_S / 2)
    assert store.tick() is None
    assert checkpoints(store.directory) == [ckpt(1)]
    store.clock.advance(EVERY_S / 2)
    assert store.ref.ask(CheckpointIfDue(store.clock.time()), timeout=5) == str(
        store.directory / ckpt(2)
    )


def test_a_failed_checkpoint_is_counted_the_actor_lives_and_the_next_tick_retries(
    store: StoreUnderTest, caplog: pytest.LogCaptureFixture
) -> None:
    store.commit()
    store.clock.advance(EVERY_S)
    store.fs.fail("rename")
    store.ref.tell(CheckpointIfDue(store.clock.time()))
    assert store.ref.ask(GetSnapshot(), timeout=5).seq == 1  # alive and answering
    assert store.status.checkpoint_failures_total == 1
    assert checkpoints(store.directory) == []
    assert "checkpoint at seq 1 failed, commits go on" in caplog.text
    # Still due: the next tick, the fault gone, writes it.
    assert store.ref.ask(CheckpointIfDue(store.clock.time()), timeout=5) == str(
        store.directory / ckpt(1)
    )
    assert store.status.checkpoint_failures_total == 1
    assert store.commit().seq == 2  # and commits went on throughout


def test_an_unexpected_error_while_checkpointing_is_counted_not_fatal(
    store: StoreUnderTest, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    store.commit()
    store.clock.advance(EVERY_S)
    assert store.core is not None

    def broken(*_args: object) -> str:
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(store.core._journal, "write_checkpoint", broken)
    store.ref.tell(CheckpointIfDue(store.clock.time()))
    assert store.ref.ask(GetSnapshot(), timeout=5).seq == 1
    assert store.ref.is_alive()
    assert store.status.checkpoint_failures_total == 1
    assert "bug: checkpoint at seq 1 failed" in caplog.text


def test_an_unhealthy_store_does_not_try_to_checkpoint(store: StoreUnderTest) -> None:
    store.commit()
    store.clock.advance(EVERY_S)
    assert store.core is not None
    store.core._fail("simulated: the journal could not cut back a failed write")
    assert store.tick() is None
    assert checkpoints(store.directory) == []
    assert store.status.checkpoint_failures_total == 0


def test_a_closed_store_ignores_a_tick(tmp_path: Path) -> None:
    clock = FakeClock()
    core = StateStoreCore.open(
        StoreConfig(str(tmp_path / "j"), NODE, durability="none", checkpoint_every_s=EVERY_S),
        TOPO,
        clock=clock,
    )
    core.commit([share_pool()], {"rpc": "Start"})
    core.close(checkpoint=False)
    clock.advance(EVERY_S)
    assert core.checkpoint_if_due() is None
    assert checkpoints(tmp_path / "j") == []


def test_a_stopped_actor_cannot_be_told_a_tick(store: StoreUnderTest) -> None:
    store.ref.stop()
    with pytest.raises(pykka.ActorDeadError):
        store.ref.tell(CheckpointIfDue(0.0))
