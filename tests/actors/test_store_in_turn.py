"""Commits in the writer's own turn (``InTurnCommitter``): the same protocol as the store's
``Commit``, one hop fewer (actors.state_store; DESIGN.md, the commit protocol).

The Allocator as the daemon wires it commits this way; the store's actor keeps checkpoints,
readers and the other writers, so the two paths share the core under its lock.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from actors.allocator import AllocatorActor, AllocatorCore
from actors.allocator_messages import (
    Allocate,
    AllocatorUnavailable,
    GetResourcesAllocation,
    StartPolicy,
)
from actors.state_store import InTurnCommitter, StateStoreActor, StateStoreCore, StoreConfig
from actors.store_messages import (
    CheckpointIfDue,
    Commit,
    CommitInTurn,
    GetSnapshot,
    Snapshot,
    StoreUnavailable,
)
from policy.cpu.replies import AllocationReply
from tests.actors.fakes import FakeClock
from tests.actors.test_allocator import CTX, T0
from tests.policy.decision_fixtures import request
from tests.topologies import SYNTH_16_2_4


def start_store(directory: Path, **settings: Any) -> Any:
    config = StoreConfig(directory=str(directory), node_name="node-a", **settings)
    return StateStoreActor.start(lambda: StateStoreCore.open(config, SYNTH_16_2_4))


def in_turn(store: Any) -> InTurnCommitter:
    committer = store.ask(CommitInTurn(), timeout=10)
    assert isinstance(committer, InTurnCommitter)
    return committer


def test_an_allocator_committing_in_its_turn_is_journalled_and_a_restart_recovers_its_state(
    tmp_path: Path,
) -> None:
    clock = FakeClock(T0)
    store = start_store(tmp_path)
    try:
        committer = in_turn(store)
        core = AllocatorCore(committer.latest(), CTX, committer, clock.time)
        allocator = AllocatorActor.start(core)
        try:
            allocator.ask(StartPolicy(), timeout=10)
            reply = allocator.ask(Allocate(request("pod-a", cpu=2)), timeout=10)
            assert isinstance(reply, AllocationReply) and reply.allocation is not None
            clock.advance(31)
            allocator.ask(GetResourcesAllocation(), timeout=10)
            served = core.snapshot
        finally:
            allocator.stop()
        # The store's own readers see what was committed in the Allocator's turn.
        assert served.seq == 3
        assert store.ask(GetSnapshot(), timeout=10) == served
    finally:
        store.stop()
    store = start_store(tmp_path)
    try:
        recovered = store.ask(GetSnapshot(), timeout=10)
        assert isinstance(recovered, Snapshot)
        assert (recovered.seq, recovered.state) == (served.seq, served.state)
    finally:
        store.stop()


def test_once_the_store_stopped_a_commit_in_turn_is_refused_and_kubelet_hears_unavailable(
    tmp_path: Path,
) -> None:
    clock = FakeClock(T0)
    store = start_store(tmp_path)
    committer = in_turn(store)
    core = AllocatorCore(committer.latest(), CTX, committer, clock.time)
    core.handle(StartPolicy())
    store.stop()
    with pytest.raises(StoreUnavailable, match="closed"):
        committer.commit((), {"rpc": "test"})
    with pytest.raises(AllocatorUnavailable, match="not committed"):
        core.handle(Allocate(request("pod-a", cpu=2)))
    # Nothing reached the disk after the stop: a new store holds StartPolicy's record only.
    store = start_store(tmp_path)
    try:
        recovered = store.ask(GetSnapshot(), timeout=10)
        assert recovered.seq == core.snapshot.seq
        assert "pod-a" not in recovered.state.cpu.pods
    finally:
        store.stop()


def test_commits_in_turn_and_through_the_mailbox_at_once_keep_one_order_of_records(
    tmp_path: Path,
) -> None:
    # A checkpoint every 7 records: the ticks' checkpoints interleave with both writers too.
    store = start_store(tmp_path, checkpoint_every_records=7, durability="none")
    per_writer = 60
    seqs: dict[str, list[int]] = {"in turn": [], "mailbox": []}
    try:
        committer = in_turn(store)

        def write_in_turn() -> None:
            for i in range(per_writer):
                seqs["in turn"].append(committer.commit((), {"writer": "in turn", "i": i}).seq)

        def write_through_mailbox() -> None:
            for i in range(per_writer):
                snapshot = store.ask(Commit((), {"writer": "mailbox", "i": i}), timeout=10)
                seqs["mailbox"].append(snapshot.seq)
                store.tell(CheckpointIfDue())

        writers = [
            threading.Thread(target=write_in_turn),
            threading.Thread(target=write_through_mailbox),
        ]
        for writer in writers:
            writer.start()
        for writer in writers:
            writer.join()
        last = store.ask(GetSnapshot(), timeout=10).seq
    finally:
        store.stop()
    every = sorted(seqs["in turn"] + seqs["mailbox"])
    assert every == list(range(1, 2 * per_writer + 1))
    assert seqs["in turn"] == sorted(seqs["in turn"])
    assert last == 2 * per_writer
    store = start_store(tmp_path)
    try:
        assert store.ask(GetSnapshot(), timeout=10).seq == last
    finally:
        store.stop()
