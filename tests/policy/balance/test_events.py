"""The balance state section: its events, their apply, their codec, and replay (memory-balancer
§6.1, §6.3; DESIGN.md, the commit protocol step 4)."""

from __future__ import annotations

import contextlib
import copy
from dataclasses import replace
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.balance import (
    BalanceInfo,
    BalanceLevel,
    BalancePod,
    BalancerState,
    BalanceStatus,
    BandwidthLevel,
    EvictPod,
    NumaInfo,
    NumaLatencyInfo,
    run_round,
    take_advice,
    take_eviction,
)
from policy.balance.events import (
    BALANCE_EVENT_TYPES,
    BalanceAdviceTaken,
    BalanceEvent,
    BalanceEvictionTaken,
    BalanceRoundFailed,
    BalanceRoundRecorded,
    BalanceRoundsCoalesced,
    apply_balance_event,
)
from policy.errors import CodecError, StateError
from policy.state.codec import decode_event, decode_state, encode_event, encode_state
from policy.state.events import Event
from policy.state.sections import BALANCE_SECTION, apply, apply_all, empty_state
from tests.policy.balance.examples import EX2_B, EX2_L, EX2_PODS, NOW, GiB, R, make_inputs
from tests.policy.state_fixtures import SYNTH_16_2_4

INPUTS = make_inputs(EX2_L, EX2_B, EX2_PODS)
R0 = run_round(BalancerState(), INPUTS)[1].record
assert R0 is not None
EVICT_ONLY = run_round(
    BalancerState(),
    make_inputs([90], [50], [R("r1", {0: GiB})], table={0: [(0, 10)]}, pools={"reclaim": (0,)}),
)[1].record
assert EVICT_ONLY is not None

RECORDED = BalanceRoundRecorded(R0, INPUTS.to_json())
FAILED = BalanceRoundFailed({"now": NOW, "numaMetrics": []}, "failed to find any dest numa")
ADVICE = BalanceAdviceTaken(NOW)
EVICTION = BalanceEvictionTaken(NOW)
COALESCED = BalanceRoundsCoalesced(
    12, NOW + 5, NOW + 60, {"0": {"readLatency": [40.0, 45.5], "readWriteBandwidth": [90, 100]}}
)
ONE_OF_EACH: list[BalanceEvent] = [RECORDED, FAILED, ADVICE, EVICTION, COALESCED]


def test_every_event_type_is_exercised_and_names_the_balance_section() -> None:
    assert {type(e) for e in ONE_OF_EACH} == set(BALANCE_EVENT_TYPES)
    assert all(cls.section == BALANCE_SECTION == "balance" for cls in BALANCE_EVENT_TYPES)


def test_the_empty_state_has_an_empty_balance_section() -> None:
    assert empty_state(SYNTH_16_2_4).balance == BalancerState()


def test_applying_follows_the_planners_transitions() -> None:
    state = apply_all(empty_state(SYNTH_16_2_4), [RECORDED, FAILED])
    assert state.balance == BalancerState(current=R0)
    advised = apply(state, ADVICE).balance
    assert advised == take_advice(BalancerState(current=R0))[0]
    evicted = apply(apply(state, ADVICE), EVICTION).balance
    assert evicted == take_eviction(advised, ())[0]
    assert evicted.last == evicted.current, "the flag shows through last (§6.1)"
    assert state.cpu == empty_state(SYNTH_16_2_4).cpu, "the CPU section is untouched"


def test_a_newer_round_keeps_last_and_its_flags() -> None:
    later = replace(R0, detect_time=NOW + 30)
    state = apply_all(
        empty_state(SYNTH_16_2_4),
        [RECORDED, ADVICE, BalanceRoundRecorded(later, {}), BalanceEvictionTaken(NOW + 30)],
    ).balance
    assert state.current == replace(later, evict_executed=True)
    assert state.last == replace(R0, balance_executed=True)


@pytest.mark.parametrize(
    ("before", "event", "message"),
    [
        pytest.param([], ADVICE, "no stored round", id="advice before any round"),
        pytest.param([], EVICTION, "no stored round", id="eviction before any round"),
        pytest.param(
            [RECORDED],
            BalanceAdviceTaken(NOW + 1),
            "names the round detected at 2026-11-29T23:25:22.5Z, but the stored round was "
            "detected at 2026-11-29T23:25:21.5Z",
            id="advice of another round",
        ),
        pytest.param([RECORDED, ADVICE], ADVICE, "already taken", id="advice taken twice"),
        pytest.param([RECORDED, EVICTION], EVICTION, "already taken", id="eviction taken twice"),
        pytest.param(
            [BalanceRoundRecorded(EVICT_ONLY, {})],
            BalanceAdviceTaken(EVICT_ONLY.detect_time),
            "does not exist",
            id="advice of an eviction-only round",
        ),
        pytest.param(
            [],
            BalanceRoundRecorded(replace(R0, balance_executed=True), {}),
            "already taken",
            id="a round recorded as taken",
        ),
    ],
)
def test_events_that_do_not_fit_raise_and_change_nothing(
    before: list[Event], event: Event, message: str
) -> None:
    state = apply_all(empty_state(SYNTH_16_2_4), before)
    with pytest.raises(StateError, match=message):
        apply(state, event)
    with pytest.raises(StateError, match="not an event of the balance section"):
        apply_balance_event(BalancerState(), FakeCPUEvent())


class FakeCPUEvent(Event):
    __slots__ = ()
    section = "cpu"


@pytest.mark.parametrize("event", ONE_OF_EACH, ids=lambda e: type(e).__name__)
def test_event_round_trip_through_msgpack(event: BalanceEvent) -> None:
    data = msgpack.unpackb(msgpack.packb(encode_event(event)))
    assert data["kind"] == type(event).__name__
    assert decode_event(data) == event


def test_a_recorded_round_reads_like_the_reference_log() -> None:
    data = encode_event(RECORDED)
    assert data["record"]["detectTime"] == "2026-11-29T23:25:21.5Z"
    assert data["record"]["status"] == "prepareSuccess"
    assert data["inputs"]["now"] == NOW


def _set(path: tuple[Any, ...], value: Any):  # type: ignore[no-untyped-def]
    def damage(data: dict[str, Any]) -> dict[str, Any]:
        data = copy.deepcopy(data)
        target = data
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        return data

    return damage


@pytest.mark.parametrize(
    ("event", "damage", "message"),
    [
        pytest.param(RECORDED, _set(("record", "status"), "done"), "record.status",
                     id="unknown status"),
        pytest.param(RECORDED, _set(("inputs",), [1]), "inputs: expected a map",
                     id="inputs not a map"),
        pytest.param(RECORDED, _set(("inputs", "pods"), {1: 2}), "keys must be strings",
                     id="inputs with a number key"),
        pytest.param(FAILED, _set(("error",), 3), "error: expected a string", id="error number"),
        pytest.param(ADVICE, _set(("detect_time",), "now"), "detect_time",
                     id="detect time text"),
        pytest.param(EVICTION, _set(("detect_time",), -1.0), "detect_time",
                     id="detect time before 1970"),
        pytest.param(ADVICE, _set(("extra",), 1), "unknown field 'extra'", id="extra field"),
        pytest.param(COALESCED, _set(("rounds",), 0), "rounds: expected a count of at least 1",
                     id="a summary of no rounds"),
        pytest.param(COALESCED, _set(("rounds",), True), "rounds: expected a count",
                     id="a summary counting a boolean"),
        pytest.param(COALESCED, _set(("last_time",), "later"), "last_time",
                     id="a summary's time as text"),
        pytest.param(COALESCED, _set(("metrics",), [1]), "metrics: expected a map",
                     id="a summary's metrics not a map"),
    ],
)  # fmt: skip
def test_malformed_events_name_the_field(event: Event, damage: Any, message: str) -> None:
    with pytest.raises(CodecError, match=message):
        decode_event(damage(encode_event(event)))


def test_state_round_trip_keeps_current_and_last() -> None:
    state = apply_all(empty_state(SYNTH_16_2_4), [RECORDED, ADVICE, EVICTION])
    data = msgpack.unpackb(msgpack.packb(encode_state(state)))
    assert set(data["sections"]) == {"cpu", "balance", "advisor", "cpu_pressure"}
    assert decode_state(data, SYNTH_16_2_4) == state


def test_a_malformed_balance_section_names_the_field() -> None:
    data = encode_state(apply(empty_state(SYNTH_16_2_4), RECORDED))
    data["sections"]["balance"]["current"]["totalRSS"] = "lots"
    with pytest.raises(CodecError, match=r"sections\.balance\.current\.totalRSS"):
        decode_state(data, SYNTH_16_2_4)
    del data["sections"]["balance"]
    with pytest.raises(CodecError, match="missing balance"):
        decode_state(data, SYNTH_16_2_4)


# -- properties ---------------------------------------------------------------------------

# Unix seconds from 2001 to 2096 with at most nanosecond digits, as the clock gives them.
times = st.integers(10**18, 4 * 10**18).map(lambda ns: ns / 1e9)
amounts = st.floats(0, 1e12, allow_nan=False)
numa_ids = st.integers(0, 7)
numas = st.builds(NumaLatencyInfo, numa_ids, amounts, amounts)
names = st.text("abcdefgh-0123", min_size=1, max_size=8)


@st.composite
def records(draw: st.DrawFn) -> BalanceInfo:
    source = draw(st.none() | numas)
    evict = () if source is None else draw(st.lists(st.builds(EvictPod, names, names, names),
                                                    max_size=2).map(tuple))  # fmt: skip
    return BalanceInfo(
        detect_time=draw(times),
        evict_pods=evict,
        balance_pods=draw(
            st.lists(
                st.builds(
                    BalancePod,
                    names,
                    names,
                    names,
                    st.lists(names, min_size=1, max_size=3).map(tuple),
                    amounts,
                    st.lists(numa_ids, max_size=3).map(tuple),
                ),
                max_size=3,
            ).map(tuple)
        ),
        dest_numas=draw(
            st.none()
            | st.lists(
                st.builds(NumaInfo, numa_ids, amounts, amounts, st.integers(1, 40)), max_size=3
            ).map(tuple)
        ),
        need_balance=draw(st.booleans()),
        bandwidth_pressure=draw(st.booleans()),
        balance_level=draw(st.sampled_from(BalanceLevel)),
        total_rss=draw(amounts),
        max_latency_numa=draw(st.none() | numas),
        max_bandwidth_numa=draw(st.none() | numas),
        raw_numa_latency_info=draw(st.lists(numas, max_size=3).map(tuple)),
        max_latency_numa_bandwidth_level=draw(st.sampled_from(BandwidthLevel)),
        source_numa=source,
        status=draw(st.sampled_from(BalanceStatus)),
        failed_reason=draw(st.text(max_size=20)),
    )


plain = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | amounts | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                 max_size=3),
    max_leaves=10,
)  # fmt: skip
inputs_maps = st.dictionaries(st.text(max_size=6), plain, max_size=4)


@st.composite
def histories(draw: st.DrawFn) -> list[BalanceEvent]:
    """Events as a balancer commits them: rounds recorded or failed, offers taken once."""
    events: list[BalanceEvent] = []
    state = BalancerState()
    for _ in range(draw(st.integers(0, 8))):
        choice = draw(st.sampled_from(["record", "fail", "advice", "evict", "coalesce"]))
        current = state.current
        event: BalanceEvent | None = None
        if choice == "record":
            event = BalanceRoundRecorded(draw(records()), draw(inputs_maps))
        elif choice == "fail":
            event = BalanceRoundFailed(draw(inputs_maps), draw(st.text(max_size=20)))
        elif choice == "advice" and current is not None and take_advice(state)[1] is not None:
            event = BalanceAdviceTaken(current.detect_time)
        elif choice == "evict" and current is not None and not current.evict_executed:
            event = BalanceEvictionTaken(current.detect_time)
        elif choice == "coalesce":
            event = BalanceRoundsCoalesced(draw(st.integers(1, 10**6)), NOW, NOW + 5, {})
        if event is not None:
            events.append(event)
            state = apply_balance_event(state, event)
    return events


@settings(max_examples=60, deadline=None)
@given(histories())
def test_replay_from_the_journal_equals_the_live_state_and_the_checkpoint(
    events: list[BalanceEvent],
) -> None:
    live = empty_state(SYNTH_16_2_4)
    journal: list[bytes] = []
    for event in events:
        live = apply(live, event)
        journal.append(msgpack.packb(encode_event(event)))
    replayed = apply_all(
        empty_state(SYNTH_16_2_4), [decode_event(msgpack.unpackb(raw)) for raw in journal]
    )
    assert replayed == live
    checkpoint = msgpack.unpackb(msgpack.packb(encode_state(live)))
    assert decode_state(checkpoint, SYNTH_16_2_4) == live


@settings(max_examples=60, deadline=None)
@given(records(), inputs_maps)
def test_recorded_rounds_round_trip(record: BalanceInfo, inputs: dict[str, Any]) -> None:
    event = BalanceRoundRecorded(record, inputs)
    assert decode_event(msgpack.unpackb(msgpack.packb(encode_event(event)))) == event


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from([type(e).__name__ for e in ONE_OF_EACH]),
    st.dictionaries(
        st.sampled_from(
            [
                "record",
                "inputs",
                "error",
                "detect_time",
                "rounds",
                "first_time",
                "last_time",
                "metrics",
            ]
        ),
        plain,
    ),
)
def test_garbage_raises_only_codec_error(kind: str, fields: dict[str, Any]) -> None:
    with contextlib.suppress(CodecError):
        decode_event({"kind": kind, **fields})
