"""Frames (package docstring, "Frame"): pure functions on bytes."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from journal import FrameError, decode_frame, encode_frame
from journal.framing import FRAME_HEADER_SIZE, find_next_frame, intact_frame_end, intact_frames


def test_layout_is_the_documented_one() -> None:
    # magic, u32 length, u32 CRC-32 of the payload, u32 CRC-32 of the 12 bytes before it.
    prefix = b"QRJF" + struct.pack("<II", 3, zlib.crc32(b"abc"))
    assert encode_frame(b"abc") == prefix + struct.pack("<I", zlib.crc32(prefix)) + b"abc"
    assert FRAME_HEADER_SIZE == 16


@given(st.binary(max_size=2000), st.binary(max_size=40))
@settings(max_examples=200)
def test_round_trip_at_any_offset(payload: bytes, before: bytes) -> None:
    frame = encode_frame(payload)
    assert decode_frame(before + frame + b"trailing", len(before)) == (
        payload,
        len(before) + len(frame),
    )


GOOD = encode_frame(b"\x82\xa3seq\x01\xa6events\x90")


def _flip(data: bytes, index: int) -> bytes:
    return data[:index] + bytes([data[index] ^ 0x01]) + data[index + 1 :]


@pytest.mark.parametrize(
    ("data", "incomplete", "reason"),
    [
        pytest.param(
            b"", True, "0 of the 16 header bytes", id="empty buffer is an incomplete header"
        ),
        pytest.param(GOOD[:7], True, "7 of the 16 header bytes", id="short header is incomplete"),
        pytest.param(GOOD[:-1], True, "only", id="payload cut by one byte is incomplete"),
        pytest.param(b"XRJF" + GOOD[4:], False, "magic", id="wrong magic is damage"),
        pytest.param(
            _flip(GOOD, 5), False, "header checksum", id="flipped length fails the header check"
        ),
        pytest.param(_flip(GOOD, 14), False, "header checksum", id="flipped header CRC is damage"),
        pytest.param(
            _flip(GOOD, len(GOOD) - 1), False, "payload checksum", id="flipped payload is damage"
        ),
        pytest.param(b"\x00" * 64, False, "magic", id="zero-filled block is damage"),
    ],
)
def test_damaged_frames(data: bytes, incomplete: bool, reason: str) -> None:
    with pytest.raises(FrameError, match=reason) as caught:
        decode_frame(data)
    assert caught.value.incomplete is incomplete
    assert caught.value.offset == 0


def test_every_cut_of_a_frame_is_incomplete() -> None:
    for length in range(len(GOOD)):
        with pytest.raises(FrameError) as caught:
            decode_frame(GOOD[:length])
        assert caught.value.incomplete, length


def test_every_single_bit_flip_is_detected() -> None:
    for index in range(len(GOOD)):
        for bit in range(8):
            damaged = GOOD[:index] + bytes([GOOD[index] ^ (1 << bit)]) + GOOD[index + 1 :]
            with pytest.raises(FrameError):
                decode_frame(damaged)


@given(st.binary(max_size=300), st.integers(min_value=0, max_value=300))
@settings(max_examples=300)
def test_garbage_raises_only_frame_error(garbage: bytes, offset: int) -> None:
    offset = min(offset, len(garbage))
    try:
        payload, end = decode_frame(garbage, offset)
    except FrameError:
        return
    assert end <= len(garbage) and garbage[offset + FRAME_HEADER_SIZE : end] == payload


@pytest.mark.parametrize(
    ("data", "start", "want"),
    [
        pytest.param(GOOD + GOOD, 1, len(GOOD), id="finds the next intact frame"),
        pytest.param(b"junkQRJFjunk" + GOOD, 0, 12, id="steps over a magic that starts no frame"),
        pytest.param(GOOD + GOOD[:-1], 1, None, id="a cut frame is not intact"),
        pytest.param(b"\x00" * 100, 0, None, id="zeros hold no frame"),
    ],
)
def test_find_next_frame(data: bytes, start: int, want: int | None) -> None:
    assert find_next_frame(data, start) == want


def _decoded_end(data: bytes, offset: int) -> int | None:
    try:
        return decode_frame(data, offset)[1]
    except FrameError:
        return None


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(GOOD, id="an intact frame ends where decode_frame says"),
        pytest.param(GOOD[:7], id="a short header is not intact"),
        pytest.param(GOOD[:-1], id="a payload cut by one byte is not intact"),
        pytest.param(b"XRJF" + GOOD[4:], id="a wrong magic is not intact"),
        pytest.param(_flip(GOOD, 5), id="a flipped length is not intact"),
        pytest.param(_flip(GOOD, 14), id="a flipped header CRC is not intact"),
        pytest.param(_flip(GOOD, len(GOOD) - 1), id="a flipped payload byte is not intact"),
        pytest.param(b"", id="no bytes are not intact"),
    ],
)
def test_intact_frame_end_agrees_with_decode_frame(data: bytes) -> None:
    assert intact_frame_end(data, memoryview(data), 0) == _decoded_end(data, 0)


def test_intact_frame_end_refuses_every_single_bit_flip() -> None:
    for index in range(len(GOOD)):
        for bit in range(8):
            damaged = GOOD[:index] + bytes([GOOD[index] ^ (1 << bit)]) + GOOD[index + 1 :]
            assert intact_frame_end(damaged, memoryview(damaged), 0) is None


@given(
    st.lists(
        st.binary(max_size=60).map(encode_frame) | st.binary(max_size=40), min_size=1, max_size=4
    ),
    st.integers(min_value=0, max_value=400),
    st.integers(min_value=0, max_value=255),
)
@settings(max_examples=300)
def test_intact_frame_end_agrees_with_decode_frame_on_any_bytes(
    pieces: list[bytes], offset: int, flip: int
) -> None:
    data = b"".join(pieces)
    if data and flip:
        # One byte changed somewhere, the frames around it intact or not.
        at = flip * 7 % len(data)
        data = data[:at] + bytes([data[at] ^ flip]) + data[at + 1 :]
    offset = min(offset, len(data))
    assert intact_frame_end(data, memoryview(data), offset) == _decoded_end(data, offset)


@given(
    st.lists(
        st.binary(max_size=60).map(encode_frame) | st.binary(max_size=40), min_size=1, max_size=5
    ),
    st.integers(min_value=0, max_value=255),
)
@settings(max_examples=300)
def test_intact_frames_are_the_frames_read_one_by_one_up_to_the_first_not_intact(
    pieces: list[bytes], flip: int
) -> None:
    data = b"".join(pieces)
    if data and flip:
        at = flip * 7 % len(data)
        data = data[:at] + bytes([data[at] ^ flip]) + data[at + 1 :]
    view = memoryview(data)
    one_by_one = []
    offset = 0
    while (end := intact_frame_end(data, view, offset)) is not None:
        one_by_one.append((offset + FRAME_HEADER_SIZE, end))
        offset = end
    assert list(intact_frames(data, view, 0)) == one_by_one
