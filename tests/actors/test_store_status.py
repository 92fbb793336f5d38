"""What the StateStore publishes about itself: a frozen ``StoreStatus`` at every change, which
no later commit, refusal, checkpoint or failure alters (DESIGN.md, Actors: only immutable
values are shared)."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from actors.state_store import StateStoreActor, StateStoreCore, StoreConfig
from actors.store_messages import (
    Commit,
    CommitOutcomeUnknown,
    CommitRefused,
    GetStatus,
    StoreUnavailable,
)
from actors.store_report import RecoveryReport
from actors.store_status import FsyncSummary, JournalFigures, StoreHealth, StoreStatus
from journal import JournalStats
from policy.state.events import PodRemoved
from tests.actors.store_helpers import NODE, TOPO, open_store, share_pool, shared_container
from tests.journal.helpers import FakeClock, FaultyFileOps

RECOVERY = RecoveryReport("/s", None, 0, 0, 0, 0, None, (), (), 0.0, 0.0)


class Published:
    """A status subscriber that keeps every status it is told."""

    def __init__(self) -> None:
        self.statuses: list[StoreStatus] = []

    def __call__(self, status: StoreStatus) -> None:
        self.statuses.append(status)

    @property
    def last(self) -> StoreStatus:
        return self.statuses[-1]


def subscribed_store(tmp_path: Path, **settings: object) -> tuple[StateStoreCore, Published]:
    fs = FaultyFileOps(FakeClock())
    store = open_store(tmp_path / "j", durability="always", fs=fs, **settings)
    published = Published()
    store.subscribe_status(published)
    return store, published


def test_a_published_status_does_not_change_when_the_store_does(tmp_path: Path) -> None:
    fs = FaultyFileOps(FakeClock())
    store = open_store(tmp_path / "j", durability="always", fs=fs)
    published = Published()
    store.subscribe_status(published)
    store.commit([share_pool()], {"rpc": "Start"})
    status = published.last
    as_published = copy.deepcopy(status)
    assert (status.commits_total, status.journal.records_appended) == (1, 1)
    assert status.journal.fsync.count >= 1
    # The store goes on: more commits, a refusal, a checkpoint, and a journal failed for good.
    store.commit([shared_container("p1")], {"rpc": "Allocate"})
    with pytest.raises(CommitRefused):
        store.commit([PodRemoved("ghost")], {"rpc": "RemovePod"})
    store.checkpoint()
    fs.fail("write")
    fs.fail("truncate")
    with pytest.raises(CommitOutcomeUnknown):
        store.commit([shared_container("p2")], {"rpc": "Allocate"})
    assert status == as_published
    assert status.health.healthy and status.checkpoints_total == 0
    now = store.status
    assert (now.commits_total, now.commits_refused_total, now.checkpoints_total) == (2, 1, 1)
    assert now.journal.records_appended == 2
    assert now.journal.fsync.count > status.journal.fsync.count
    assert not now.health.healthy


@pytest.mark.parametrize(
    ("change", "field"),
    [
        pytest.param(
            lambda s: setattr(s, "commits_total", 99), "commits_total", id="a counter is read-only"
        ),
        pytest.param(
            lambda s: setattr(s.journal, "records_appended", 99),
            "records_appended",
            id="the journal's figures are read-only",
        ),
        pytest.param(
            lambda s: setattr(s.journal.fsync, "count", 99),
            "count",
            id="the fsync summary is read-only",
        ),
        pytest.param(
            lambda s: setattr(s.health, "reason", "x"), "reason", id="the health is read-only"
        ),
    ],
)
def test_nothing_in_a_status_can_be_assigned(
    tmp_path: Path, change: Callable[[StoreStatus], None], field: str
) -> None:
    store, published = subscribed_store(tmp_path)
    store.commit([share_pool()], {"rpc": "Start"})
    with pytest.raises(dataclasses.FrozenInstanceError, match=field):
        change(published.last)


@pytest.mark.parametrize(
    ("act", "counter"),
    [
        pytest.param(
            lambda store, fs: store.commit([shared_container("p1")], {"rpc": "Allocate"}),
            "commits_total",
            id="an acknowledged commit publishes a status counting it",
        ),
        pytest.param(
            lambda store, fs: store.commit([PodRemoved("ghost")], {"rpc": "RemovePod"}),
            "commits_refused_total",
            id="events that do not fit publish a status counting the refusal",
        ),
        pytest.param(
            lambda store, fs: (fs.fail("fsync"), store.commit([share_pool()], {"rpc": "Start"})),
            "commit_failures_total",
            id="a failed fsync publishes a status counting the failure",
        ),
        pytest.param(
            lambda store, fs: store.checkpoint(),
            "checkpoints_total",
            id="a checkpoint publishes a status counting it",
        ),
        pytest.param(
            lambda store, fs: (fs.fail("rename"), store.checkpoint()),
            "checkpoint_failures_total",
            id="a failed checkpoint publishes a status counting it",
        ),
    ],
)
def test_each_change_publishes_a_new_status(
    tmp_path: Path, act: Callable[[StateStoreCore, FaultyFileOps], object], counter: str
) -> None:
    fs = FaultyFileOps(FakeClock())
    store = open_store(tmp_path / "j", durability="always", fs=fs)
    store.commit([share_pool()], {"rpc": "Start"})
    published = Published()
    store.subscribe_status(published)
    before = published.last
    with contextlib.suppress(CommitRefused):  # the refusals are what some rows act out
        act(store, fs)
    after = published.last
    assert after is store.status and after is not before
    assert getattr(after, counter) == getattr(before, counter) + 1
    assert getattr(before, counter) == getattr(copy.deepcopy(before), counter)


def test_health_carries_the_reason_healthz_shows(tmp_path: Path) -> None:
    fs = FaultyFileOps(FakeClock())
    store = open_store(tmp_path / "j", fs=fs)
    store.commit([share_pool()], {"rpc": "Start"})
    assert store.status.health == StoreHealth() and store.status.health.healthy
    fs.fail("write")
    fs.fail("truncate")
    with pytest.raises(CommitOutcomeUnknown):
        store.commit([shared_container("p1")], {"rpc": "Allocate"})
    health = store.status.health
    assert not health.healthy
    assert health.reason is not None
    assert health.reason.startswith("state store refuses commits: ")
    assert "could not be cut" in health.reason
    with pytest.raises(StoreUnavailable):
        store.commit([shared_container("p2")], {"rpc": "Allocate"})
    assert store.status.commits_unavailable_total == 1
    # The write that could not be cut back is no refusal: it may be replayed at the restart.
    assert store.status.commits_outcome_unknown_total == 1
    assert store.status.refusals_total == 1


def test_a_failing_status_subscriber_cannot_fail_a_commit(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_store(tmp_path / "j")

    def broken(status: StoreStatus) -> None:
        if status.last_seq:
            raise RuntimeError("subscriber bug")

    published = Published()
    store.subscribe_status(broken)
    store.subscribe_status(published)  # told after the one that fails
    assert store.commit([share_pool()], {"rpc": "Start"}).seq == 1
    assert published.last.last_seq == 1
    assert "a status subscriber failed at seq 1" in caplog.text


def test_a_new_subscriber_is_told_the_current_status_at_once(tmp_path: Path) -> None:
    store = open_store(tmp_path / "j")
    store.commit([share_pool()], {"rpc": "Start"})
    published = Published()
    store.subscribe_status(published)
    assert published.statuses == [store.status] and published.last.commits_total == 1


def test_the_status_carries_what_recovery_did(tmp_path: Path) -> None:
    store = open_store(tmp_path / "j", checkpoint_every_records=2)
    for pod in ("p1", "p2"):
        store.commit([shared_container(pod)] if pod != "p1" else [share_pool()], {"rpc": "x"})
    store.commit([shared_container("p3")], {"rpc": "x"})
    store.close(checkpoint=False)
    reopened = open_store(tmp_path / "j")
    status = reopened.status
    assert status.recovery is reopened.recovery
    assert (status.last_seq, status.checkpoint_seq, status.recovery.records_replayed) == (3, 2, 1)
    assert status.commits_total == 0  # counters are this store's, since it opened


def test_journal_figures_are_a_copy_of_the_live_counters() -> None:
    live = JournalStats(appends=3, bytes_appended=300, rotations=1)
    live.fsync.count, live.fsync.total_s, live.fsync.max_s = 4, 0.02, 0.01
    figures = JournalFigures.of(live)
    live.appends += 1
    live.fsync.count += 1
    assert (figures.records_appended, figures.bytes_appended, figures.rotations) == (3, 300, 1)
    assert figures.fsync == FsyncSummary(count=4, total_s=0.02, max_s=0.01, slow=0)
    assert figures.fsync.mean_s == pytest.approx(0.005)
    assert FsyncSummary().mean_s == 0.0


def test_the_with_methods_leave_the_status_they_start_from_alone() -> None:
    start = StoreStatus.recovered(RECOVERY, checkpoint_seq=0)
    after = (
        start.with_commit(seq=1, events=2, seconds=0.5)
        .with_refusal()
        .with_commit_failure()
        .with_unavailable()
        .with_checkpoint(1)
        .with_checkpoint_failure()
        .with_health(StoreHealth("state store refuses commits: disk gone"))
    )
    assert start == StoreStatus(recovery=RECOVERY)
    assert (after.last_seq, after.commits_total, after.events_committed_total) == (1, 1, 2)
    assert (after.checkpoints_total, after.checkpoint_seq, after.checkpoint_failures_total) == (
        1,
        1,
        1,
    )
    assert after.refusals_total == 3 and after.commit_seconds_total == 0.5
    assert after.health.reason == "state store refuses commits: disk gone"


#: A status with every field set to a value of its own, so a field a method forgets to copy shows.
_BUSY = StoreStatus(
    recovery=RECOVERY,
    health=StoreHealth("state store refuses commits: disk gone"),
    last_seq=7,
    commits_total=11,
    events_committed_total=13,
    commits_refused_total=17,
    commit_failures_total=19,
    commits_unavailable_total=23,
    commits_outcome_unknown_total=29,
    commit_seconds_total=3.5,
    checkpoints_total=31,
    checkpoint_failures_total=37,
    checkpoint_seq=5,
    journal=JournalFigures(records_appended=41, fsync=FsyncSummary(count=43)),
)


@pytest.mark.parametrize(
    ("changed", "expected"),
    [
        (
            _BUSY.with_commit(seq=8, events=2, seconds=0.25),
            dataclasses.replace(
                _BUSY,
                last_seq=8,
                commits_total=12,
                events_committed_total=15,
                commit_seconds_total=3.75,
            ),
        ),
        (
            _BUSY.with_journal(JournalFigures(records_appended=42)),
            dataclasses.replace(_BUSY, journal=JournalFigures(records_appended=42)),
        ),
    ],
    ids=["a commit changes its four figures and copies the rest", "new journal figures only"],
)
def test_the_per_commit_methods_change_only_their_fields(
    changed: StoreStatus, expected: StoreStatus
) -> None:
    assert changed == expected


def test_the_per_commit_methods_know_every_field() -> None:
    # with_commit and with_journal name every field (they run per commit, without
    # dataclasses.replace): a new field must be added to them, and to _BUSY above.
    names = {field.name for field in dataclasses.fields(StoreStatus)}
    assert names == {
        name for name in names if getattr(_BUSY, name) != getattr(StoreStatus(RECOVERY), name)
    } | {"recovery"}


def test_the_actor_publishes_its_status_and_answers_get_status(tmp_path: Path) -> None:
    config = StoreConfig(str(tmp_path / "j"), NODE, durability="none")
    published = Published()
    committed = threading.Event()

    def subscriber(status: StoreStatus) -> None:
        published(status)
        if status.commits_total:
            committed.set()

    ref = StateStoreActor.start(lambda: StateStoreCore.open(config, TOPO), (), [subscriber])
    try:
        first = ref.ask(GetStatus(), timeout=5)
        assert isinstance(first, StoreStatus) and first.commits_total == 0
        ref.ask(Commit((share_pool(),), {"rpc": "Start"}), timeout=5)
        assert committed.wait(5)
        answered = ref.ask(GetStatus(), timeout=5)
        assert answered is published.last and answered.commits_total == 1
        assert published.statuses[0] == first  # told the opened store's status first
        assert first.commits_total == 0  # and the earlier answer did not move
    finally:
        ref.stop()
