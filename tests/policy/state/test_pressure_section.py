"""The ``cpu_pressure`` section: its events round-trip through msgpack, replaying them equals
the live history, checkpoints keep it, and garbage raises ``CodecError`` and nothing else."""

from __future__ import annotations

import copy

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.decision import Event
from policy.errors import CodecError, StateError
from policy.state.codec import decode_event, decode_state, encode_event, encode_state
from policy.state.pressure import LoadSample, MetricRing, PressureHistory
from policy.state.pressure.events import (
    PRESSURE_EVENT_TYPES,
    LoadEvictionOffered,
    LoadEvictionPoolSet,
    LoadHistoryCleared,
    LoadSamplesCollected,
    SuppressionTimersSet,
)
from policy.state.sections import apply_all, empty_state
from tests.policy.state_fixtures import SYNTH_16_2_4

COLLECTED = LoadSamplesCollected(
    time=1000.0,
    ring_size=2,
    expired=(("pod-z", "app"), ("isolation-x", "")),
    containers=(("pod-a", "app", LoadSample(1000.0, 3.5)),),
    pools=(("share", LoadSample(1000.0, 3.5, 18.0, 10.0)),),
)
ONE_OF_EACH: list[Event] = [
    COLLECTED,
    LoadEvictionPoolSet("share"),
    LoadEvictionOffered(1030.0, "share", ("pod-a",)),
    SuppressionTimersSet((("batch/a", 1000.0),), (("batch/a", "current pool ..."),)),
    LoadHistoryCleared("restart"),
]


def test_every_event_type_is_exercised() -> None:
    assert {type(e) for e in ONE_OF_EACH} == set(PRESSURE_EVENT_TYPES)


@pytest.mark.parametrize("event", ONE_OF_EACH, ids=lambda e: type(e).__name__)
def test_event_round_trip_through_msgpack(event: Event) -> None:
    data = msgpack.unpackb(msgpack.packb(encode_event(event)))
    assert decode_event(data) == event


def test_replay_builds_the_history_and_a_checkpoint_keeps_it() -> None:
    state = apply_all(empty_state(SYNTH_16_2_4), ONE_OF_EACH[:4])
    history = state.cpu_pressure
    assert history.pool_rings["share"] == MetricRing(2, (LoadSample(1000.0, 3.5, 18.0, 10.0),))
    assert history.last_eviction_time == 1030.0 and history.eviction_pool == ""
    assert dict(history.tolerance_since) == {"batch/a": 1000.0}
    encoded = msgpack.unpackb(msgpack.packb(encode_state(state)))
    assert decode_state(encoded, SYNTH_16_2_4) == state


def test_a_cleared_history_keeps_the_cool_down_and_the_timers() -> None:
    history = apply_all(empty_state(SYNTH_16_2_4), ONE_OF_EACH).cpu_pressure
    assert not history.pool_rings and not history.container_rings
    assert history.last_eviction_time == 1030.0
    assert dict(history.tolerance_since) == {"batch/a": 1000.0}


def test_a_ring_keeps_its_newest_samples_and_ignores_a_second_push_at_one_time() -> None:
    ring = MetricRing(2)
    for t, v in ((1.0, 1.0), (2.0, 2.0), (2.0, 9.0), (3.0, 3.0)):
        ring = ring.push(LoadSample(t, v))
    assert [s.value for s in ring.samples] == [2.0, 3.0]
    with pytest.raises(StateError, match="at least 1 sample"):
        MetricRing(0)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param(
            {**encode_event(COLLECTED), "ring_size": 0},
            "LoadSamplesCollected.ring_size: expected a ring size",
            id="a ring of no samples",
        ),
        pytest.param(
            {**encode_event(COLLECTED), "pools": [["share", [1, 2, 3]]]},
            r"LoadSamplesCollected.pools\[0\]\[1\]: expected \[time, value",
            id="a sample without its lower bound",
        ),
        pytest.param(
            {"kind": "LoadEvictionOffered", "time": "noon", "pool": "share", "pod_uids": []},
            "LoadEvictionOffered.time: expected a number",
            id="a time that is not a number",
        ),
    ],
)
def test_malformed_events_name_the_field(data: object, message: str) -> None:
    with pytest.raises(CodecError, match=message):
        decode_event(data)


PRIMITIVES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([encode_event(e) for e in ONE_OF_EACH]), st.data())
def test_garbage_events_raise_codec_error_and_nothing_else(
    valid: dict, data: st.DataObject
) -> None:  # type: ignore[type-arg]
    encoded = copy.deepcopy(valid)
    target: object = encoded
    while True:
        keys = sorted(target) if isinstance(target, dict) else list(range(len(target)))  # type: ignore[arg-type]
        key = data.draw(st.sampled_from(keys))
        child = target[key]  # type: ignore[index]
        if isinstance(child, dict | list) and child and data.draw(st.booleans()):
            target = child
            continue
        target[key] = data.draw(PRIMITIVES)  # type: ignore[index]
        break
    try:
        event = decode_event(encoded)
    except CodecError:
        return
    assert decode_event(encode_event(event)) == event


def test_an_empty_history_is_the_default_section() -> None:
    assert empty_state(SYNTH_16_2_4).cpu_pressure == PressureHistory()


def test_a_checkpoint_from_before_the_section_decodes_with_it_empty() -> None:
    state = apply_all(empty_state(SYNTH_16_2_4), ONE_OF_EACH[:2])
    data = encode_state(state)
    del data["sections"]["cpu_pressure"]
    assert decode_state(data, SYNTH_16_2_4).cpu_pressure == PressureHistory()
