"""The codec's fast path decodes what the checked decoder decodes, or steps aside.

``policy.state.codec_fast`` may only return ``None`` (the checked decoder then runs) or the
very value the checked decoder gives; it never raises. Checked here on every event type,
on events and entries with one field replaced by garbage, and on garbage itself, with the
cpuset cache both empty and filled.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policy.errors import CodecError
from policy.state import codec, codec_fast
from policy.state.codec import encode_event
from policy.state.events import ContainerAllocated
from tests.policy.state.test_codec import (
    ONE_OF_EACH,
    PRIMITIVES,
    VALID_EVENTS,
    mutated_event,
    replace_one_field,
)


def checked_event(data: object) -> Any:
    """The checked decoder's event, or its CodecError."""
    try:
        return codec._decode_event_checked(data)
    except CodecError as err:
        return err


def checked_entry(data: object) -> Any:
    try:
        return codec._decode_entry_checked(data, "entry")
    except CodecError as err:
        return err


@pytest.mark.parametrize("event", ONE_OF_EACH, ids=lambda e: type(e).__name__)
def test_every_well_formed_cpu_event_takes_the_fast_path_once_its_cpusets_are_known(
    event: object,
) -> None:
    data = encode_event(event)  # type: ignore[arg-type]
    assert checked_event(data) == event  # decodes, and fills the cpuset cache
    assert codec_fast.fast_cpu_event(data) == event


def test_an_unknown_cpuset_text_goes_the_checked_way_and_then_is_known() -> None:
    data = encode_event(ONE_OF_EACH[0])
    codec_fast.forget_cpusets()
    assert codec_fast.fast_cpu_event(data) is None
    assert codec.decode_event(data) == ONE_OF_EACH[0]
    assert codec_fast.fast_cpu_event(data) == ONE_OF_EACH[0]


_ALLOCATED_ENTRIES = [e["entry"] for e in VALID_EVENTS if e["kind"] == ContainerAllocated.__name__]


@st.composite
def _valid_entry(draw: st.DrawFn) -> object:
    """A valid encoded container entry, a copy (the run test compares maps, never objects)."""
    return copy.deepcopy(draw(st.sampled_from(_ALLOCATED_ENTRIES)))


@st.composite
def mutated_entry(draw: st.DrawFn) -> object:
    """A valid encoded container entry with one field (possibly nested) replaced by garbage."""
    entries = [e for e in VALID_EVENTS if e["kind"] == ContainerAllocated.__name__]
    data = copy.deepcopy(draw(st.sampled_from(entries))["entry"])
    replace_one_field(draw, data, PRIMITIVES | st.integers() | st.floats(allow_nan=False))
    return data


@settings(max_examples=400, deadline=None)
@given(st.one_of(PRIMITIVES, mutated_event(), st.sampled_from(VALID_EVENTS)), st.booleans())
def test_the_fast_event_path_gives_the_checked_result_or_steps_aside(
    data: object, cache_filled: bool
) -> None:
    if not cache_filled:
        codec_fast.forget_cpusets()
    want = checked_event(data)
    got = codec_fast.fast_cpu_event(data)
    if got is not None:
        assert not isinstance(want, CodecError) and got == want
        assert type(got) is type(want)
    if isinstance(want, CodecError):  # the public decoder: the same error, word for word
        with pytest.raises(CodecError, match=re.escape(str(want))):
            codec.decode_event(data)
    else:
        assert codec.decode_event(data) == want


@settings(max_examples=400, deadline=None)
@given(st.one_of(PRIMITIVES, mutated_entry()), st.booleans())
def test_the_fast_entry_path_gives_the_checked_result_or_steps_aside(
    data: object, cache_filled: bool
) -> None:
    if not cache_filled:
        codec_fast.forget_cpusets()
    want = checked_entry(data)
    got = codec_fast.fast_entry(data)
    if got is not None:
        assert not isinstance(want, CodecError) and got == want
        assert got.labels == want.labels and got.annotations == want.annotations
        assert type(got.request_quantity) is type(want.request_quantity)
        # The fast path sets the slots itself: every field is set, to a value of the same type.
        for field in dataclasses.fields(want):
            assert type(getattr(got, field.name)) is type(getattr(want, field.name))


@settings(max_examples=400, deadline=None)
@given(st.one_of(PRIMITIVES, mutated_event(), st.sampled_from(VALID_EVENTS)), st.booleans())
def test_the_allocated_entry_path_gives_the_checked_events_entry_or_steps_aside(
    data: object, cache_filled: bool
) -> None:
    if not cache_filled:
        codec_fast.forget_cpusets()
    want = checked_event(data)
    got = codec_fast.fast_allocated_entry(data)
    if got is not None:
        assert type(want) is ContainerAllocated and got == want.entry
        assert got.labels == want.entry.labels and got.annotations == want.entry.annotations


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(mutated_entry(), _valid_entry()), min_size=2, max_size=6))
def test_a_run_of_entries_reads_each_as_the_checked_decoder_does(run: list[object]) -> None:
    # The fast path compares each entry's maps with the last ones it decoded: an entry
    # whose map is equal takes that map's value, one that differs in any way is decoded.
    for data in run:
        want = checked_entry(data)
        got = codec_fast.fast_entry(data)
        if got is not None:
            assert not isinstance(want, CodecError) and got == want
            assert got.placement == want.placement
            assert got.labels == want.labels and got.annotations == want.annotations


@pytest.mark.parametrize(
    ("field", "changed"),
    [
        pytest.param("labels", {"app": "other"}, id="labels changed in place read anew"),
        pytest.param("annotations", {"a": "b", "c": "d"}, id="annotations changed in place"),
        pytest.param("labels", {"app": 1}, id="a label changed to a number steps aside"),
        pytest.param(
            "placement", {"kind": "in_pool", "pool": "share"}, id="a placement changed in place"
        ),
    ],
)
def test_a_map_changed_after_it_was_decoded_is_read_as_it_is_now(
    field: str, changed: dict[str, object]
) -> None:
    data = copy.deepcopy(_ALLOCATED_ENTRIES[0])
    data[field] = {"app": "web"} if field != "placement" else data[field]
    codec.decode_event({"kind": "ContainerAllocated", "entry": data})  # its cpusets known
    first = codec_fast.fast_entry(data)
    assert first is not None and first == checked_entry(data)
    data[field].clear()
    data[field].update(changed)  # the very map object the fast path saw
    got = codec_fast.fast_entry(data)
    want = checked_entry(data)
    assert got is None or got == want
    if not isinstance(want, CodecError):
        assert codec.decode_event({"kind": "ContainerAllocated", "entry": data}).entry == want
