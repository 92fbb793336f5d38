"""The checkpoint's columnar containers: the same state as the list of entry maps checkpoints
held before, and anything ill-shaped refused naming the column."""

from __future__ import annotations

import copy
import re
from dataclasses import replace
from typing import Any

import immutables
import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.errors import CodecError, StateError
from policy.state.advisor_section import (
    AdvisorOverlapAllowed,
    AdvisorResponseApplied,
    NUMAHeadroomSet,
)
from policy.state.codec import decode_state, encode_state
from policy.state.cpu_apply import allocate_all
from policy.state.entries import RECLAIM_POOL, ContainerEntry, InPool
from policy.state.events import Event
from policy.state.sections import CPU_SECTION, State, apply_all, empty_state
from tests.policy.state.checkpoint_fixture_state import fixture_state
from tests.policy.state.checkpoint_forms import encode_state_as_before
from tests.policy.state.test_cpu_indexes_bulk import TOPO, base_state, entries
from tests.policy.state_fixtures import container


def through_msgpack(data: dict[str, Any]) -> Any:
    return msgpack.unpackb(msgpack.packb(data, use_bin_type=True))


TEXTS = st.text(max_size=6) | st.sampled_from(["", "MAIN", "SIDECAR", "shared_cores", "x"])
MAPS = st.none() | st.dictionaries(st.sampled_from(["a", "numa_binding", "é"]), TEXTS, max_size=3)
ADVISOR_EVENTS: list[Event] = [
    AdvisorResponseApplied("f1"),
    AdvisorOverlapAllowed(True),
    NUMAHeadroomSet(((0, 1.5), (1, 0.0))),
]


@st.composite
def states(draw: st.DrawFn) -> State:
    """States of every placement (v0.5.47's reclaimed NUMA binding too), sidecars, text and
    map values repeated or not, with or without an advisor section."""
    drawn: list[ContainerEntry] = []
    for entry in draw(entries(fit=True)):
        placement = entry.placement
        if isinstance(placement, InPool) and placement.pool_name == RECLAIM_POOL:
            placement = InPool(RECLAIM_POOL, draw(st.none() | st.frozensets(st.integers(0, 3))))
        drawn.append(
            replace(
                entry,
                placement=placement,
                container_type=draw(st.sampled_from(["MAIN", "SIDECAR", ""])),
                container_index=draw(st.integers(0, 2**64 - 1)),
                pod_role=draw(TEXTS),
                pod_type=draw(TEXTS),
                init_timestamp=draw(TEXTS),
                labels=draw(MAPS),
            )
        )
    try:
        cpu = allocate_all(base_state(), drawn)
    except StateError:
        cpu = base_state()  # entries that do not fit together: the pools alone
    state = empty_state(TOPO).with_section(CPU_SECTION, cpu)
    return apply_all(state, draw(st.lists(st.sampled_from(ADVISOR_EVENTS), max_size=3)))


@settings(max_examples=200, deadline=None)
@given(states())
def test_a_state_decodes_alike_from_columns_and_from_the_list_of_entries(state: State) -> None:
    columns = decode_state(through_msgpack(encode_state(state)), TOPO)
    listed = decode_state(through_msgpack(encode_state_as_before(state)), TOPO)
    assert columns == listed == state
    assert columns.cpu.indexes == listed.cpu.indexes == state.cpu.indexes


def test_repeated_values_are_written_once() -> None:
    state = next_state_with_two_alike_containers()
    columns = encode_state(state)["sections"]["cpu"]["containers"]
    assert columns["count"] == 2
    assert columns["placements"] == [{"kind": "in_pool", "pool": "share"}]
    assert columns["qos_level"] == [columns["qos_level"][0]] * 2
    assert columns["pod_uid"][0] != columns["pod_uid"][1]
    assert len(columns["maps"]) == 1


def next_state_with_two_alike_containers() -> State:
    cpu = allocate_all(
        base_state(),
        [container(pod, "app", InPool("share"), owner="share") for pod in ("p1", "p2")],
    )
    return empty_state(TOPO).with_section(CPU_SECTION, cpu)


def encoded() -> dict[str, Any]:
    """Three containers, two of them alike, in the columnar form."""
    cpu = allocate_all(
        base_state(),
        [
            container("p1", "app", InPool("share"), owner="share"),
            container("p2", "app", InPool("share"), owner="share", numa_binding=True),
            replace(
                container("p3", "app", InPool("batch"), owner="batch", quantity=2.5),
                labels=None,
            ),
        ],
    )
    state = empty_state(TOPO).with_section(CPU_SECTION, cpu)
    data: dict[str, Any] = through_msgpack(encode_state(state))
    return data


_DELETE = object()


def _set(column: str, value: Any, index: int | None = None):  # type: ignore[no-untyped-def]
    def damage(data: dict[str, Any]) -> dict[str, Any]:
        data = copy.deepcopy(data)
        columns = data["sections"]["cpu"]["containers"]
        if value is _DELETE:
            del columns[column]
        elif index is None:
            columns[column] = value
        else:
            columns[column][index] = value
        return data

    return damage


_AT = "sections.cpu.containers"


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        pytest.param(_set("ramp_up", _DELETE), f"{_AT}: missing ramp_up", id="a missing column"),
        pytest.param(_set("extra", []), f"{_AT}: unknown field 'extra'", id="an unknown column"),
        pytest.param(_set("count", "3"), f"{_AT}.count: expected a count", id="a text count"),
        pytest.param(
            _set("count", 4), f"{_AT}.pod_uid: 3 values for 4 containers", id="a count too high"
        ),
        pytest.param(
            _set("labels", {}), f"{_AT}.labels: expected a list, got dict", id="a column as a map"
        ),
        pytest.param(
            _set("pod_name", 99, 1),
            f"{_AT}.pod_name[1]: 99 is not an index below",
            id="a text index past the table",
        ),
        pytest.param(
            _set("qos_level", -1, 0),
            f"{_AT}.qos_level[0]: -1 is not an index below",
            id="a negative text index",
        ),
        pytest.param(
            _set("pod_uid", True, 2),
            f"{_AT}.pod_uid[2]: True is not an index below",
            id="a boolean as an index",
        ),
        pytest.param(
            _set("texts", 7, 0), f"{_AT}.texts[0]: expected a string, got int", id="a text int"
        ),
        pytest.param(
            _set("ramp_up", "yes", 1), f"{_AT}.ramp_up[1]: expected a boolean", id="a text bool"
        ),
        pytest.param(
            _set("container_index", -1, 0),
            f"{_AT}.container_index[0]: expected an unsigned 64-bit integer",
            id="a negative container index",
        ),
        pytest.param(
            _set("request_quantity", True, 2),
            f"{_AT}.request_quantity[2]: expected a number, got bool",
            id="a boolean quantity",
        ),
        pytest.param(
            _set("placements", {"kind": "teleported"}, 0),
            f"{_AT}.placements[0].kind: unknown placement",
            id="an unknown placement",
        ),
        pytest.param(
            _set("placements", {"kind": "in_pool", "pool": "gone"}, 0),
            "which does not exist",
            id="a placement in a pool the state does not hold",
        ),
        pytest.param(
            _set("maps", {"a": 1}, 0),
            f"{_AT}.maps[0]: keys and values must be strings",
            id="a map of a number",
        ),
        pytest.param(
            _set("labels", 5, 0),
            f"{_AT}.labels[0]: 5 is not an index below",
            id="a label index past the maps",
        ),
        pytest.param(
            _set("placement", 3, 0),
            f"{_AT}.placement[0]: 3 is not an index below",
            id="a placement index past the placements",
        ),
    ],
)
def test_ill_shaped_columns_are_refused_naming_the_column(damage, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(CodecError, match=re.escape(message)):
        decode_state(damage(encoded()), TOPO)


def test_a_container_twice_is_refused() -> None:
    data = encoded()
    columns = data["sections"]["cpu"]["containers"]
    columns["pod_uid"][1] = columns["pod_uid"][0]
    with pytest.raises(CodecError, match=re.escape(f"{_AT}[1]: ('p1', 'app') appears twice")):
        decode_state(data, TOPO)


def test_integral_quantities_decode_as_the_entry_maps_did() -> None:
    data = encoded()
    data["sections"]["cpu"]["containers"]["request_quantity"][2] = 2
    state = decode_state(data, TOPO)
    quantity = state.cpu.entry("p3", "app").request_quantity  # type: ignore[union-attr]
    assert type(quantity) is float and quantity == 2.0


def test_decoded_maps_are_frozen_and_null_stays_null() -> None:
    state = decode_state(encoded(), TOPO)
    alike, null = state.cpu.entry("p2", "app"), state.cpu.entry("p3", "app")
    assert alike is not None and null is not None
    assert isinstance(alike.annotations, immutables.Map)
    assert null.labels is None and isinstance(null.annotations, immutables.Map)


def test_the_fixture_state_of_every_kind_decodes_alike_from_both_forms() -> None:
    # Every placement (v0.5.47's reclaimed NUMA binding among them), a sidecar, the v0.5.47
    # pod role and type, and an advisor section, whatever the draws above happened to cover.
    state = fixture_state()
    assert decode_state(through_msgpack(encode_state(state)), TOPO) == state
    assert decode_state(through_msgpack(encode_state_as_before(state)), TOPO) == state
