"""Record, segment-header and checkpoint-header payloads (journal/records.py)."""

from __future__ import annotations

import contextlib
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from journal import PayloadError, Record, UnencodableRecord
from journal.records import (
    CheckpointHeader,
    RecordDecoder,
    RecordEventsDecoder,
    SegmentHeader,
    decode_checkpoint_header,
    decode_record,
    decode_record_events,
    decode_segment_header,
    encode_checkpoint_header,
    encode_record,
    encode_record_fields,
    encode_segment_header,
    record_seq,
    record_seq_at,
)

GOOD: dict[str, Any] = {
    "schema": 1,
    "seq": 7,
    "wall_time": 1.7e9,
    "monotonic_time": 12.5,
    "cause": {"rpc": "RemovePod", "pod_uid": "p"},
    "events": [{"kind": "pod_removed", "pod_uid": "p"}],
}


def test_record_round_trip_keeps_every_field() -> None:
    record = Record(7, 1.7e9, 12.5, {"rpc": "Allocate", 0: "int keys"}, [{"numa": {0: "0-3"}}, 5])
    assert decode_record(encode_record(record)) == record


def test_the_record_map_has_the_documented_field_names() -> None:
    record = Record(7, 1.7e9, 12.5, GOOD["cause"], GOOD["events"])
    assert msgpack.unpackb(encode_record(record)) == GOOD


_CAUSES = st.dictionaries(
    st.text(max_size=6), st.integers(-(2**63), 2**63 - 1) | st.text(max_size=6), max_size=4
)


@given(
    seq=st.integers(1, 2**63),
    wall=st.floats(allow_nan=False),
    cause=_CAUSES,
    events=st.lists(_CAUSES, max_size=3),
)
def test_a_record_encoded_from_its_fields_is_the_records_bytes(
    seq: int, wall: float, cause: dict[str, Any], events: list[Any]
) -> None:
    # The journal's append encodes the fields without building a Record: the same bytes, the
    # documented map in its documented order.
    fields = encode_record_fields(seq, wall, 12.5, cause, events)
    assert fields == encode_record(Record(seq, wall, 12.5, cause, events))
    documented = {"schema": 1, "seq": seq, "wall_time": wall, "monotonic_time": 12.5}
    assert fields == msgpack.packb({**documented, "cause": cause, "events": events})


def test_a_record_from_fields_that_msgpack_refuses_is_unencodable() -> None:
    with pytest.raises(UnencodableRecord, match="record 3 cannot be encoded"):
        encode_record_fields(3, 1.0, 2.0, {"rpc": object()}, [])


def _with(**changes: Any) -> bytes:
    fields = {**GOOD, **changes}
    return msgpack.packb({k: v for k, v in fields.items() if v is not ...})


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        pytest.param(msgpack.packb([1, 2]), "not a map", id="a list where the record map belongs"),
        pytest.param(_with(seq=...), "no field 'seq'", id="a record without seq"),
        pytest.param(_with(seq="7"), "'seq' is '7'", id="a seq that is a string"),
        pytest.param(_with(seq=True), "'seq' is True", id="a seq that is a boolean"),
        pytest.param(_with(cause=[1]), "'cause'", id="a cause that is not a map"),
        pytest.param(_with(events={}), "'events'", id="events that are not a list"),
        pytest.param(
            _with(schema=2), "newer than this qrmd reads", id="a record from a newer schema"
        ),
        pytest.param(b"\xc1", "not msgpack", id="bytes that are not msgpack"),
        pytest.param(msgpack.packb(GOOD) + b"\x00", "not msgpack", id="trailing bytes"),
    ],
)
def test_bad_record_payloads_name_the_problem(payload: bytes, message: str) -> None:
    with pytest.raises(PayloadError, match=message):
        decode_record(payload)


def test_integer_times_are_read_as_floats() -> None:
    record = decode_record(_with(wall_time=1_700_000_000, monotonic_time=3))
    assert (record.wall_time, record.monotonic_time) == (1.7e9, 3.0)


@given(st.binary(max_size=200))
@settings(max_examples=300)
def test_garbage_payloads_raise_only_payload_error(garbage: bytes) -> None:
    for decode in (decode_record, decode_segment_header, decode_checkpoint_header):
        with contextlib.suppress(PayloadError):
            decode(garbage)


def test_headers_round_trip() -> None:
    segment = SegmentHeader("node-a", "topo", 4097, 1.7e9)
    assert decode_segment_header(encode_segment_header(segment)) == segment
    checkpoint = CheckpointHeader("node-a", "topo", 500, 1.7e9, 1234)
    assert decode_checkpoint_header(encode_checkpoint_header(checkpoint)) == checkpoint


def test_a_segment_header_is_not_a_checkpoint_header() -> None:
    with pytest.raises(PayloadError, match="kind 'qrmd-journal-segment'"):
        decode_checkpoint_header(encode_segment_header(SegmentHeader("n", "t", 1, 0.0)))


def test_unencodable_values_are_our_error() -> None:
    with pytest.raises(UnencodableRecord, match="record 3 cannot be encoded"):
        encode_record(Record(3, 0.0, 0.0, {"x": object()}, []))


@pytest.mark.parametrize(
    "seq",
    [
        pytest.param(1, id="the first record's seq, one byte"),
        pytest.param(127, id="the largest seq stored in the type byte itself"),
        pytest.param(128, id="a seq of one byte after the type byte"),
        pytest.param(65_535, id="a seq of two bytes"),
        pytest.param(2**32 - 1, id="a seq of four bytes"),
        pytest.param(2**64 - 1, id="a seq of eight bytes"),
    ],
)
def test_record_seq_reads_the_seq_encode_record_wrote(seq: int) -> None:
    payload = encode_record(Record(seq, 1.7e9, 12.5, GOOD["cause"], GOOD["events"]))
    assert record_seq(payload) == seq == decode_record(payload).seq


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(
            msgpack.packb({"seq": 7, **{k: v for k, v in GOOD.items() if k != "seq"}}),
            id="a record whose fields come in another order",
        ),
        pytest.param(_with(schema=2), id="a record of another schema version"),
        pytest.param(_with(seq=-1), id="a negative seq"),
        pytest.param(_with(seq="7"), id="a seq that is a string"),
        pytest.param(_with(cause=...), id="a record of five fields"),
        pytest.param(msgpack.packb([1, 2]), id="a list"),
        pytest.param(_with(seq=70_000)[:16], id="a seq cut short"),
        pytest.param(b"", id="no bytes"),
    ],
)
def test_record_seq_leaves_every_other_layout_to_decode_record(payload: bytes) -> None:
    assert record_seq(payload) is None


@given(st.integers(0, 2**64 - 1))
def test_record_seq_agrees_with_decode_record_on_every_seq(seq: int) -> None:
    payload = encode_record(Record(seq, 1.7e9, 12.5, {}, []))
    assert record_seq(payload) == decode_record(payload).seq


@given(
    st.integers(0, 2**64 - 1) | st.binary(max_size=40),
    st.binary(max_size=8),
    st.binary(max_size=8),
    st.integers(0, 40),
)
def test_record_seq_at_reads_a_payload_where_it_lies_as_record_seq_reads_a_copy(
    seq_or_bytes: int | bytes, before: bytes, after: bytes, cut: int
) -> None:
    # A payload inside a segment's bytes, whole or cut short, between other bytes.
    payload = (
        encode_record(Record(seq_or_bytes, 1.7e9, 12.5, {}, []))
        if isinstance(seq_or_bytes, int)
        else seq_or_bytes
    )
    payload = payload[: len(payload) - min(cut, len(payload))] if cut % 2 else payload
    buf = before + payload + after
    assert record_seq_at(buf, len(before), len(before) + len(payload)) == record_seq(payload)


def _read(decode: Any, payload: bytes) -> tuple[str, Any]:
    """What ``decode`` makes of ``payload``: its record (cause aside) or its error's message."""
    try:
        record = decode(payload)
    except PayloadError as exc:
        return "refused", str(exc)
    return "read", (record.seq, record.wall_time, record.monotonic_time, record.events)


_PLAIN = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(st.text(), inner, max_size=2),
    max_leaves=4,
)


#: Single payloads: whole records, every field's faults, other layouts, nothing.
_PAYLOADS = [
    pytest.param(
        encode_record(Record(7, 1.7e9, 12.5, GOOD["cause"], GOOD["events"])), id="a record"
    ),
    pytest.param(_with(seq=2**64 - 1), id="a record whose seq takes eight bytes"),
    pytest.param(_with(cause={}), id="a record whose cause is empty"),
    pytest.param(_with(cause=[1]), id="a cause that is not a map"),
    pytest.param(_with(cause=...), id="a record without a cause"),
    pytest.param(_with(events={}), id="events that are not a list"),
    pytest.param(_with(schema=2), id="a record from a newer schema"),
    pytest.param(_with(wall_time=1_700_000_000), id="an integer time"),
    pytest.param(_with() + b"\x00", id="a byte after the record"),
    pytest.param(_with()[:-1], id="a record cut short"),
    pytest.param(msgpack.packb({**GOOD, "extra": 1}), id="a seventh field"),
    pytest.param(msgpack.packb(dict(reversed(GOOD.items()))), id="fields in another order"),
    pytest.param(msgpack.packb([1, 2]), id="a list where the record map belongs"),
    pytest.param(b"", id="no bytes"),
]


@pytest.mark.parametrize("payload", _PAYLOADS)
def test_reading_the_events_only_reads_and_refuses_as_decode_record(payload: bytes) -> None:
    assert _read(decode_record_events, payload) == _read(decode_record, payload)
    with contextlib.suppress(PayloadError):
        assert decode_record_events(payload).cause == {}


@given(st.dictionaries(st.sampled_from(sorted(GOOD)), _PLAIN) | st.binary(max_size=120))
@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
def test_reading_the_events_only_agrees_with_decode_record_on_any_payload(value: Any) -> None:
    payload = value if isinstance(value, bytes) else msgpack.packb({**GOOD, **value})
    assert _read(decode_record_events, payload) == _read(decode_record, payload)


#: Runs of payloads one segment may hold: records of any fields, random bytes, and records with a
#: byte too many, cut short, whole, only a map's first byte, or with a nested cause.
_RUNS_OF_PAYLOADS = st.lists(
    st.dictionaries(st.sampled_from(sorted(GOOD)), _PLAIN).map(
        lambda value: msgpack.packb({**GOOD, **value})
    )
    | st.binary(max_size=120)
    | st.sampled_from(
        [_with() + b"\x00", _with()[:-1], _with(), b"\x86", _with(cause={1: [2], "a": {}})]
    ),
    max_size=6,
)


@given(_RUNS_OF_PAYLOADS)
@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
def test_one_decoder_reads_a_run_of_payloads_as_each_read_alone(payloads: list[bytes]) -> None:
    # A segment's records share one decoder (and its unpacker); whatever a payload leaves
    # behind (trailing bytes, a record cut short) must not change how the next one reads.
    decoder = RecordEventsDecoder()
    for payload in payloads:
        assert _read(decoder.decode, payload) == _read(decode_record, payload)


@given(_RUNS_OF_PAYLOADS)
@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
def test_payloads_read_in_place_read_as_their_copies(payloads: list[bytes]) -> None:
    # The segment reader hands the decoder views of the segment's bytes, not copies.
    decoder = RecordEventsDecoder()
    segment = b"".join(payloads)
    view = memoryview(segment)
    start = 0
    for payload in payloads:
        in_place = view[start : start + len(payload)]
        assert _read(decoder.decode, in_place) == _read(decode_record, payload)
        start += len(payload)


def test_a_record_left_behind_in_a_payload_is_not_read_as_the_next_one() -> None:
    # Two records in one payload (refused: bytes after the record), then a payload as long
    # as the second of them: it must read as itself, not as what the first one left behind.
    decoder = RecordEventsDecoder()
    with pytest.raises(PayloadError):
        decoder.decode(_with(seq=8) + _with(seq=9))
    assert decoder.decode(_with(seq=10)).seq == 10


def _read_whole(decode: Any, payload: bytes | memoryview) -> tuple[str, Any]:
    """What ``decode`` makes of ``payload``: its whole record, or its error's message."""
    try:
        return "read", decode(payload)
    except PayloadError as exc:
        return "refused", str(exc)


# The events-only reader skips a record's cause unread, so a cause msgpack cannot make into a
# map (keyed by a list) is refused only where causes are read.
@pytest.mark.parametrize(
    "payload",
    [*_PAYLOADS, pytest.param(_with(cause={(1,): 2}), id="a cause keyed by a list")],
)
def test_the_segment_decoder_reads_and_refuses_as_decode_record(payload: bytes) -> None:
    assert _read_whole(RecordDecoder().decode, payload) == _read_whole(decode_record, payload)


@given(_RUNS_OF_PAYLOADS)
@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
def test_the_segment_decoder_reads_a_run_of_payloads_in_place_as_decode_record(
    payloads: list[bytes],
) -> None:
    # One decoder (and its unpacker) reads a segment's records from views of its bytes;
    # whatever a payload leaves behind must not change how the next one reads.
    decoder = RecordDecoder()
    view = memoryview(b"".join(payloads))
    start = 0
    for payload in payloads:
        in_place = view[start : start + len(payload)]
        assert _read_whole(decoder.decode, in_place) == _read_whole(decode_record, payload)
        start += len(payload)
