"""The reference's checkpoint file: checksum vectors, Go's bytes, decoding defaults (§13.2–13.4)."""

from __future__ import annotations

import contextlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policy.errors import CodecError
from policy.state.katalyst_decode import decode_document
from policy.state.katalyst_file import (
    checksum_of,
    dump_of,
    encode_document,
    go_float,
)
from policy.topology.cpuset import CPUSet
from tests.policy.state.katalyst_vectors import VECTORS, vector_text

COMPACT = {"separators": (",", ":")}


@pytest.mark.parametrize(
    ("name", "dumps"),
    [
        pytest.param(name, dumps, id=f"{name} checksums alike when written {how}")
        for name, _, _ in VECTORS
        for how, dumps in [
            ("compactly", COMPACT),
            ("indented with keys sorted", {"indent": 2, "sort_keys": True}),
        ]
    ],
)
def test_the_spec_vectors_verify_in_any_formatting(name: str, dumps: dict[str, object]) -> None:
    text = vector_text(name, **dumps)
    document = decode_document(text)
    assert checksum_of(document) == json.loads(text)["checksum"]


@pytest.mark.parametrize(
    ("name", "checksum"),
    [
        pytest.param(name, checksum, id=f"{name} is written byte for byte")
        for name, _, checksum in VECTORS
    ],
)
def test_the_spec_vectors_are_written_as_the_reference_writes_them(
    name: str, checksum: int
) -> None:
    # The vectors list fields in the reference's order and omit what it omits, so Python's
    # compact dump of them is the reference's byte layout.
    text = vector_text(name, **COMPACT)
    assert encode_document(decode_document(text)).decode() == text
    assert json.loads(text)["checksum"] == checksum


def test_v1_dump_is_the_spec_text() -> None:
    dump = dump_of(decode_document(vector_text("V1")))
    assert dump == (
        "(*state.CPUPluginCheckpoint){PolicyName:(string)dynamic MachineState:(state.NUMANodeMap)"
        "map[0:<*>{DefaultCPUSet:(machine.CPUSet){Initialed:(bool)true elems:(map[int]struct {})"
        "map[0:{} 1:{} 2:{} 3:{}]} AllocatedCPUSet:(machine.CPUSet){Initialed:(bool)true "
        "elems:(map[int]struct {})map[]} PodEntries:(state.PodEntries)map[]}] "
        "PodEntries:(state.PodEntries)map[] Checksum:(checksum.Checksum)0}"
    )


@pytest.mark.parametrize(
    ("value", "want"),
    [
        pytest.param(0.0, "0", id="zero is 0"),
        pytest.param(2.0, "2", id="a whole float has no fraction"),
        pytest.param(1.5, "1.5", id="a half stays a half"),
        pytest.param(0.0001, "0.0001", id="exponent -4 is still plain"),
        pytest.param(1.5e-5, "1.5e-05", id="exponent -5 switches to e with two digits"),
        pytest.param(123456.0, "123456", id="exponent 5 is plain"),
        pytest.param(1e6, "1e+06", id="exponent 6 switches to e"),
        pytest.param(0.1 + 0.2, "0.30000000000000004", id="shortest round-trip digits"),
    ],
)
def test_dump_floats_are_go_shortest_g(value: float, want: str) -> None:
    assert go_float(value) == want


@pytest.mark.parametrize(
    ("quantity", "want"),
    [
        pytest.param(2.0, '"request_quantity":2}', id="whole request quantity written as 2"),
        pytest.param(1e-7, '"request_quantity":1e-7}', id="tiny quantity as Go writes e-7"),
        pytest.param(1e21, '"request_quantity":1e+21}', id="huge quantity in e form"),
        pytest.param(1e20, '"request_quantity":100000000000000000000}', id="below 1e21 plain"),
    ],
)
def test_json_floats_are_encoding_json(quantity: float, want: str) -> None:
    doc = json.loads(vector_text("V4"))
    doc["pod_entries"]["pod-a"]["app"]["request_quantity"] = quantity
    text = encode_document(decode_document(json.dumps(doc))).decode()
    assert want in text


@pytest.mark.parametrize(
    ("label", "want"),
    [
        pytest.param("a<b>&c", '"a\\u003cb\\u003e\\u0026c"', id="html characters are escaped"),
        pytest.param('q"\\', '"q\\"\\\\"', id="quote and backslash are escaped"),
        pytest.param("t\tn\n\x01", '"t\\tn\\n\\u0001"', id="control characters are escaped"),
        pytest.param("é\u2028", '"é\\u2028"', id="non-ascii is kept, line separator escaped"),
    ],
)
def test_strings_are_escaped_as_go_does(label: str, want: str) -> None:
    doc = json.loads(vector_text("V4"))
    doc["pod_entries"]["pod-a"]["app"]["labels"] = {"k": label}
    text = encode_document(decode_document(json.dumps(doc))).decode()
    assert f'"labels":{{"k":{want}}}' in text
    assert json.loads(text)["pod_entries"]["pod-a"]["app"]["labels"]["k"] == label


def test_decoding_defaults_follow_the_spec() -> None:
    doc = decode_document('{"pod_entries": {"p": {"c": {"unknown": 1}}}, "extra": true}')
    record = doc["pod_entries"]["p"]["c"]
    assert doc["machineState"] == {} and doc["policyName"] == "" and doc["checksum"] == 0
    assert record["pod_uid"] == "" and record["container_index"] == 0 and not record["ramp_up"]
    assert record["allocation_result"] == CPUSet.uninitialized()
    assert record["labels"] is None and record["topology_aware_assignments"] is None
    explicit = decode_document('{"machineState": null, "pod_entries": null}')
    assert explicit["machineState"] is None and explicit["pod_entries"] is None


def test_null_and_empty_maps_checksum_differently() -> None:
    assert checksum_of(decode_document(vector_text("V1"))) != checksum_of(
        decode_document(vector_text("V2"))
    )


@given(st.text(max_size=80) | st.binary(max_size=80).map(lambda b: b.decode("latin-1")))
def test_garbage_raises_codec_error_only(text: str) -> None:
    with contextlib.suppress(CodecError):
        decode_document(text)


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
        lambda children: st.lists(children) | st.dictionaries(st.text(), children),
        max_leaves=20,
    )
)
def test_any_json_value_decodes_or_raises_codec_error(value: object) -> None:
    with contextlib.suppress(CodecError):
        decode_document(json.dumps({"pod_entries": {"p": {"c": value}}, "machineState": value}))
