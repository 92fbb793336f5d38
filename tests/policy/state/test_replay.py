"""Replaying records: the state, and the refusal, are those of applying each record's events
in turn (DESIGN.md, Journal: replay is deterministic; a record that does not fit is refused,
naming its seq), however the replay groups the records it applies."""

from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from journal import Record
from policy.errors import CodecError, StateError
from policy.state import codec, codec_fast
from policy.state.codec import SECTION_CODECS, encode_event, encode_state
from policy.state.entries import DEDICATED_CORES, RAMPING, InPool, OwnCPUs
from policy.state.events import (
    ContainerAllocated,
    ContainerRemoved,
    Event,
    PodRemoved,
    PoolSet,
    RampCPUsSet,
    RequestQuantitySet,
)
from policy.state.pressure import PRESSURE_SECTION, PressureHistory
from policy.state.replay import (
    LoneAllocation,
    ReplayError,
    SectionReplayer,
    StateReplayer,
    read_events,
    replay_records,
    section_from_checkpoint,
)
from policy.state.sections import BALANCE_SECTION, CPU_SECTION, State, apply_all, empty_state
from tests.policy.state.test_codec import PRIMITIVES, replace_one_field
from tests.policy.state_fixtures import SYNTH_16_2_4, container, cpus

TOPO = SYNTH_16_2_4

PODS = ["p1", "p2", "p3"]
NAMES = ["app", "side"]

allocations = st.builds(
    lambda pod, name, placement, quantity: ContainerAllocated(
        container(
            pod,
            name,
            placement,
            owner=placement.pool_name if isinstance(placement, InPool) else "",
            ramp_up=placement is RAMPING,
            quantity=quantity,
        )
    ),
    st.sampled_from(PODS),
    st.sampled_from(NAMES),
    st.sampled_from([InPool("share"), InPool("gone"), RAMPING, OwnCPUs.of(cpus("1-3"))]),
    st.sampled_from([0.0, 0.5, 1.0]),
)
dedicated = st.builds(
    lambda pod, text: ContainerAllocated(
        container(pod, "app", OwnCPUs.of(cpus(text)), qos=DEDICATED_CORES, owner="dedicated")
    ),
    st.sampled_from(PODS),
    st.sampled_from(["8-9", "15-16"]),  # 16 is not a CPU of the topology: refused
)
others = st.one_of(
    st.sampled_from([PoolSet("share", cpus("1,3-6")), RampCPUsSet(cpus("1,3-15"))]),
    st.builds(ContainerRemoved, st.sampled_from(PODS), st.sampled_from(NAMES)),
    st.builds(PodRemoved, st.sampled_from(PODS)),
    st.builds(RequestQuantitySet, st.sampled_from(PODS), st.just("app"), st.just(2.0)),
)
events = st.one_of(allocations, allocations, allocations, dedicated, others)

START = apply_all(empty_state(TOPO), [PoolSet("share", cpus("1,3-6")), RampCPUsSet(cpus("1,3-15"))])


@st.composite
def journals(draw: st.DrawFn) -> tuple[State, list[list[Event]]]:
    """A start state and records, mostly allocations as a journal is (runs of them are what
    replay may group), all fitting but for, sometimes, one."""
    start = draw(st.sampled_from([START, empty_state(TOPO)]))
    state, batches = start, []
    for _ in range(draw(st.integers(0, 16))):
        record = draw(st.lists(events, min_size=1, max_size=3))
        try:
            state = apply_all(state, record)
        except StateError:
            if draw(st.integers(0, 9)) != 0:
                continue  # keep a record that does not fit now and then only
        batches.append(record)
    return start, batches


def records_of(batches: list[list[Event]]) -> list[Record]:
    return [
        Record(seq, 0.0, 0.0, {}, [encode_event(e) for e in events])
        for seq, events in enumerate(batches, start=1)
    ]


def one_record_at_a_time(state: State, batches: list[list[Event]]) -> State | tuple[int, str]:
    for seq, events in enumerate(batches, start=1):
        try:
            state = apply_all(state, events)
        except StateError as err:
            return seq, str(err)
    return state


@settings(max_examples=400, deadline=None)
@given(journals())
def test_replay_equals_applying_each_record_in_turn_or_refuses_the_same_record(
    journal: tuple[State, list[list[Event]]],
) -> None:
    start, batches = journal
    want = one_record_at_a_time(start, batches)
    if isinstance(want, State):
        state, count, applied = replay_records(start, records_of(batches))
        assert state == want
        assert state.cpu.indexes == want.cpu.indexes
        assert (count, applied) == (len(batches), sum(len(b) for b in batches))
    else:
        seq, message = want
        with pytest.raises(ReplayError) as refused:
            replay_records(start, records_of(batches))
        assert refused.value.seq == seq
        assert message in str(refused.value)


def test_a_refused_allocation_in_a_run_of_allocations_is_named_by_its_record() -> None:
    run = [
        [ContainerAllocated(container("p1", "app", RAMPING, ramp_up=True))],
        [ContainerAllocated(container("p2", "app", InPool("share"), owner="share"))],
        [ContainerAllocated(container("p3", "app", InPool("gone"), owner="gone"))],
        [ContainerAllocated(container("p4", "app", RAMPING, ramp_up=True))],
    ]
    with pytest.raises(ReplayError) as refused:
        replay_records(START, records_of(run))
    assert refused.value.seq == 3
    assert "record 3 does not fit the state rebuilt before it" in str(refused.value)
    assert "placed in pool gone, which does not exist" in str(refused.value)


def test_an_undecodable_record_after_a_refused_one_is_not_what_is_reported() -> None:
    run = [
        [ContainerAllocated(container("p1", "app", InPool("gone"), owner="gone"))],
        [ContainerAllocated(container("p2", "app", RAMPING, ramp_up=True))],
    ]
    records = records_of(run)
    records.append(Record(3, 0.0, 0.0, {}, [{"kind": "NoSuchEvent"}]))
    with pytest.raises(ReplayError) as refused:
        replay_records(START, records)
    assert refused.value.seq == 1


@st.composite
def allocations_then_one_mutated(draw: st.DrawFn) -> list[Record]:
    """Lone allocations (the records replay decodes straight into entries), one of them with
    one field of its event replaced by garbage."""
    run = [[draw(allocations)] for _ in range(draw(st.integers(1, 6)))]
    records = records_of(run)
    mutated = draw(st.integers(0, len(records) - 1))
    event = copy.deepcopy(records[mutated].events[0])
    replace_one_field(draw, event, PRIMITIVES | st.floats(allow_nan=False))
    records[mutated] = Record(mutated + 1, 0.0, 0.0, {}, [event])
    return records


def replay_checked(state: State, records: list[Record]) -> State | tuple[int, str]:
    """Each record decoded by the checked decoder and applied in turn: what replay must give."""
    for record in records:
        try:
            events = [codec._decode_event_checked(raw) for raw in record.events]
            state = apply_all(state, events)
        except (StateError, CodecError) as err:
            return record.seq, str(err)
    return state


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([START, empty_state(TOPO)]), allocations_then_one_mutated())
def test_a_lone_allocation_decoded_straight_or_checked_gives_the_same_state_or_refusal(
    start: State, records: list[Record]
) -> None:
    want = replay_checked(start, records)
    if isinstance(want, State):
        state, count, _ = replay_records(start, records)
        assert state == want and state.cpu.indexes == want.cpu.indexes
        assert count == len(records)
    else:
        seq, message = want
        with pytest.raises(ReplayError) as refused:
            replay_records(start, records)
        assert refused.value.seq == seq
        assert message in str(refused.value)


def replay_outcome(start: State, records: list[Record]) -> object:
    try:
        return replay_records(start, records)
    except ReplayError as err:
        return err.seq, str(err)


@settings(max_examples=300, deadline=None)
@given(journals(), st.booleans())
def test_records_whose_events_were_decoded_as_read_replay_as_their_msgpack(
    journal: tuple[State, list[list[Event]]], mutate: bool
) -> None:
    # The StateStore's recovery hands read_events to the journal; whatever it makes of a
    # record's events, the replay's state (and indexes), or its refusal, are the same.
    start, batches = journal
    records = records_of(batches)
    if mutate and records:  # an ill-shaped allocation among them
        records[-1] = Record(records[-1].seq, 0.0, 0.0, {}, [{"kind": "ContainerAllocated"}])
    read = [Record(r.seq, 0.0, 0.0, {}, read_events(r.events)) for r in records]
    want, got = replay_outcome(start, records), replay_outcome(start, read)
    assert got == want
    if isinstance(want, tuple) and isinstance(want[0], State):
        assert got[0].cpu.indexes == want[0].cpu.indexes  # type: ignore[index]


ALLOCATION = ContainerAllocated(container("p1", "app", OwnCPUs.of(cpus("2-3")), quantity=1.0))


@pytest.mark.parametrize(
    ("events", "decoded"),
    [
        ([encode_event(ALLOCATION)], True),
        ([encode_event(ALLOCATION), encode_event(ALLOCATION)], False),
        ([encode_event(PoolSet("share", cpus("1,3-6")))], False),
        ([{"kind": "ContainerAllocated", "entry": {"pod_uid": "p1"}}], False),
        ([{"kind": "NoSuchEvent"}], False),
        ([], False),
    ],
    ids=[
        "one allocation is kept as its entry, even with cpusets never decoded before",
        "two allocations stay msgpack",
        "another event stays msgpack",
        "an ill-shaped allocation stays msgpack, for the replay to refuse",
        "an unknown event stays msgpack, for the replay to refuse",
        "no event stays as it is",
    ],
)
def test_read_events_keeps_a_lone_allocation_as_its_entry_and_anything_else_as_read(
    events: list[object], decoded: bool
) -> None:
    codec_fast.forget_cpusets()
    kept = read_events(events)
    if decoded:
        assert type(kept) is LoneAllocation and list(kept) == [ALLOCATION.entry]
    else:
        assert kept is events


# -- one owner's section alone (the offline re-runs' replayer) -----------------------------------


@settings(max_examples=100, deadline=None)
@given(journals())
def test_a_section_replayed_alone_is_that_section_of_the_whole_replay(
    journal: tuple[State, list[list[Event]]],
) -> None:
    start, batches = journal
    records = records_of(batches)
    try:
        whole = replay_records(start, records)[0]
    except ReplayError as err:
        with pytest.raises(ReplayError) as alone:
            SectionReplayer(CPU_SECTION, TOPO).apply(start.cpu, records)
        assert alone.value.seq == err.seq
        return
    assert SectionReplayer(CPU_SECTION, TOPO).apply(start.cpu, records) == whole.cpu
    assert SectionReplayer(BALANCE_SECTION).apply(start.balance, records) == whole.balance


@pytest.mark.parametrize("name", sorted(SECTION_CODECS), ids=lambda n: f"the {n} section")
def test_a_checkpoints_section_decodes_alone_to_that_section_of_its_state(name: str) -> None:
    payload = encode_state(START)
    assert section_from_checkpoint(payload, name, 7, TOPO) == START.section(name)
    assert StateReplayer(TOPO).from_checkpoint(payload, 7) == START


@pytest.mark.parametrize(
    ("name", "empty"),
    [
        pytest.param(PRESSURE_SECTION, PressureHistory(), id="a section added later starts empty"),
        pytest.param(BALANCE_SECTION, None, id="a mandatory section missing is refused"),
    ],
)
def test_a_checkpoint_without_the_section(name: str, empty: object) -> None:
    payload = encode_state(START)
    del payload["sections"][name]
    if empty is None:
        with pytest.raises(ReplayError, match=f"checkpoint at seq 7 holds no {name} section"):
            section_from_checkpoint(payload, name, 7)
    else:
        assert section_from_checkpoint(payload, name, 7) == empty


_P1 = ContainerAllocated(container("p1", "app", RAMPING, ramp_up=True))
_P2 = ContainerAllocated(container("p2", "app", InPool("share"), owner="share"))
_P3 = ContainerAllocated(container("p3", "app", RAMPING, ramp_up=True))


@pytest.mark.parametrize(
    "batches",
    [
        pytest.param([[_P1], [_P2], [_P3]], id="a run of allocations"),
        pytest.param([[_P1], [_P2], [_P1], [_P3]], id="a container allocated twice in a run"),
        pytest.param(
            [[_P1], [ContainerRemoved("p1", "app")], [_P1], [_P2]],
            id="a container removed and allocated again",
        ),
        pytest.param(
            [[_P1], [PoolSet("share", cpus("1,3-5"))], [_P2], [_P3]],
            id="a run broken by a pool resize",
        ),
        pytest.param([[_P1], [_P2, _P3], [_P3]], id="a record of two allocations in a run"),
    ],
)
def test_a_run_of_allocations_decoded_as_read_replays_as_one_record_at_a_time(
    batches: list[list[Event]],
) -> None:
    records = records_of(batches)
    read = [Record(r.seq, 0.0, 0.0, {}, read_events(r.events)) for r in records]
    want = one_record_at_a_time(START, batches)
    if isinstance(want, State):
        state, count, applied = replay_records(START, read)
        assert state == want and state.cpu.indexes == want.cpu.indexes
        assert (count, applied) == (len(batches), sum(len(b) for b in batches))
    else:
        seq, message = want
        with pytest.raises(ReplayError) as refused:
            replay_records(START, read)
        assert refused.value.seq == seq and message in str(refused.value)
