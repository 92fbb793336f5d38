"""Group commit in the Allocator (``CommandGroup``): calls decided one after another on the
state the ones before them wrote, one fsync for their records, answers only after it, and
every call of the group failed when that fsync fails (DESIGN.md, the commit protocol)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from actors.allocator import AllocatorCore
from actors.allocator_messages import (
    Allocate,
    AllocatorUnavailable,
    CommandGroup,
    GetTopologyHints,
    RemovePod,
    StartPolicy,
)
from actors.state_store import InTurnCommitter, StateStoreCore, StoreConfig
from policy.cpu.replies import AllocationReply
from policy.topology.cpuset import CPUSet
from tests.actors.fakes import FakeClock
from tests.actors.test_allocator import CTX, T0
from tests.journal.helpers import FaultyFileOps
from tests.policy.decision_fixtures import dedicated, request
from tests.topologies import SYNTH_16_2_4


@dataclass
class Node:
    core: AllocatorCore
    store: StateStoreCore
    fs: FaultyFileOps
    directory: Path


def open_store(directory: Path, fs: FaultyFileOps | None = None) -> StateStoreCore:
    config = StoreConfig(directory=str(directory), node_name="node-a")
    return StateStoreCore.open(config, SYNTH_16_2_4, fs=fs)


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    fs = FaultyFileOps()
    store = open_store(tmp_path, fs)
    committer = InTurnCommitter(store)
    core = AllocatorCore(committer.latest(), CTX, committer, FakeClock(T0).time)
    core.handle(StartPolicy())
    yield Node(core, store, fs, tmp_path)
    store.close(checkpoint=False)


def recovered_pods(directory: Path) -> set[str]:
    """The pods a new store recovers from a copy of the journal (the live one holds its lock)."""
    copy = directory.parent / f"{directory.name}-copy"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(directory, copy)
    store = open_store(copy)
    try:
        return set(store.snapshot.state.cpu.pods) - {"share", "reserve", "reclaim"}
    finally:
        store.close(checkpoint=False)


def test_a_group_is_decided_in_order_on_the_records_before_it_and_synced_once(
    node: Node,
) -> None:
    before_seq, before_fsyncs = node.store.snapshot.seq, node.fs.calls["fsync"]
    before_commits = node.store.status.commits_total
    outcomes = node.core.handle(
        CommandGroup(
            (
                Allocate(dedicated("pod-a", cpu=1, exclusive=False, hint=(1,))),
                Allocate(dedicated("pod-b", cpu=1, exclusive=False, hint=(1,))),
                RemovePod("pod-a"),
                GetTopologyHints(dedicated("pod-c", cpu=2, exclusive=False)),
            )
        )
    )
    assert [outcome.error for outcome in outcomes] == [None] * 4
    a, b = (outcome.reply for outcome in outcomes[:2])
    assert isinstance(a, AllocationReply) and isinstance(b, AllocationReply)
    assert a.allocation is not None and b.allocation is not None
    # pod-b was decided on the state with pod-a's record written: not on pod-a's CPUs.
    a_cpus = CPUSet.parse(str(a.allocation.allocation_result))
    assert not a_cpus & CPUSet.parse(str(b.allocation.allocation_result))
    assert node.fs.calls["fsync"] == before_fsyncs + 1
    published = node.store.snapshot
    assert published.seq == before_seq + 3 and node.core.snapshot == published
    assert node.store.status.commits_total == before_commits + 3  # a commit per record
    assert recovered_pods(node.directory) == {"pod-b"}


def test_a_refused_call_in_a_group_answers_its_error_and_the_others_are_served(
    node: Node,
) -> None:
    outcomes = node.core.handle(
        CommandGroup(
            (
                Allocate(request("pod-a", cpu=2)),
                GetTopologyHints(request("pod-a", "sidecar", cpu=2, qos="no-such-level")),
                Allocate(request("pod-b", cpu=2)),
            )
        )
    )
    assert outcomes[0].error is None and outcomes[2].error is None
    assert outcomes[1].error is not None and not isinstance(outcomes[1].error, AllocatorUnavailable)
    assert recovered_pods(node.directory) == {"pod-a", "pod-b"}


@pytest.mark.parametrize(
    ("failing", "calls"),
    [
        pytest.param("fsync", 3, id="the group's one fsync fails"),
        pytest.param("write", 3, id="the last record of the group cannot be written"),
    ],
)
def test_when_the_group_cannot_be_made_durable_every_call_fails_and_none_is_kept(
    node: Node, failing: str, calls: int
) -> None:
    durable = node.core.snapshot
    commands = tuple(Allocate(request(f"pod-{i}", cpu=1)) for i in range(calls))
    if failing == "write":
        # The first two records are written; the third's write fails and cuts them back.
        original_write = node.fs.write
        writes = iter(range(100))

        def write(fd: int, data: bytes) -> int:
            if next(writes) == 2:
                node.fs.fail("write")
            return original_write(fd, data)

        node.fs.write = write  # type: ignore[method-assign]
    else:
        node.fs.fail("fsync")
    outcomes = node.core.handle(CommandGroup(commands))
    assert all(isinstance(o.error, AllocatorUnavailable) for o in outcomes)
    assert node.core.snapshot == durable == node.store.snapshot
    assert recovered_pods(node.directory) == set()
    # The next call is served as usual: nothing of the failed group lingers.
    reply = node.core.handle(Allocate(request("pod-0", cpu=1)))
    assert isinstance(reply, AllocationReply)
    assert recovered_pods(node.directory) == {"pod-0"}
