"""A round's pods journaled as columns (``policy.balance.columns``): they read back as the pod
maps a journal held before them, an old record still reads as it did, and a damaged column is
refused naming the event and the column."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from policy.balance import BalanceInfo, Container, Pod, RoundInputs, plan_round
from policy.balance.columns import JournaledInputs, expand_pod_columns, pod_columns
from policy.balance.errors import BalanceError
from policy.balance.events import BalanceRoundFailed, BalanceRoundRecorded
from policy.errors import CodecError
from policy.state.codec import decode_event, encode_event
from tests.policy.balance.test_properties import round_inputs

FIXTURES = Path(__file__).parent / "fixtures"
EXAMPLES = Path(__file__).parents[3] / "docs" / "examples" / "balance"
#: A BalanceRoundRecorded event as qrmd wrote it before the columns (main at 12532a5, from
#: docs/examples/balance/pressure.json with a containerId on its first container).
BEFORE_COLUMNS = FIXTURES / "round_recorded_before_columns.msgpack"


@st.composite
def inputs_with_ids(draw: st.DrawFn) -> RoundInputs:
    """``round_inputs`` with some containers read by their container ID."""
    inputs = draw(round_inputs())
    with_ids = draw(st.lists(st.booleans(), min_size=len(inputs.pods), max_size=len(inputs.pods)))
    pods = tuple(
        Pod(
            p.uid,
            p.namespace,
            p.name,
            p.pool,
            tuple(
                Container(c.name, c.anon, f"containerd://{p.uid}-{c.name}" if with_id else "")
                for c in p.containers
            ),
        )
        for p, with_id in zip(inputs.pods, with_ids, strict=True)
    )
    return replace(inputs, pods=pods)


def journaled(event: Any) -> Any:
    """The event as the journal stores it and a reader decodes it."""
    return decode_event(msgpack.unpackb(msgpack.packb(encode_event(event))))


def old_form_event(inputs: RoundInputs, record: BalanceInfo) -> dict[str, Any]:
    """The event as qrmd encoded it before the columns: the inputs' ``to_json`` verbatim."""
    return {"kind": "BalanceRoundRecorded", "record": record.to_json(), "inputs": inputs.to_json()}


@given(inputs_with_ids())
def test_old_and_new_forms_read_back_as_equal_inputs(inputs: RoundInputs) -> None:
    record = plan_round(inputs).record or BalanceInfo(inputs.now)
    new = journaled(BalanceRoundRecorded(record, inputs.plain()))
    old = decode_event(msgpack.unpackb(msgpack.packb(old_form_event(inputs, record))))
    assert new == old
    assert isinstance(new.inputs, JournaledInputs) and dict(new.inputs) == inputs.to_json()
    assert RoundInputs.from_json(new.inputs) == RoundInputs.from_json(old.inputs) == inputs
    assert RoundInputs.from_json(inputs.to_journal()) == inputs


@given(inputs_with_ids())
def test_the_columns_expand_to_the_pod_maps(inputs: RoundInputs) -> None:
    columns = msgpack.unpackb(msgpack.packb(pod_columns(inputs.pods)))
    assert expand_pod_columns(columns, "podColumns") == inputs.to_json()["pods"]


@given(inputs_with_ids())
def test_a_decoded_round_is_packed_again_as_it_was_read(inputs: RoundInputs) -> None:
    event = BalanceRoundFailed(inputs.plain(), "no metric")
    packed = msgpack.packb(encode_event(event))
    assert msgpack.packb(encode_event(decode_event(msgpack.unpackb(packed)))) == packed


def test_a_record_written_before_the_columns_reads_as_it_did() -> None:
    raw = msgpack.unpackb(BEFORE_COLUMNS.read_bytes())
    event = decode_event(raw)
    assert isinstance(event, BalanceRoundRecorded) and "pods" in raw["inputs"]
    assert event.inputs == raw["inputs"]
    example = json.loads((EXAMPLES / "pressure.json").read_text())
    example["pods"][0]["containers"][0]["containerId"] = "containerd://0f1e2d3c"
    inputs = RoundInputs.from_json(event.inputs)
    assert inputs == RoundInputs.from_json(example)
    assert plan_round(inputs).record == event.record
    # Written again today, the round reads back the same, its pods now columns.
    again = journaled(BalanceRoundRecorded(event.record, inputs.plain()))
    assert again == event and RoundInputs.from_json(again.inputs) == inputs


def test_a_hand_written_file_may_not_hold_both_forms() -> None:
    inputs = RoundInputs.from_json(json.loads((EXAMPLES / "pressure.json").read_text()))
    both = {**inputs.to_json(), "podColumns": pod_columns(inputs.pods)}
    with pytest.raises(BalanceError, match="both 'pods' and 'podColumns'"):
        RoundInputs.from_json(both)


def _pressure_columns() -> dict[str, Any]:
    inputs = RoundInputs.from_json(json.loads((EXAMPLES / "pressure.json").read_text()))
    event = encode_event(BalanceRoundRecorded(BalanceInfo(inputs.now), inputs.plain()))
    return msgpack.unpackb(msgpack.packb(event))


Damage = Callable[[dict[str, Any]], None]


def _set(column: str, value: Any) -> Damage:
    def damage(columns: dict[str, Any]) -> None:
        columns[column] = value

    return damage


def _edit(column: str, edit: Callable[[list[Any]], None]) -> Damage:
    def damage(columns: dict[str, Any]) -> None:
        edit(columns[column])

    return damage


def _drop(column: str) -> Damage:
    def damage(columns: dict[str, Any]) -> None:
        del columns[column]

    return damage


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        pytest.param(_drop("anonSet"), r"podColumns: missing field 'anonSet'",
                     id="a missing column is named"),
        pytest.param(_set("rss", []), r"podColumns: unknown field 'rss'",
                     id="an unknown column is named"),
        pytest.param(_set("uid", "s1"), r"podColumns\.uid: expected a JSON array",
                     id="a column that is not a list"),
        pytest.param(_edit("name", list.pop), r"podColumns\.name: holds 6 values, expected 7",
                     id="a pod column shorter than the pods"),
        pytest.param(_edit("pool", lambda c: c.__setitem__(2, 7)),
                     r"podColumns\.pool\[2\]: expected a string, got 7",
                     id="a pool that is not a string"),
        pytest.param(_edit("containers", lambda c: c.__setitem__(1, -1)),
                     r"podColumns\.containers\[1\]: expected a container count, got -1",
                     id="a negative container count"),
        pytest.param(_edit("containers", lambda c: c.__setitem__(0, 2)),
                     r"podColumns\.containerName: holds 8 values, expected 9",
                     id="counts that name more containers than listed"),
        pytest.param(_edit("anonSet", lambda c: c.__setitem__(3, 99)),
                     r"podColumns\.anonSet\[3\]: 99 names no set of anonNumas",
                     id="a container naming a set that does not exist"),
        pytest.param(_edit("anonNumas", lambda c: c[0].reverse()),
                     r"podColumns\.anonNumas\[0\]: NUMA ids must be distinct and ascending",
                     id="a set of nodes out of order"),
        pytest.param(_edit("anon", list.pop),
                     r"podColumns\.anon: holds \d+ amounts, its containers' sets of nodes need",
                     id="amounts fewer than the sets need"),
        pytest.param(_edit("anon", lambda c: c.__setitem__(5, "5")),
                     r"podColumns\.anon\[5\]: expected a number, got '5'",
                     id="an amount that is not a number"),
    ],
)  # fmt: skip
def test_damaged_columns_are_refused_naming_the_event_and_the_column(
    damage: Damage, message: str
) -> None:
    raw = _pressure_columns()
    damage(raw["inputs"]["podColumns"])
    with pytest.raises(CodecError, match=rf"^BalanceRoundRecorded\.inputs\.{message}"):
        decode_event(raw)


def test_a_record_holding_both_forms_is_refused() -> None:
    raw = _pressure_columns()
    raw["inputs"]["pods"] = []
    with pytest.raises(CodecError, match=r"BalanceRoundRecorded\.inputs: holds both 'pods'"):
        decode_event(raw)


def test_a_refused_amount_is_named_with_its_pod_and_container_when_read_as_inputs() -> None:
    raw = _pressure_columns()
    raw["inputs"]["podColumns"]["anon"][0] = -5
    event = decode_event(raw)  # the shape holds: the value's rule is the inputs' check
    with pytest.raises(BalanceError, match=r"inputs\.podColumns: pod 0 \('[^']+'\): .*-5"):
        RoundInputs.from_json(event.inputs)
