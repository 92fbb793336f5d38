"""Journaled decisions re-run from their records alone (DESIGN.md, "Every decision has one
shape"): decode the record's inputs, call the pure function on the state replayed before it,
get the same events and reply; reads commit nothing and depend only on their arguments.

Two journals: one the Allocator writes here through the real StateStore, with a pod source
that lists a running pod (its phase is an input), and the fixture written by qrmd at
``ac84ea9`` (version-1 causes, ``tests/fixtures/journal-ac84ea9/README.md``). Node: spec
cpu-policy §16's ``synthetic:cpus=16,sockets=2,numas=4`` with reserve ``0,2``.
"""

from __future__ import annotations

import dataclasses
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.allocator import AllocatorCore
from actors.allocator_messages import (
    Allocate,
    AllocatorCommand,
    GetResourcePluginOptions,
    GetResourcesAllocation,
    GetTopologyAwareAllocatableResources,
    GetTopologyAwareResources,
    GetTopologyHints,
    RemovePod,
    RemoveResidualPods,
    ResidualRemoval,
    StartPolicy,
)
from actors.state_store import StateStoreCore, StoreConfig
from actors.store_messages import Snapshot
from journal import read_records
from policy.cpu.cause import CAUSE_VERSION, DecisionCause, ResidualPods, decode_cause
from policy.cpu.commands import AllocateInputs, PodPhase
from policy.cpu.context import PolicyContext
from policy.cpu.decide import decide
from policy.cpu.residual_removal import ResidualOutcome
from policy.errors import PolicyError
from policy.state.events import Event, PodRemoved
from policy.state.replay import replay_records
from policy.state.sections import State, apply_all, empty_state
from qrmd.offline import decision_rerun
from qrmd.offline.decision_rerun import RerunError, rerun_in_journal, rerun_record, state_before
from tests.actors.fakes import FakeClock, FakePodSource
from tests.policy.cpu.residual_fixtures import evidence
from tests.policy.decision_fixtures import dedicated, request
from tests.topologies import SYNTH_16_2_4, cpus

CTX = PolicyContext(topology=SYNTH_16_2_4, reserved=cpus("0,2"))
T0 = 1715180645.0
FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "journal-ac84ea9"


class StoreCommitter:
    """The StateStore's core as the Allocator's committer, on this test's thread."""

    def __init__(self, core: StateStoreCore) -> None:
        self.core = core

    def commit(self, events: tuple[Event, ...], cause: Any) -> Snapshot:
        return self.core.commit(events, cause)

    def latest(self) -> Snapshot:
        return self.core.snapshot


@dataclass
class LiveNode:
    """An Allocator on a real journal; ``replies`` holds each committed decision's reply."""

    directory: str
    core: AllocatorCore
    store: StateStoreCore
    clock: FakeClock
    pods: FakePodSource
    replies: dict[int, Any] = dataclasses.field(default_factory=dict)
    asked: list[AllocatorCommand] = dataclasses.field(default_factory=list)

    def handle(self, command: AllocatorCommand) -> Any:
        self.asked.append(command)
        before = self.core.snapshot.seq
        reply = self.core.handle(command)
        if self.core.snapshot.seq != before:
            self.replies[self.core.snapshot.seq] = reply
        return reply


@pytest.fixture(name="live")
def _live(tmp_path: Path) -> Iterator[LiveNode]:
    config = StoreConfig(str(tmp_path), "rerun-node", durability="none")
    store = StateStoreCore.open(config, SYNTH_16_2_4)
    clock = FakeClock(T0)
    pods = FakePodSource()
    core = AllocatorCore(store.snapshot, CTX, StoreCommitter(store), clock.time, pods)
    node = LiveNode(str(tmp_path), core, store, clock, pods)
    try:
        yield node
    finally:
        store.close(checkpoint=False)


def drive(node: LiveNode) -> dict[str, int]:
    """The spec's flow, plus a running pod that joins its pool at once; seqs by step name."""
    seqs: dict[str, int] = {}

    def step(name: str, command: AllocatorCommand) -> None:
        node.handle(command)
        seqs[name] = node.core.snapshot.seq

    step("start", StartPolicy())
    step("allocate unknown pod", Allocate(request("pod-a", cpu=2)))  # ramps up: 1,3-15
    node.clock.advance(1)
    step("allocate dedicated", Allocate(dedicated("pod-d", cpu=2, hint=(3,))))
    node.clock.advance(30)
    step("ramp-up completes", GetResourcesAllocation())  # pod-a joins share (§10.1)
    node.pods.list(node.clock.now - 5, **{"pod-run": "Running"})
    node.clock.advance(1)
    step("allocate running pod", Allocate(request("pod-run", cpu=1)))  # joins share at once
    node.clock.advance(30)
    # The residual checker's evidence: pod-run missed by ten listings that held the others.
    proof = evidence("pod-run", at=node.clock.now - 1, listed=("pod-a", "pod-d"))
    step("residual removal", RemoveResidualPods(proof))
    step("remove pod", RemovePod("pod-a"))
    return seqs


# -- committed decisions re-run from their records ----------------------------------------------


@pytest.mark.parametrize(
    "step",
    [
        pytest.param("allocate unknown pod", id="an Allocate of an unknown pod re-runs the same"),
        pytest.param("allocate dedicated", id="a dedicated Allocate re-runs the same"),
        pytest.param("allocate running pod", id="an Allocate that read a running phase re-runs"),
        pytest.param("ramp-up completes", id="GetResourcesAllocation ending ramp-up re-runs"),
        pytest.param("remove pod", id="a RemovePod re-runs the same"),
    ],
)
def test_a_journaled_decision_re_runs_to_the_same_events_and_reply(
    live: LiveNode, step: str
) -> None:
    seq = drive(live)[step]
    rerun = rerun_in_journal(live.directory, seq, CTX)
    assert rerun.refusal is None and rerun.decision is not None
    assert rerun.recorded  # a committing decision
    assert rerun.same_events
    assert rerun.decision.reply == live.replies[seq]


def test_a_journaled_residual_removal_re_runs_from_its_record_and_its_evidence(
    live: LiveNode,
) -> None:
    seq = drive(live)["residual removal"]
    (sent,) = [c for c in live.asked if isinstance(c, RemoveResidualPods)]
    rerun = rerun_in_journal(live.directory, seq, CTX)
    # The record's cause decodes back into the very evidence the checker sent.
    assert rerun.cause.inputs == ResidualPods(sent.evidence)
    assert rerun.cause.version == CAUSE_VERSION
    assert rerun.same_events and any(isinstance(e, PodRemoved) for e in rerun.recorded)
    assert rerun.decision is not None
    assert rerun.decision.reply.removed == live.replies[seq].removed == ("pod-run",)
    # The evidence decides: without pod-run due, the same state removes nothing.
    before, _ = state_before(live.directory, seq, SYNTH_16_2_4)
    nothing_due = ResidualPods(evidence(at=rerun.cause.now, missing=("pod-run",)))
    assert decide(before, nothing_due, CTX, rerun.cause.now).events == ()


def test_the_pod_phase_the_allocate_read_is_in_its_record(live: LiveNode) -> None:
    seq = drive(live)["allocate running pod"]
    (record,) = read_records(live.directory, from_seq=seq, to_seq=seq)
    assert record.cause["pod"] == {"phase": "Running", "listing_age_s": 6.0}
    cause = decode_cause(record.cause)
    assert isinstance(cause.inputs, AllocateInputs)
    assert cause.inputs.pod == PodPhase("Running", 6.0)
    # The phase decides: re-run as an unknown pod, the container ramps instead of joining.
    before, record = state_before(live.directory, seq, SYNTH_16_2_4)
    unknown = dataclasses.replace(cause.inputs, pod=PodPhase())
    ramped = decide(before, unknown, CTX, cause.now)
    assert ramped.events != rerun_record(record, before, CTX).recorded


def test_the_state_replayed_before_a_record_is_the_live_state_it_was_decided_on(
    live: LiveNode,
) -> None:
    seqs = drive(live)
    live_state = live.store.snapshot.state  # after the removal, the last record
    before_removal, _ = state_before(live.directory, seqs["remove pod"], SYNTH_16_2_4)
    assert before_removal != live_state  # the removal changed it
    live.handle(Allocate(request("pod-b", cpu=1)))
    before_b, _ = state_before(live.directory, live.core.snapshot.seq, SYNTH_16_2_4)
    assert before_b == live_state


def test_a_re_run_starts_from_the_newest_checkpoint_before_the_record(
    live: LiveNode, monkeypatch: pytest.MonkeyPatch
) -> None:
    drive(live)
    assert live.store.checkpoint() is not None  # covers every record so far
    covered = live.core.snapshot.seq
    live.clock.advance(40)
    live.handle(GetResourcesAllocation())
    live.handle(Allocate(request("pod-b", cpu=1)))
    seq = live.core.snapshot.seq
    assert seq > covered
    starts: list[int | None] = []

    def reading(directory: str, from_seq: int | None = None, **kw: Any) -> Any:
        starts.append(from_seq)
        return read_records(directory, from_seq, **kw)

    monkeypatch.setattr(decision_rerun, "read_records", reading)
    rerun = rerun_in_journal(live.directory, seq, CTX)
    assert starts == [covered + 1]  # only the records after the checkpoint were read
    assert rerun.same_events and rerun.decision is not None
    assert rerun.decision.reply == live.replies[seq]


def test_a_record_not_in_the_journal_is_named(live: LiveNode) -> None:
    drive(live)
    with pytest.raises(RerunError, match="no record 99"):
        rerun_in_journal(live.directory, 99, CTX)


# -- the journal written by ac84ea9 (version-1 causes) ------------------------------------------


@pytest.fixture(name="old_journal")
def _old_journal(tmp_path: Path) -> str:
    directory = tmp_path / "journal"
    shutil.copytree(FIXTURE, directory, ignore=shutil.ignore_patterns("README.md"))
    return str(directory)


def test_every_record_of_the_old_journal_re_runs_to_its_events(old_journal: str) -> None:
    seqs = [record.seq for record in read_records(old_journal)]
    assert seqs == list(range(1, 10))
    for seq in seqs:
        rerun = rerun_in_journal(old_journal, seq, CTX)
        assert rerun.cause.version == 1
        assert rerun.same_events, f"record {seq} ({rerun.cause.rpc}) re-ran differently"


def test_old_allocate_causes_decode_with_the_pod_phase_unknown(old_journal: str) -> None:
    causes: list[DecisionCause] = [decode_cause(r.cause) for r in read_records(old_journal)]
    assert [c.rpc for c in causes] == [
        "StartPolicy",
        "Allocate",
        "Allocate",
        "Allocate",
        "GetResourcesAllocation",
        "Allocate",
        "RemovePod",
        "GetResourcesAllocation",
        "RemovePod",
    ]
    allocations = [c.inputs for c in causes if isinstance(c.inputs, AllocateInputs)]
    assert [a.call.request.pod_uid for a in allocations] == ["pod-a", "pod-d", "pod-r", "pod-b"]
    assert all(a.pod == PodPhase("unknown", None) for a in allocations)


def test_the_old_journals_first_allocate_re_runs_to_the_spec_reply(old_journal: str) -> None:
    # §7.3's example: pod unknown, cpu 2 → ramp-up on 1,3-15
    rerun = rerun_in_journal(old_journal, 2, CTX)
    assert rerun.decision is not None and rerun.decision.reply is not None
    allocation = rerun.decision.reply.allocation
    assert allocation is not None and allocation.allocation_result == "1,3-15"


def test_the_old_journals_ramp_up_completion_re_runs_the_same(old_journal: str) -> None:
    # §10.1: the listing at +32 s ends pod-a's ramp-up; pod-a then joins share (§9.10)
    rerun = rerun_in_journal(old_journal, 5, CTX)
    assert rerun.same_events
    names = [type(event).__name__ for event in rerun.recorded]
    assert "RampUpFinished" in names


def test_other_settings_show_up_as_different_events(old_journal: str) -> None:
    # The settings are not journaled: re-running with another reserve does not match.
    other = dataclasses.replace(CTX, reserved=cpus("0-1"))
    assert not rerun_in_journal(old_journal, 1, other).same_events


# -- reads commit nothing and depend only on their arguments ------------------------------------

READS = [
    pytest.param(GetTopologyHints(request("pod-x", cpu=2)), id="GetTopologyHints"),
    pytest.param(GetTopologyHints(dedicated("pod-y", cpu=2)), id="GetTopologyHints dedicated"),
    pytest.param(GetTopologyAwareResources("pod-d", "app"), id="GetTopologyAwareResources"),
    pytest.param(GetTopologyAwareAllocatableResources(), id="allocatable resources"),
    pytest.param(GetResourcePluginOptions(), id="GetResourcePluginOptions"),
]


@pytest.mark.parametrize("read", READS)
def test_a_read_commits_nothing_and_asks_no_pod_source(
    live: LiveNode, read: AllocatorCommand
) -> None:
    drive(live)
    seq, state = live.core.snapshot.seq, live.core.snapshot.state
    asked = live.pods.asked
    live.core.handle(read)
    assert live.core.snapshot.seq == seq and live.store.snapshot.seq == seq
    assert live.core.snapshot.state is state
    assert live.pods.asked == asked


@pytest.mark.parametrize("read", READS)
def test_a_read_depends_only_on_its_arguments(live: LiveNode, read: Any) -> None:
    drive(live)
    state: State = live.core.snapshot.state
    first = decide(state, read, CTX, T0)
    # Another time, another pod listing, a later clock: the same answer.
    live.pods.list(T0 + 500, **{"pod-a": "Pending", "pod-x": "Running"})
    live.clock.advance(1000)
    assert decide(state, read, CTX, T0 + 1000) == first
    assert live.core.handle(read) == first.reply
    assert first.events == ()
    # ... and the state it read is still the one the journal holds.
    replayed, _, _ = replay_records(empty_state(SYNTH_16_2_4), read_records(live.directory))
    assert state == replayed


# -- any sequence of commands: every commit re-runs from its cause -------------------------------


class RecordingCommitter:
    """Applies commits in memory and keeps, per commit, the state before it and the record."""

    def __init__(self, state: State) -> None:
        self.snapshot = Snapshot(state, 0)
        self.commits: list[tuple[State, tuple[Event, ...], dict[str, Any]]] = []

    def commit(self, events: tuple[Event, ...], cause: Any) -> Snapshot:
        before = self.snapshot.state
        # Through msgpack, as the journal stores it.
        stored = msgpack.unpackb(msgpack.packb(cause))
        self.commits.append((before, events, stored))
        self.snapshot = Snapshot(apply_all(before, events), self.snapshot.seq + 1)
        return self.snapshot

    def latest(self) -> Snapshot:
        return self.snapshot


_PODS = st.sampled_from(["pod-a", "pod-b", "pod-c", "pod-d"])
_COMMANDS = st.one_of(
    st.builds(lambda p, c: Allocate(request(p, cpu=c)), _PODS, st.integers(1, 4)),
    st.builds(
        lambda p, c, n: Allocate(dedicated(p, cpu=c, exclusive=False, hint=(n,))),
        _PODS,
        st.integers(1, 3),
        st.integers(0, 3),
    ),
    st.builds(lambda p: Allocate(request(p, cpu=1, qos="reclaimed_cores")), _PODS),
    st.builds(RemovePod, _PODS),
    st.just(GetResourcesAllocation()),
    st.builds(
        lambda due: RemoveResidualPods(evidence(*due, at=T0)),
        st.lists(_PODS, unique=True, max_size=2),
    ),
)
_STEPS = st.lists(
    st.tuples(
        _COMMANDS,
        st.integers(0, 40),  # seconds before the command
        st.dictionaries(_PODS, st.sampled_from(["Pending", "Running"]), max_size=4),
    ),
    max_size=12,
)


@settings(max_examples=40, deadline=None)
@given(steps=_STEPS)
def test_every_commit_of_any_command_sequence_re_runs_from_its_cause(
    steps: list[tuple[AllocatorCommand, int, dict[str, str]]],
) -> None:
    clock = FakeClock(T0)
    pods = FakePodSource()
    committer = RecordingCommitter(empty_state(SYNTH_16_2_4))
    core = AllocatorCore(committer.latest(), CTX, committer, clock.time, pods)
    core.handle(StartPolicy())
    answers: dict[int, Any] = {1: None}  # by the seq of the commit they came with
    for command, wait, phases in steps:
        clock.advance(wait)
        pods.list(clock.now - 1, **phases)
        seq = core.snapshot.seq
        try:
            answer: Any = core.handle(command)
        except PolicyError as err:  # refused: nothing committed, or the §7.2 removal
            answer = str(err)
        if isinstance(answer, ResidualRemoval):  # the Allocator's reply on the decision's
            answer = ResidualOutcome(answer.removed, answer.kept)
        if core.snapshot.seq != seq:
            answers[core.snapshot.seq] = answer
    for seq, (before, events, cause) in enumerate(committer.commits, start=1):
        decoded = decode_cause(cause)
        again = decide(before, decoded.inputs, CTX, decoded.now)
        assert again.events == events
        assert (again.reply if again.error is None else str(again.error)) == answers[seq]
