"""The Allocator through the real StateStore actor: commits are journalled, and a restart
recovers exactly the state the Allocator served (DESIGN.md, the commit protocol step 5).

Skipped until the StateStore (``actors.state_store``) is on the branch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from actors.allocator import AllocatorActor, AllocatorCore
from actors.allocator_messages import Allocate, GetResourcesAllocation, StartPolicy
from actors.ports.commit import StateStoreCommitter
from actors.store_messages import GetSnapshot, Snapshot
from policy.cpu.replies import AllocationReply
from tests.actors.fakes import FakeClock
from tests.actors.test_allocator import CTX, T0
from tests.policy.decision_fixtures import request
from tests.topologies import SYNTH_16_2_4

state_store = pytest.importorskip("actors.state_store")


def start_store(directory: Path) -> Any:
    config = state_store.StoreConfig(directory=str(directory), node_name="node-a")
    return state_store.StateStoreActor.start(
        lambda: state_store.StateStoreCore.open(config, SYNTH_16_2_4)
    )


def test_allocator_commits_through_the_store_and_a_restart_recovers_its_state(
    tmp_path: Path,
) -> None:
    clock = FakeClock(T0)
    store = start_store(tmp_path)
    try:
        initial = store.ask(GetSnapshot(), timeout=10)
        assert isinstance(initial, Snapshot)
        core = AllocatorCore(initial, CTX, StateStoreCommitter(store), clock.time)
        allocator = AllocatorActor.start(core)
        try:
            allocator.ask(StartPolicy(), timeout=10)
            reply = allocator.ask(Allocate(request("pod-a", cpu=2)), timeout=10)
            assert isinstance(reply, AllocationReply) and reply.allocation is not None
            assert reply.allocation.allocation_result == "1,3-15"
            clock.advance(31)
            allocator.ask(GetResourcesAllocation(), timeout=10)  # ramp-up ends: a third record
            served = core.snapshot
        finally:
            allocator.stop()
        assert served.seq == 3
        assert store.ask(GetSnapshot(), timeout=10) == served
    finally:
        store.stop()
    # the restarted store replays the journal to exactly the state the Allocator served
    store = start_store(tmp_path)
    try:
        recovered = store.ask(GetSnapshot(), timeout=10)
        assert isinstance(recovered, Snapshot)
        assert recovered.seq == served.seq and recovered.state == served.state
        core = AllocatorCore(recovered, CTX, StateStoreCommitter(store), clock.time)
        listing = core.handle(GetResourcesAllocation())
        assert str(listing.pod_resources["pod-a"]["app"].allocation_result) == "1,3-6,9,11-14"
    finally:
        store.stop()
