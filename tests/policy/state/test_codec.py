"""Events and states to msgpack-able primitives and back; garbage raises CodecError only."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
import re
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.errors import CodecError
from policy.state import codec, codec_fast
from policy.state.codec import (
    SCHEMA_VERSION,
    decode_event,
    decode_state,
    encode_event,
    encode_state,
)
from policy.state.entries import DEDICATED_CORES, RAMPING, ContainerEntry, InPool, OwnCPUs
from policy.state.events import (
    CPU_EVENT_TYPES,
    ContainerAllocated,
    ContainerPlaced,
    ContainerRemoved,
    ContainerReRamped,
    Event,
    PodRemoved,
    PoolRemoved,
    PoolSet,
    RampCPUsSet,
    RampUpFinished,
    RequestQuantitySet,
    TimestampReset,
)
from policy.state.sections import apply_all, empty_state
from policy.topology.cpuset import CPUSet
from policy.topology.synthetic import generate_dummy_cpu_topology
from tests.policy.state.checkpoint_forms import encode_state_as_before
from tests.policy.state_fixtures import SYNTH_16_2_4, container, cpus

SIDECAR = ContainerEntry(
    pod_uid="pod-d",
    container_name="side",
    container_type="SIDECAR",
    container_index=3,
    placement=OwnCPUs(cpus("1,8-9"), CPUSet.uninitialized()),
    labels={},
    annotations=None,
    qos_level=DEDICATED_CORES,
    request_quantity=0.5,
)

ONE_OF_EACH: list[Event] = [
    PoolSet("share", cpus("1,3-6")),
    PoolSet("reclaim", cpus("")),
    RampCPUsSet(CPUSet.uninitialized()),
    ContainerAllocated(container("pod-a", "app", InPool("share"), owner="share")),
    ContainerAllocated(container("pod-b", "app", RAMPING, ramp_up=True, quantity=2.5)),
    ContainerAllocated(SIDECAR),
    ContainerPlaced("pod-a", "app", OwnCPUs(cpus("1"), cpus("3")), "share"),
    RampUpFinished("pod-b", "app"),
    ContainerReRamped("pod-a", "app", "2024-05-08 15:04:05 +0000 UTC", cpus("1,3-15")),
    TimestampReset("pod-d", "side", "x"),
    RequestQuantitySet("pod-d", "side", 7.0),
    ContainerRemoved("pod-d", "side"),
    PodRemoved("pod-b"),
    PoolRemoved("reclaim"),
]


def test_every_event_type_is_exercised() -> None:
    assert {type(e) for e in ONE_OF_EACH} == set(CPU_EVENT_TYPES)


@pytest.mark.parametrize("event", ONE_OF_EACH, ids=lambda e: type(e).__name__)
def test_event_round_trip_through_msgpack(event: Event) -> None:
    data = encode_event(event)
    assert data["kind"] == type(event).__name__
    packed = msgpack.packb(data)
    assert decode_event(msgpack.unpackb(packed)) == event


#: The msgpack bytes of ``ONE_OF_EACH``'s encodings as the journal has always written them
#: (before the codec wrote events through per-class field tables): records stay byte-identical.
ONE_OF_EACH_PACKED_SHA256 = "5f4e188d51c955b00205a70d4b0124ad11ae26be94fbef0c39bb37f15aab1745"


def test_events_pack_to_the_bytes_the_journal_always_wrote() -> None:
    packed = msgpack.packb([encode_event(event) for event in ONE_OF_EACH], use_bin_type=True)
    assert hashlib.sha256(packed).hexdigest() == ONE_OF_EACH_PACKED_SHA256


@pytest.mark.parametrize("event", ONE_OF_EACH, ids=lambda e: type(e).__name__)
def test_an_event_is_its_kind_then_its_fields_in_declaration_order(event: Event) -> None:
    data = encode_event(event)
    assert list(data) == ["kind", *(f.name for f in dataclasses.fields(event))]
    if isinstance(event, ContainerAllocated):
        assert list(data["entry"]) == [f.name for f in dataclasses.fields(ContainerEntry)]


def test_null_and_empty_maps_and_nil_sets_are_kept_apart() -> None:
    data = encode_event(ContainerAllocated(SIDECAR))
    entry = data["entry"]
    assert entry["labels"] == {} and entry["annotations"] is None
    assert entry["placement"] == {"kind": "own", "result": "1,8-9", "original": "nil"}
    back = decode_event(data)
    assert isinstance(back, ContainerAllocated)
    assert back.entry.labels is not None and len(back.entry.labels) == 0
    assert back.entry.annotations is None
    assert isinstance(back.entry.placement, OwnCPUs)
    assert not back.entry.placement.original.is_initialized


def test_state_round_trip_rebuilds_indexes() -> None:
    state = empty_state(SYNTH_16_2_4)
    for event in ONE_OF_EACH[:6]:
        state = apply_all(state, [event])
    data = msgpack.unpackb(msgpack.packb(encode_state(state)))
    assert data["schema"] == SCHEMA_VERSION
    back = decode_state(data, SYNTH_16_2_4)
    assert back == state
    assert back.cpu.indexes == state.cpu.indexes


def encoded_state() -> dict[str, Any]:
    """A state in the form checkpoints had before the columnar containers: still read, and
    damage to it still refused naming the field."""
    state = apply_all(empty_state(SYNTH_16_2_4), ONE_OF_EACH[:6])
    return msgpack.unpackb(msgpack.packb(encode_state_as_before(state)))


def _set(path: tuple[Any, ...], value: Any):  # type: ignore[no-untyped-def]
    def damage(data: dict[str, Any]) -> dict[str, Any]:
        data = copy.deepcopy(data)
        target = data
        for key in path[:-1]:
            target = target[key]
        if value is _DELETE:
            del target[path[-1]]
        else:
            target[path[-1]] = value
        return data

    return damage


_DELETE = object()
_CPU = ("sections", "cpu")
_FIRST = (*_CPU, "containers", 0)


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        pytest.param(_set(("schema",), 99), "state.schema: version 99", id="another schema"),
        pytest.param(_set(("topology",), "abc"), "state.topology", id="another machine"),
        pytest.param(_set((*_CPU, "pools", "share"), "1-x"), "pools.share", id="bad pool cpuset"),
        pytest.param(
            _set((*_CPU, "pools", "share"), "0-99999999999"), "exceeds 65535", id="huge cpu id"
        ),
        pytest.param(_set((*_CPU, "ramp_cpus"), 7), "ramp_cpus: expected a string", id="ramp int"),
        pytest.param(_set((*_FIRST, "ramp_up"), "yes"), "containers[0].ramp_up", id="bool field"),
        pytest.param(
            _set((*_FIRST, "container_index"), -1),
            "containers[0].container_index",
            id="negative index",
        ),
        pytest.param(
            _set((*_FIRST, "placement"), {"kind": "teleported"}),
            "unknown placement",
            id="placement",
        ),
        pytest.param(_set((*_FIRST, "labels"), {"a": 1}), "containers[0].labels", id="label value"),
        pytest.param(_set((*_FIRST, "extra"), 1), "unknown field 'extra'", id="unknown field"),
        pytest.param(_set((*_FIRST, "pod_name"), _DELETE), "missing pod_name", id="missing field"),
        pytest.param(
            _set((*_FIRST, "placement", "pool"), "gone"), "which does not exist", id="missing pool"
        ),
        pytest.param(
            _set((*_CPU, "containers", 1), None), "containers[1]: expected a map", id="null entry"
        ),
        pytest.param(
            _set((*_CPU, "containers"), 7),
            "sections.cpu.containers: expected a map of columns, got int",
            id="containers neither columns nor a list",
        ),
        pytest.param(_set(("sections", "cpu"), _DELETE), "missing cpu", id="no cpu section"),
    ],
)
def test_damaged_state_is_refused_naming_the_field(damage, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(CodecError, match=re.escape(message)):
        decode_state(damage(encoded_state()), SYNTH_16_2_4)


def test_duplicate_container_is_refused() -> None:
    data = encoded_state()
    data["sections"]["cpu"]["containers"].append(data["sections"]["cpu"]["containers"][0])
    with pytest.raises(CodecError, match="appears twice"):
        decode_state(data, SYNTH_16_2_4)


def test_state_from_another_topology_is_refused() -> None:
    with pytest.raises(CodecError, match=r"state\.topology: written for topology"):
        decode_state(encoded_state(), generate_dummy_cpu_topology(8, 1, 2))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        pytest.param([], "event: expected a map", id="not a map"),
        pytest.param({}, "event.kind: expected a string", id="no kind"),
        pytest.param({"kind": "PodEvicted"}, "unknown event kind", id="unknown kind"),
        pytest.param({"kind": "PodRemoved"}, "PodRemoved: missing pod_uid", id="missing field"),
        pytest.param({"kind": "PodRemoved", "pod_uid": 3}, "PodRemoved.pod_uid", id="wrong type"),
        pytest.param(
            {
                "kind": "RequestQuantitySet",
                "pod_uid": "p",
                "container_name": "c",
                "request_quantity": True,
            },
            "request_quantity: expected a number",
            id="bool is not a number",
        ),
        pytest.param(
            {"kind": "PoolSet", "name": "s", "cpuset": "1,2", "why": "x"},
            "unknown field 'why'",
            id="extra field",
        ),
    ],
)
def test_malformed_events_name_the_field(data: object, message: str) -> None:
    with pytest.raises(CodecError, match=message):
        decode_event(data)


PRIMITIVES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats()
    | st.text(max_size=12)
    | st.binary(max_size=8)
    | st.sampled_from(["nil", "", "0-3", "1-2-3", "kind", "own", "in_pool", "ramping"]),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.text(max_size=8) | st.sampled_from(["kind", "pool"]), inner, max_size=4
        )
    ),
    max_leaves=20,
)
VALID_EVENTS = [encode_event(e) for e in ONE_OF_EACH]


def replace_one_field(
    draw: st.DrawFn, data: dict[str, Any], garbage: st.SearchStrategy[Any]
) -> None:
    """Replace one field of ``data`` (possibly nested) by a value drawn from ``garbage``."""
    target = data
    while True:
        key = draw(st.sampled_from(sorted(target)))
        if isinstance(target[key], dict) and target[key] and draw(st.booleans()):
            target = target[key]
            continue
        target[key] = draw(garbage)
        return


@st.composite
def mutated_event(draw: st.DrawFn) -> object:
    """A valid encoded event with one field (possibly nested) replaced by garbage."""
    data = copy.deepcopy(draw(st.sampled_from(VALID_EVENTS)))
    replace_one_field(draw, data, PRIMITIVES)
    return data


@settings(max_examples=300, deadline=None)
@given(st.one_of(PRIMITIVES, mutated_event()))
def test_garbage_events_raise_codec_error_and_nothing_else(data: object) -> None:
    try:
        event = decode_event(data)
    except CodecError:
        return
    assert decode_event(encode_event(event)) == event  # what decodes is a well-formed event


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_garbage_states_raise_codec_error_and_nothing_else(data: st.DataObject) -> None:
    encoded = encoded_state()
    target = encoded
    while True:
        key = data.draw(
            st.sampled_from(sorted(target) if isinstance(target, dict) else range(len(target)))
        )
        child = target[key]
        if isinstance(child, dict | list) and child and data.draw(st.booleans()):
            target = child
            continue
        target[key] = data.draw(PRIMITIVES)
        break
    with contextlib.suppress(CodecError):  # decoding either works or raises CodecError
        decode_state(encoded, SYNTH_16_2_4)


def test_a_cpuset_text_decoded_again_is_the_set_it_decodes_to_and_garbage_fails_each_time() -> None:
    """Restart reuses each decoded cpuset text (policy.state.codec); reuse changes nothing."""
    codec_fast.forget_cpusets()
    first = codec._decode_cpuset("4-127,132-255", "entry.result")
    again = codec._decode_cpuset("4-127,132-255", "entry.original")
    assert again is first and first == CPUSet.parse("4-127,132-255")
    for where in ("a.result", "b.original"):
        with pytest.raises(CodecError, match=re.escape(where)):
            codec._decode_cpuset("1-x", where)
        with pytest.raises(CodecError, match=re.escape(where)):
            codec._decode_cpuset("70000", where)
