"""Stateful property: the StateStore keeps replay == live state == checkpoint + tail
(DESIGN.md, Journal).

Random valid CPU commits (one to three events each), commits whose events do not fit, injected
write, partial-write, fsync, truncate and checkpoint failures (through ``FaultyFileOps``),
forced checkpoints and restarts (close, with or without a final checkpoint, and reopen), for
both durability settings. After every step:

- the live snapshot equals the acknowledged commits applied to the empty state, and its seq
  is their count (a refused commit takes no seq);
- replaying the journal on disk from empty gives the live state, and its records are exactly
  the acknowledged commits (a failed commit is never there, so never replayed);
- the newest checkpoint plus the records after it gives the live state;
- every status the store published is still what it was when published (a frozen value,
  nothing of the store's live counters inside), its counters never went down, and the
  newest one is the store's current status.
"""

from __future__ import annotations

import copy
import itertools
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from actors.state_store import StateStoreCore
from actors.store_messages import CommitOutcomeUnknown, CommitRefused, StoreUnavailable
from actors.store_status import StoreStatus
from journal import Journal, read_records
from policy.state.entries import DEDICATED_CORES, SHARED_CORES, InPool, OwnCPUs
from policy.state.events import (
    ContainerAllocated,
    ContainerRemoved,
    Event,
    PodRemoved,
    PoolRemoved,
    PoolSet,
    RequestQuantitySet,
)
from policy.state.replay import decode_events, replay_records, state_from_checkpoint
from policy.state.sections import State, apply, apply_all, empty_state
from policy.topology.cpuset import CPUSet
from tests.actors.store_helpers import NODE, TOPO, open_store
from tests.journal.helpers import FakeClock, FaultyFileOps
from tests.policy.state_fixtures import container

POOLS = ["share", "batch", "reclaim"]
PODS = ["p1", "p2", "p3", "p4", "p5"]
cpusets = st.integers(min_value=0, max_value=2**16 - 1).map(CPUSet.from_mask)
EVENT_KINDS = ["pool", "shared", "dedicated", "quantity", "remove_container", "remove_pod"]


def next_event(state: State, data: st.DataObject, kind: str) -> Event | None:
    """A random event of ``kind`` that fits ``state``, or None when none can."""
    cpu = state.cpu
    keys = sorted(entry.key for entry in cpu.entries())
    if kind == "pool":
        return PoolSet(data.draw(st.sampled_from(POOLS)), data.draw(cpusets))
    if kind == "shared" and cpu.pools:
        pool = data.draw(st.sampled_from(sorted(cpu.pools)))
        pod, name = data.draw(st.sampled_from(PODS)), data.draw(st.sampled_from(["a", "b"]))
        return ContainerAllocated(container(pod, name, InPool(pool), qos=SHARED_CORES, owner=pool))
    if kind == "dedicated":
        pod, placed = data.draw(st.sampled_from(PODS)), OwnCPUs.of(data.draw(cpusets))
        return ContainerAllocated(container(pod, "d", placed, qos=DEDICATED_CORES))
    if kind == "quantity" and keys:
        return RequestQuantitySet(*data.draw(st.sampled_from(keys)), data.draw(st.floats(0, 8)))
    if kind == "remove_container" and keys:
        return ContainerRemoved(*data.draw(st.sampled_from(keys)))
    if kind == "remove_pod" and keys:
        return PodRemoved(data.draw(st.sampled_from(keys))[0])
    return None


def unused_pool_removal(state: State) -> Event | None:
    used = {e.placement.pool_name for e in state.cpu.entries() if isinstance(e.placement, InPool)}
    free = sorted(set(state.cpu.pools) - used)
    return PoolRemoved(free[0]) if free else None


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = Path(tempfile.mkdtemp(prefix="store-stateful-")) / "journal"
        self.clock = FakeClock()
        self.fs = FaultyFileOps(self.clock)
        self.acked: list[tuple[dict[str, Any], list[Event]]] = []
        self.expected: State = empty_state(TOPO)
        self.durability = "none"
        self.store: StateStoreCore | None = None
        # Each status published by the current store, with a deep copy taken when it came.
        self.published: list[tuple[StoreStatus, StoreStatus]] = []

    def keep_status(self, status: StoreStatus) -> None:
        self.published.append((status, copy.deepcopy(status)))

    def open(self) -> StateStoreCore:
        self.fs.pending.clear()
        self.fs.partial_write_bytes = 0
        self.store = open_store(
            self.directory,
            durability=self.durability,
            clock=self.clock,
            fs=self.fs,
            segment_max_bytes=4096,
            checkpoint_every_records=3,
        )
        self.published = []
        self.store.subscribe_status(self.keep_status)
        return self.store

    @initialize(durability=st.sampled_from(["always", "none"]))
    def start(self, durability: str) -> None:
        self.durability = durability
        self.open()

    def teardown(self) -> None:
        if self.store is not None:
            self.store.close(checkpoint=False)
        shutil.rmtree(self.directory.parent, ignore_errors=True)

    def draw_commit(self, data: st.DataObject) -> tuple[dict[str, Any], list[Event], State]:
        candidate = self.expected
        events: list[Event] = []
        for kind in data.draw(st.lists(st.sampled_from(EVENT_KINDS), min_size=1, max_size=3)):
            event = next_event(candidate, data, kind)
            if event is not None:
                candidate = apply(candidate, event)
                events.append(event)
        cause = {"rpc": "Test", "n": len(self.acked) + 1}
        return cause, events, candidate

    # -- rules -------------------------------------------------------------------------------

    @precondition(lambda self: self.store is not None and self.store.accepts_commits)
    @rule(data=st.data())
    def commit(self, data: st.DataObject) -> None:
        assert self.store is not None
        cause, events, candidate = self.draw_commit(data)
        snapshot = self.store.commit(events, cause)
        assert snapshot.seq == len(self.acked) + 1
        assert snapshot.state == candidate
        self.acked.append((cause, events))
        self.expected = candidate

    @precondition(lambda self: self.store is not None and self.store.accepts_commits)
    @rule(data=st.data())
    def remove_unused_pool(self, data: st.DataObject) -> None:
        assert self.store is not None
        event = unused_pool_removal(self.expected)
        if event is not None:
            cause = {"rpc": "ResidualPools", "n": len(self.acked) + 1}
            self.store.commit([event], cause)
            self.acked.append((cause, [event]))
            self.expected = apply(self.expected, event)

    @precondition(lambda self: self.store is not None and self.store.accepts_commits)
    @rule(
        event=st.sampled_from(
            [ContainerRemoved("ghost", "app"), PodRemoved("ghost"), PoolRemoved("no-such-pool")]
        )
    )
    def events_that_do_not_fit_are_refused_before_writing(self, event: Event) -> None:
        assert self.store is not None
        before = (self.store.snapshot, self.store.status.journal.records_appended)
        with pytest.raises(CommitRefused, match="nothing was written"):
            self.store.commit([share_pool_event(), event], {"rpc": "Bad"})
        assert (self.store.snapshot, self.store.status.journal.records_appended) == before

    @precondition(lambda self: self.store is not None and self.store.accepts_commits)
    @rule(data=st.data(), op=st.sampled_from(["write", "partial_write", "fsync"]))
    def failed_commit_changes_nothing(self, data: st.DataObject, op: str) -> None:
        assert self.store is not None
        if op == "fsync" and self.durability == "none":
            op = "write"  # nothing is fsynced with durability none
        if op == "partial_write":
            self.fs.partial_write_bytes = data.draw(st.integers(1, 40))
            op = "write"
        self.fs.fail(op)
        before = self.store.snapshot
        cause, events, _ = self.draw_commit(data)
        with pytest.raises(CommitRefused) as refused:
            self.store.commit(events, cause)
        assert not isinstance(refused.value, StoreUnavailable)
        # Unhealthy, with the reason, until the next write succeeds (actors.store_refusals).
        assert self.store.snapshot is before and not self.store.status.health.healthy
        assert str(self.store.status.health.reason).startswith("state store refuses commits: ")
        self.fs.partial_write_bytes = 0
        assert not self.fs.pending[op]  # the fault cleared: the next commit may succeed

    @precondition(lambda self: self.store is not None and self.store.accepts_commits)
    @rule(data=st.data())
    def failed_cut_back_makes_the_store_unavailable(self, data: st.DataObject) -> None:
        assert self.store is not None
        self.fs.partial_write_bytes = data.draw(st.integers(0, 40))
        self.fs.fail("write")
        self.fs.fail("truncate")
        before = self.store.snapshot
        cause, events, _ = self.draw_commit(data)
        with pytest.raises((CommitRefused, CommitOutcomeUnknown)) as failed:
            self.store.commit(events, cause)
        if self.fs.pending["truncate"]:
            # The write that failed was a new segment's header (rotation): nothing to cut.
            assert isinstance(failed.value, CommitRefused)
            assert not isinstance(failed.value, StoreUnavailable)
            assert not self.store.status.health.healthy  # until the next write succeeds
            self.fs.pending.clear()
            self.fs.partial_write_bytes = 0
            return
        # The failed bytes may stay: the commit's outcome is unknown, never "refused".
        assert isinstance(failed.value, CommitOutcomeUnknown)
        assert self.store.status.health.healthy is False
        with pytest.raises(StoreUnavailable):
            self.store.commit([share_pool_event()], {"rpc": "Later"})
        assert self.store.snapshot is before

    @precondition(lambda self: self.store is not None and self.store.accepts_commits)
    @rule(fail=st.booleans())
    def checkpoint(self, fail: bool) -> None:
        assert self.store is not None
        failures = self.store.status.checkpoint_failures_total
        if fail:
            self.fs.fail("rename")
        path = self.store.checkpoint()
        self.fs.pending.clear()
        if fail and self.store.snapshot.seq > self.store.status.checkpoint_seq:
            assert path is None
            assert self.store.status.checkpoint_failures_total == failures + 1

    @rule(final_checkpoint=st.booleans())
    def restart(self, final_checkpoint: bool) -> None:
        assert self.store is not None
        self.store.close(checkpoint=final_checkpoint)
        store = self.open()
        assert store.snapshot.seq == len(self.acked)
        assert store.recovery.last_seq == len(self.acked)

    # -- invariants --------------------------------------------------------------------------

    @invariant()
    def live_state_is_the_acknowledged_commits(self) -> None:
        assert self.store is not None
        events = [event for _, events in self.acked for event in events]
        assert self.store.snapshot.state == apply_all(empty_state(TOPO), events)
        assert self.store.snapshot.seq == len(self.acked)

    @invariant()
    def replay_from_empty_equals_live_state(self) -> None:
        assert self.store is not None
        records = list(read_records(str(self.directory)))
        assert [(r.cause, decode_events(r)) for r in records] == self.acked
        state, count, _ = replay_records(empty_state(TOPO), records)
        assert count == len(self.acked)
        assert state == self.store.snapshot.state

    @invariant()
    def checkpoint_plus_tail_equals_live_state(self) -> None:
        assert self.store is not None
        journal, found = Journal.open(
            str(self.directory),
            node_name=NODE,
            topology_fingerprint=TOPO.fingerprint(),
            read_only=True,
        )
        journal.close()
        state = state_from_checkpoint(found.checkpoint_state, found.checkpoint_seq, TOPO)
        state, _, _ = replay_records(state, found.records)
        assert state == self.store.snapshot.state

    @invariant()
    def published_statuses_never_change(self) -> None:
        assert self.store is not None
        assert self.published and self.published[-1][0] is self.store.status
        for status, as_published in self.published:
            assert status == as_published
        counters = [
            (s.commits_total, s.refusals_total, s.checkpoints_total, s.journal.records_appended)
            for s, _ in self.published
        ]
        for before, after in itertools.pairwise(counters):
            assert all(b <= a for b, a in zip(before, after, strict=True)), (before, after)


def share_pool_event() -> PoolSet:
    return PoolSet("share", CPUSet.parse("4-7"))


StoreMachine.TestCase.settings = settings(
    max_examples=120,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestStoreMachine = StoreMachine.TestCase
