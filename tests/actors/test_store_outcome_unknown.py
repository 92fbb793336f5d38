"""A failed write the journal cannot cut back has an unknown outcome, never a refusal
(actors.state_store; DESIGN.md, the commit protocol step 3).

When the write (or fsync) of a record fails and truncating the segment back fails too, the
record may be on disk, whole, and the next start replays it. Answering that commit with a
refusal (``CommitRefused``, "nothing was persisted") would be a lie the restart exposes, so it
is answered ``CommitOutcomeUnknown``: the store stops accepting commits (it no longer knows
its journal's tail), reports itself unhealthy with the reason and counts the records apart
from the refusals, and every commit after it is refused with ``StoreUnavailable`` — nothing of
those is written. The next start decides from what the disk holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.allocator import AllocatorCore
from actors.allocator_messages import (
    Allocate,
    AllocatorUnavailable,
    CommandGroup,
    GetResourcesAllocation,
    StartPolicy,
)
from actors.ports.commit import AdoptedSnapshot, StateStoreCommitter
from actors.state_store import InTurnCommitter, StateStoreActor, StateStoreCore
from actors.store_messages import CommitOutcomeUnknown, CommitRefused, StoreUnavailable
from tests.actors.fakes import FakeClock
from tests.actors.store_helpers import open_store, share_pool, shared_container
from tests.actors.test_allocator import CTX, T0
from tests.journal.helpers import FaultyFileOps
from tests.policy.decision_fixtures import request


def failing_cut_back(fs: FaultyFileOps, fault: str, partial: int = 0) -> None:
    """The next ``fault`` (a write or an fsync) fails, and so does the truncation undoing it."""
    fs.partial_write_bytes = partial
    fs.fail(fault)
    fs.fail("truncate")


@pytest.mark.parametrize(
    ("fault", "partial", "replayed"),
    [
        pytest.param(
            "fsync", 0, True, id="a whole record whose fsync failed is replayed at the next start"
        ),
        pytest.param(
            "write", 10, False, id="a torn record is cut as a torn tail at the next start"
        ),
        pytest.param("write", 0, False, id="a write that wrote nothing leaves nothing"),
    ],
)
def test_a_record_that_cannot_be_cut_back_has_an_unknown_outcome(
    tmp_path: Path, fault: str, partial: int, replayed: bool
) -> None:
    fs = FaultyFileOps()
    store = open_store(tmp_path / "j", durability="always", fs=fs)
    store.commit([share_pool()], {"rpc": "Start"})
    before = store.snapshot
    failing_cut_back(fs, fault, partial)
    with pytest.raises(CommitOutcomeUnknown, match="could not be cut") as unknown:
        store.commit([shared_container("p1")], {"rpc": "Allocate"})
    assert not isinstance(unknown.value, CommitRefused)  # it promises nothing
    assert store.snapshot is before  # never published: nothing acknowledged it
    assert not store.accepts_commits
    reason = store.status.health.reason
    assert reason is not None
    assert reason.startswith("state store refuses commits: the journal's tail is unknown")
    assert store.status.commits_outcome_unknown_total == 1
    assert store.status.refusals_total == 0  # not counted as "nothing written"
    # Every later commit is refused, and nothing of it is written: the fault is gone, the
    # refusal stays until a restart.
    with pytest.raises(StoreUnavailable, match="tail is unknown"):
        store.commit([shared_container("p2")], {"rpc": "Allocate"})
    assert store.status.commits_unavailable_total == 1
    assert store.checkpoint_if_due() is None
    store.close()
    reopened = open_store(tmp_path / "j")
    pods = set(reopened.snapshot.state.cpu.pods)
    assert reopened.snapshot.seq == (2 if replayed else 1)
    assert ("p1" in pods) is replayed and "p2" not in pods


def test_a_group_whose_fsync_cannot_be_cut_back_has_an_unknown_outcome(tmp_path: Path) -> None:
    fs = FaultyFileOps()
    store = open_store(tmp_path / "j", durability="always", fs=fs)
    store.commit([share_pool()], {"rpc": "Start"})
    with store.group():
        store.write([shared_container("p1")], {"rpc": "Allocate"})
        store.write([shared_container("p2")], {"rpc": "Allocate"})
        failing_cut_back(fs, "fsync")
        with pytest.raises(CommitOutcomeUnknown, match="records 2-3"):
            store.sync()
        assert store.pending is None
    assert store.snapshot.seq == 1 and store.status.commits_outcome_unknown_total == 2
    store.close()
    # Both records were written whole: the next start replays them.
    assert open_store(tmp_path / "j").snapshot.seq == 3


def test_a_group_write_that_cannot_be_cut_back_breaks_the_group(tmp_path: Path) -> None:
    fs = FaultyFileOps()
    store = open_store(tmp_path / "j", durability="always", fs=fs)
    store.commit([share_pool()], {"rpc": "Start"})
    committer = InTurnCommitter(store)
    with committer.group():
        committer.commit((shared_container("p1"),), {"rpc": "Allocate"})
        failing_cut_back(fs, "write", partial=10)
        with pytest.raises(CommitOutcomeUnknown, match="records 2-3"):
            committer.commit((shared_container("p2"),), {"rpc": "Allocate"})
        # p1's record may be on disk or not: no answer decided on it may be given.
        assert committer.broken
    assert committer.latest().seq == 1 and not store.accepts_commits


@pytest.fixture
def store_and_files(tmp_path: Path) -> Iterator[tuple[StateStoreCore, FaultyFileOps]]:
    fs = FaultyFileOps()
    store = open_store(tmp_path / "j", durability="always", fs=fs)
    yield store, fs
    store.close(checkpoint=False)


def started_allocator(store: StateStoreCore, clock: FakeClock) -> AllocatorCore:
    committer = InTurnCommitter(store)
    allocator = AllocatorCore(committer.latest(), CTX, committer, clock.time)
    allocator.handle(StartPolicy())
    return allocator


def test_kubelet_s_reconcile_is_not_answered_from_a_state_the_disk_may_contradict(
    store_and_files: tuple[StateStoreCore, FaultyFileOps],
) -> None:
    """A refused reconcile answers from the state as it is (nothing was persisted); one whose
    commit may be replayed at the next start must not: its listing could be undone by it."""
    store, fs = store_and_files
    clock = FakeClock(T0)
    allocator = started_allocator(store, clock)
    allocator.handle(Allocate(request("pod-a", cpu=2)))
    clock.advance(31)  # pod-a's ramp-up has ended: the reconcile commits its move to the pool
    failing_cut_back(fs, "fsync")
    with pytest.raises(AllocatorUnavailable, match="outcome unknown"):
        allocator.handle(GetResourcesAllocation())


def test_a_group_of_kubelet_calls_whose_sync_cannot_be_cut_back_answers_none_of_them(
    store_and_files: tuple[StateStoreCore, FaultyFileOps],
) -> None:
    store, fs = store_and_files
    allocator = started_allocator(store, FakeClock(T0))
    published = store.snapshot
    failing_cut_back(fs, "fsync")
    outcomes = allocator.handle(
        CommandGroup((Allocate(request("pod-a", cpu=2)), Allocate(request("pod-b", cpu=2))))
    )
    assert [type(outcome.error) for outcome in outcomes] == [AllocatorUnavailable] * 2
    assert all("outcome unknown" in str(outcome.error) for outcome in outcomes)
    # The Allocator holds the published state again, not the group's unsynced one.
    assert allocator.snapshot is published


def test_the_store_actor_answers_an_unknown_outcome_and_keeps_serving(
    store_and_files: tuple[StateStoreCore, FaultyFileOps],
) -> None:
    store, fs = store_and_files
    store.commit([share_pool()], {"rpc": "Start"})
    actor = StateStoreActor.start(lambda: store)
    try:
        durable = AdoptedSnapshot(StateStoreCommitter(actor, timeout_s=10), store.snapshot)
        failing_cut_back(fs, "fsync")
        with pytest.raises(CommitOutcomeUnknown, match="could not be cut"):
            durable.commit((shared_container("p1"),), {"rpc": "Allocate"})
        # The writer re-reads before deciding again; the store answers, refusing commits.
        durable.resync_if_stale()
        assert durable.snapshot == store.snapshot and durable.snapshot.seq == 1
        with pytest.raises(StoreUnavailable):
            durable.commit((shared_container("p2"),), {"rpc": "Allocate"})
    finally:
        actor.stop()
