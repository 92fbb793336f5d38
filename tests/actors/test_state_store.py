"""The StateStore's commit protocol, recovery report, checkpoints and pykka shell
(DESIGN.md, the commit protocol).

Most tests drive ``StateStoreCore`` directly (STYLE.md, Actors); the last few go through the
real pykka actor thread.
"""

from __future__ import annotations

import errno
import gc
import logging
import threading
from pathlib import Path
from typing import Any

import pykka
import pytest

from actors.state_store import StateStoreActor, StateStoreCore, StoreConfig
from actors.store_messages import (
    Commit,
    CommitOutcomeUnknown,
    CommitRefused,
    GetSnapshot,
    Snapshot,
    StoreUnavailable,
)
from journal import Journal, JournalMismatch
from policy.state.codec import encode_event
from policy.state.events import ContainerRemoved, PodRemoved, PoolRemoved
from policy.state.replay import ReplayError
from policy.state.sections import apply_all, empty_state
from policy.topology.synthetic import generate_dummy_cpu_topology
from tests.actors.store_helpers import (
    NODE,
    TOPO,
    cause,
    node_history,
    open_store,
    share_pool,
    shared_container,
)
from tests.journal.helpers import FakeClock, FaultyFileOps, newest_segment


def commit_history(store: StateStoreCore, pods: int = 3) -> Snapshot:
    snapshot = store.snapshot
    for events, why in node_history(pods):
        snapshot = store.commit(events, why)
    return snapshot


def expected_state(pods: int = 3) -> Any:
    return apply_all(empty_state(TOPO), [e for events, _ in node_history(pods) for e in events])


# -- commit ----------------------------------------------------------------------------------


def test_commit_answers_the_new_snapshot_with_the_record_seq(tmp_path: Path) -> None:
    store = open_store(tmp_path / "j")
    first = store.commit([share_pool()], {"rpc": "Start"})
    second = store.commit([shared_container("p1")], cause("Allocate", "p1", "app"))
    assert (first.seq, second.seq) == (1, 2)
    assert store.snapshot is second
    assert second.state.cpu.entry("p1", "app") is not None
    assert store.status.commits_total == 2 and store.status.last_seq == 2


@pytest.mark.parametrize(
    ("fault", "durability", "events", "why", "counter"),
    [
        pytest.param(
            None,
            "none",
            [share_pool(), ContainerRemoved("ghost", "app")],
            {"rpc": "Bad"},
            "commits_refused_total",
            id="events that do not fit are refused before anything is written",
        ),
        pytest.param(
            None,
            "none",
            [PoolRemoved("nothing")],
            {"rpc": "Bad"},
            "commits_refused_total",
            id="removing a pool that does not exist is refused",
        ),
        pytest.param(
            None,
            "none",
            [share_pool()],
            {"rpc": object()},
            "commits_refused_total",
            id="a cause that is not msgpack-able is refused",
        ),
        pytest.param(
            "write",
            "none",
            [share_pool()],
            {"rpc": "Start"},
            "commit_failures_total",
            id="a failed write is refused and cut back",
        ),
        pytest.param(
            "fsync",
            "always",
            [share_pool()],
            {"rpc": "Start"},
            "commit_failures_total",
            id="a failed fsync is refused and cut back, never retried",
        ),
    ],
)
def test_a_refused_commit_changes_nothing(
    tmp_path: Path,
    fault: str | None,
    durability: str,
    events: list[Any],
    why: dict[str, Any],
    counter: str,
) -> None:
    fs = FaultyFileOps()
    store = open_store(tmp_path / "j", durability=durability, fs=fs)
    store.commit([share_pool()], {"rpc": "Start"})
    before = store.snapshot
    appended = store.status.journal.records_appended
    if fault:
        fs.fail(fault)
    with pytest.raises(CommitRefused) as refused:
        store.commit(events, why)
    assert not isinstance(refused.value, StoreUnavailable)
    # A journal that could not write is the store's trouble: unhealthy until the next write
    # succeeds (actors.store_refusals); a refusal of what was asked is the caller's.
    assert store.snapshot is before and store.status.health.healthy == (fault is None)
    assert store.status.journal.records_appended == appended
    assert getattr(store.status, counter) == 1
    # The next commit succeeds and takes the next seq: the refused one left no trace.
    assert store.commit([shared_container("p1")], {"rpc": "Allocate"}).seq == 2
    assert store.status.health.healthy
    store.close(checkpoint=False)
    reopened = open_store(tmp_path / "j")
    assert reopened.snapshot.seq == 2 and reopened.snapshot.state == store.snapshot.state


def test_a_failed_cut_back_refuses_every_later_commit(tmp_path: Path) -> None:
    fs = FaultyFileOps()
    store = open_store(tmp_path / "j", fs=fs)
    store.commit([share_pool()], {"rpc": "Start"})
    fs.fail("write")
    fs.fail("truncate")
    # Its own outcome is unknown (tests/actors/test_store_outcome_unknown.py), not refused.
    with pytest.raises(CommitOutcomeUnknown, match="could not be cut"):
        store.commit([shared_container("p1")], {"rpc": "Allocate"})
    assert store.status.health.healthy is False and not store.accepts_commits
    reason = store.status.health.reason
    assert reason is not None and "could not be cut" in reason
    with pytest.raises(StoreUnavailable):
        store.commit([shared_container("p2")], {"rpc": "Allocate"})
    assert store.status.commits_unavailable_total == 1
    store.close()
    # The next start decides from the disk (the commit protocol, step 3): the failed write
    # left nothing, so the journal ends at the last acknowledged commit.
    reopened = open_store(tmp_path / "j")
    assert reopened.snapshot.seq == 1 and reopened.snapshot.state == store.snapshot.state


def test_a_closed_store_is_unavailable(tmp_path: Path) -> None:
    store = open_store(tmp_path / "j")
    store.close()
    assert not store.accepts_commits and store.status.health.healthy  # stopped, not broken
    with pytest.raises(StoreUnavailable, match="closed"):
        store.commit([share_pool()], {"rpc": "Start"})


def test_subscribers_are_told_each_snapshot_and_cannot_fail_a_commit(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_store(tmp_path / "j")
    seen: list[int] = []

    def broken(snapshot: Snapshot) -> None:
        raise RuntimeError("subscriber bug")

    store.subscribe(lambda snapshot: seen.append(snapshot.seq))
    store.subscribe(broken)
    store.commit([share_pool()], {"rpc": "Start"})
    store.commit([shared_container("p1")], {"rpc": "Allocate"})
    assert seen == [1, 2]
    assert "subscriber failed at seq 1" in caplog.text


# -- checkpoints -----------------------------------------------------------------------------


def test_a_checkpoint_is_written_when_due_and_covers_the_published_state(tmp_path: Path) -> None:
    store = open_store(tmp_path / "j", checkpoint_every_records=4)
    commit_history(store, pods=5)  # 8 commits
    assert store.status.checkpoints_total == 2 and store.status.checkpoint_seq == 8
    assert sorted(p.name for p in (tmp_path / "j").glob("*.ckpt"))[-1] == (
        "checkpoint-0000000000000008.ckpt"
    )


def test_a_failed_checkpoint_is_logged_and_the_commit_still_succeeds(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    fs = FaultyFileOps()
    store = open_store(tmp_path / "j", fs=fs, checkpoint_every_records=1)
    fs.fail("rename")
    snapshot = store.commit([share_pool()], {"rpc": "Start"})
    assert snapshot.seq == 1 and store.snapshot is snapshot
    assert store.status.checkpoint_failures_total == 1 and store.status.checkpoint_seq == 0
    assert "checkpoint at seq 1 failed, commits go on" in caplog.text
    store.commit([shared_container("p1")], {"rpc": "Allocate"})
    assert store.status.checkpoint_seq == 2


def test_time_passing_makes_a_checkpoint_due(tmp_path: Path) -> None:
    clock = FakeClock()
    store = open_store(tmp_path / "j", clock=clock, checkpoint_every_s=60.0)
    store.commit([share_pool()], {"rpc": "Start"})
    assert store.status.checkpoints_total == 0
    clock.advance(61.0)
    store.commit([shared_container("p1")], {"rpc": "Allocate"})
    assert store.status.checkpoint_seq == 2


# -- recovery --------------------------------------------------------------------------------


def test_recovery_replays_the_records_after_the_newest_checkpoint_and_reports_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_store(tmp_path / "j", checkpoint_every_records=4)
    live = commit_history(store, pods=6)  # 9 commits, checkpoints at 4 and 8
    store.close(checkpoint=False)
    caplog.set_level(logging.INFO, logger="actors.state_store")
    reopened = open_store(tmp_path / "j")
    report = reopened.recovery
    assert reopened.snapshot == live and live.state == expected_state(pods=6)
    assert (report.checkpoint_seq, report.records_replayed, report.last_seq) == (8, 1, 9)
    assert report.events_replayed == 1 and report.bytes_truncated == 0
    assert reopened.status.recovery.records_replayed == 1
    assert "recovered" in caplog.text and "checkpoint 8 + 1 records (1 events)" in caplog.text


def test_recovery_cuts_a_torn_tail_and_reports_the_bytes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_store(tmp_path / "j")
    live = commit_history(store)
    store.close(checkpoint=False)
    with newest_segment(tmp_path / "j").open("ab") as segment:
        segment.write(b"QRJF\x40\x00\x00\x00partial")  # a record cut off mid-write
    reopened = open_store(tmp_path / "j")
    assert reopened.snapshot == live
    assert reopened.recovery.bytes_truncated == 15
    assert reopened.recovery.broken_path is not None
    assert reopened.status.recovery.bytes_truncated == 15
    assert "15 bytes truncated (kept in" in caplog.text


def test_a_record_that_does_not_fit_stops_recovery_naming_its_seq(tmp_path: Path) -> None:
    journal, _ = Journal.open(
        str(tmp_path / "j"), node_name=NODE, topology_fingerprint=TOPO.fingerprint()
    )
    journal.append({"rpc": "Start"}, [encode_event(share_pool())])
    journal.append({"rpc": "RemovePod"}, [encode_event(PodRemoved("nobody"))])
    journal.close()
    with pytest.raises(ReplayError, match="record 2 does not fit") as err:
        open_store(tmp_path / "j")
    assert err.value.seq == 2
    # The lock was released: forensics and a repaired restart can open it.
    journal, _ = Journal.open(
        str(tmp_path / "j"), node_name=NODE, topology_fingerprint=TOPO.fingerprint()
    )
    journal.close()


class CloseFails(FaultyFileOps):
    """Every close reports EIO (after releasing the descriptor, as close(2) does)."""

    def close(self, fd: int) -> None:
        super().close(fd)
        raise OSError(errno.EIO, "injected close failure")


def test_a_replay_failure_is_reported_even_when_closing_the_journal_fails(tmp_path: Path) -> None:
    journal, _ = Journal.open(
        str(tmp_path / "j"), node_name=NODE, topology_fingerprint=TOPO.fingerprint()
    )
    journal.append({"rpc": "Start"}, [encode_event(share_pool())])
    journal.append({"rpc": "RemovePod"}, [encode_event(PodRemoved("nobody"))])
    journal.close()
    with pytest.raises(ReplayError, match="record 2 does not fit"):
        open_store(tmp_path / "j", fs=CloseFails())
    # The lock was released all the same: this process can open the directory again.
    journal, _ = Journal.open(
        str(tmp_path / "j"), node_name=NODE, topology_fingerprint=TOPO.fingerprint()
    )
    journal.close()


@pytest.mark.parametrize("outcome", ["recovers", "refuses"])
def test_recovery_leaves_the_garbage_collector_as_it_found_it(tmp_path: Path, outcome: str) -> None:
    """Recovery pauses the cyclic collector (journal.recovery.collector_paused), never for good."""
    journal, _ = Journal.open(
        str(tmp_path / "j"), node_name=NODE, topology_fingerprint=TOPO.fingerprint()
    )
    journal.append({"rpc": "Start"}, [encode_event(share_pool())])
    if outcome == "refuses":
        journal.append({"rpc": "RemovePod"}, [encode_event(PodRemoved("nobody"))])
    journal.close()
    for enabled in (True, False):
        (gc.enable if enabled else gc.disable)()
        try:
            if outcome == "refuses":
                with pytest.raises(ReplayError):
                    open_store(tmp_path / "j")
            else:
                open_store(tmp_path / "j").close(checkpoint=False)
            assert gc.isenabled() is enabled
        finally:
            gc.enable()


def test_another_machines_journal_is_refused(tmp_path: Path) -> None:
    store = open_store(tmp_path / "j")
    commit_history(store)
    store.close()
    other = generate_dummy_cpu_topology(8, 1, 1)
    with pytest.raises(JournalMismatch):
        StateStoreCore.open(StoreConfig(str(tmp_path / "j"), NODE), other, clock=FakeClock())


# -- through the pykka actor -----------------------------------------------------------------


@pytest.fixture
def store_actor(tmp_path: Path) -> Any:
    config = StoreConfig(str(tmp_path / "j"), NODE, durability="none")
    ref = StateStoreActor.start(lambda: StateStoreCore.open(config, TOPO))
    yield ref
    if ref.is_alive():
        ref.stop()


def test_actor_answers_commit_and_get_snapshot(store_actor: Any) -> None:
    snapshot = store_actor.ask(Commit((share_pool(),), {"rpc": "Start"}), timeout=5)
    assert isinstance(snapshot, Snapshot) and snapshot.seq == 1
    assert store_actor.ask(GetSnapshot(), timeout=5) is snapshot


def test_actor_hands_a_refusal_to_the_asker_and_keeps_serving(store_actor: Any) -> None:
    with pytest.raises(CommitRefused, match="nothing was written"):
        store_actor.ask(Commit((PodRemoved("ghost"),), {"rpc": "RemovePod"}), timeout=5)
    with pytest.raises(TypeError, match="does not handle str"):
        store_actor.ask("hello", timeout=5)
    assert store_actor.ask(Commit((share_pool(),), {}), timeout=5).seq == 1


def test_actor_tells_subscribers_and_a_restarted_actor_reloads_from_disk(tmp_path: Path) -> None:
    config = StoreConfig(str(tmp_path / "j"), NODE, durability="none")
    told = threading.Event()
    seen: list[int] = []

    def subscriber(snapshot: Snapshot) -> None:
        seen.append(snapshot.seq)
        told.set()

    ref = StateStoreActor.start(lambda: StateStoreCore.open(config, TOPO), [subscriber])
    last = None
    for events, why in node_history(2):
        last = ref.ask(Commit(tuple(events), why), timeout=5)
    assert told.wait(5) and seen == [1, 2, 3, 4, 5]
    ref.stop()  # closes the journal and releases its lock
    with pytest.raises(pykka.ActorDeadError):
        ref.ask(GetSnapshot(), timeout=5)
    again = StateStoreActor.start(lambda: StateStoreCore.open(config, TOPO))
    try:
        assert again.ask(GetSnapshot(), timeout=5) == last
    finally:
        again.stop()
