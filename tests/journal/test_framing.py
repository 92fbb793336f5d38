"""Frames (package docstring, "Frame"): pure functions on bytes."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from journal import FrameError, decode_frame, encode_frame
from journal.framing import FRAME_HEADER_SIZE, find_next_frame


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
