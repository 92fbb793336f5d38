"""StateStoreCommitter (actors.ports.commit): the three outcomes of a commit ask.

A small pykka actor stands in for the StateStore: it answers ``Commit`` and ``GetSnapshot`` as
the protocol says (DESIGN.md, the commit protocol), and can refuse, hold a commit until told to
go on, or answer nonsense.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pykka
import pytest

from actors.ports.commit import AdoptedSnapshot, CommitOutcomeUnknown, StateStoreCommitter
from actors.store_messages import (
    Commit,
    CommitRefused,
    GetSnapshot,
    Snapshot,
    StoreUnavailable,
)
from policy.state.events import PoolSet
from policy.state.sections import apply_all, empty_state
from policy.topology.cpuset import CPUSet
from tests.actors.fakes import ApplyingCommitter
from tests.topologies import SYNTH_16_2_4

RESERVE = (PoolSet("reserve", CPUSet.parse("0,2")),)


class Switches:
    """What the test tells the stand-in: ``refuse``, ``unknown``, ``garble``, or ``hold`` a
    commit."""

    def __init__(self) -> None:
        self.refuse = False
        self.unknown = False
        self.garble = False
        self.hold = threading.Event()
        self.hold.set()


class StoreStandIn(pykka.ThreadingActor):
    """Applies commits in memory; its ``Switches`` change its next answer."""

    def __init__(self, switches: Switches) -> None:
        super().__init__()
        self.snapshot = Snapshot(empty_state(SYNTH_16_2_4), 0)
        self.switches = switches

    def on_receive(self, message: Any) -> Any:
        match message:
            case Commit(events, _cause):
                self.switches.hold.wait(timeout=10)
                if self.switches.refuse:
                    raise StoreUnavailable("commit refused: the journal's tail is unknown")
                if self.switches.unknown:
                    raise CommitOutcomeUnknown("record 1 could not be cut back")
                if self.switches.garble:
                    return "ok"
                state = apply_all(self.snapshot.state, events)
                self.snapshot = Snapshot(state, self.snapshot.seq + 1)
                return self.snapshot
            case GetSnapshot():
                return self.snapshot
        raise TypeError(type(message).__name__)


@pytest.fixture
def store() -> Iterator[tuple[pykka.ActorRef[StoreStandIn], Switches]]:
    switches = Switches()
    ref = StoreStandIn.start(switches)
    yield ref, switches
    if ref.is_alive():
        ref.stop()


def test_commit_returns_the_stores_snapshot(
    store: tuple[pykka.ActorRef[StoreStandIn], Switches],
) -> None:
    ref, _ = store
    committer = StateStoreCommitter(ref, timeout_s=10)
    snapshot = committer.commit(RESERVE, {"rpc": "StartPolicy"})
    assert snapshot.seq == 1 and str(snapshot.state.cpu.pools["reserve"]) == "0,2"
    assert committer.latest() == snapshot


def test_a_refusal_reaches_the_writer_unchanged(
    store: tuple[pykka.ActorRef[StoreStandIn], Switches],
) -> None:
    ref, stand_in = store
    stand_in.refuse = True
    with pytest.raises(StoreUnavailable, match="tail is unknown"):
        StateStoreCommitter(ref).commit(RESERVE, {})


def test_an_unknown_outcome_the_store_answers_reaches_the_writer_unchanged(
    store: tuple[pykka.ActorRef[StoreStandIn], Switches],
) -> None:
    ref, stand_in = store
    stand_in.unknown = True
    with pytest.raises(CommitOutcomeUnknown, match="could not be cut back"):
        StateStoreCommitter(ref).commit(RESERVE, {})


def test_no_answer_in_time_is_an_unknown_outcome_and_latest_sees_what_landed(
    store: tuple[pykka.ActorRef[StoreStandIn], Switches],
) -> None:
    ref, stand_in = store
    stand_in.hold.clear()
    committer = StateStoreCommitter(ref, timeout_s=0.05)
    with pytest.raises(CommitOutcomeUnknown, match=r"within 0\.05 s"):
        committer.commit(RESERVE, {})
    stand_in.hold.set()  # the store gets to the commit after all
    assert StateStoreCommitter(ref, timeout_s=10).latest().seq == 1


def test_a_stopped_store(store: tuple[pykka.ActorRef[StoreStandIn], Switches]) -> None:
    ref, _ = store
    ref.stop()
    committer = StateStoreCommitter(ref)
    with pytest.raises(CommitOutcomeUnknown, match="stopped"):
        committer.commit(RESERVE, {})
    with pytest.raises(StoreUnavailable, match="GetSnapshot"):
        committer.latest()


def test_an_answer_that_is_not_a_snapshot(
    store: tuple[pykka.ActorRef[StoreStandIn], Switches],
) -> None:
    ref, stand_in = store
    stand_in.garble = True
    with pytest.raises(TypeError, match="answered Commit with str, not Snapshot"):
        StateStoreCommitter(ref).commit(RESERVE, {})


@pytest.mark.parametrize("timeout_s", [0, -1.0, float("nan")])
def test_timeout_must_be_positive(timeout_s: float) -> None:
    with pytest.raises(ValueError, match="commit timeout must be positive"):
        StateStoreCommitter(pykka.ActorRef.__new__(pykka.ActorRef), timeout_s)


def test_refused_is_the_base_of_unavailable_and_an_unknown_outcome_is_no_refusal() -> None:
    assert issubclass(StoreUnavailable, CommitRefused)
    assert not issubclass(CommitOutcomeUnknown, CommitRefused)


def test_adopted_snapshot_adopts_a_commit_keeps_a_refusal_and_re_reads_after_silence() -> None:
    initial = empty_state(SYNTH_16_2_4)
    store = ApplyingCommitter(initial)
    held = AdoptedSnapshot(store, Snapshot(initial, 0))

    held.commit(RESERVE, {"rpc": "test"})
    assert held.snapshot == store.snapshot and held.snapshot.seq == 1

    store.refuse_next()
    with pytest.raises(CommitRefused, match="disk full"):
        held.commit(RESERVE, {"rpc": "test"})
    held.resync_if_stale()
    assert held.snapshot.seq == 1, "a refusal persisted nothing; nothing to re-read"

    store.apply_next_silently()
    with pytest.raises(CommitOutcomeUnknown):
        held.commit(RESERVE, {"rpc": "test"})
    assert held.snapshot.seq == 1, "no answer: nothing adopted yet"
    held.resync_if_stale()
    assert held.snapshot == store.snapshot and held.snapshot.seq == 2
