"""Frames: the length-prefixed, checksummed envelope around every payload the journal stores.

The layout is specified in the package docstring (``journal/__init__.py``): a 16-byte header
(magic, payload length, payload CRC-32, header CRC-32) followed by the payload. These are pure
functions on bytes; segments, checkpoints and tests all go through them.

The header has its own checksum so that a damaged *length* is caught before it is trusted: a
flipped bit in the length of a record in the middle of the log must not make the rest of the
file look like one unfinished record at the tail (which would be truncated instead of refused).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator

from journal.errors import FrameError

__all__ = [
    "FRAME_HEADER_SIZE",
    "FRAME_MAGIC",
    "MAX_PAYLOAD_BYTES",
    "decode_frame",
    "encode_frame",
    "find_next_frame",
    "intact_frame_end",
    "intact_frames",
]

#: First four bytes of every frame.
FRAME_MAGIC = b"QRJF"
_HEADER = struct.Struct("<4sIII")
_PREFIX = struct.Struct("<4sII")  # the part the header CRC covers
_HEADER_CRC = struct.Struct("<I")
#: Bytes before the payload: magic, length, payload CRC, header CRC.
FRAME_HEADER_SIZE = _HEADER.size
#: The length field is an unsigned 32-bit integer.
MAX_PAYLOAD_BYTES = 0xFFFF_FFFF
_CHECKED_PREFIX = _PREFIX.size


def encode_frame(payload: bytes) -> bytes:
    """Wrap ``payload`` in a frame.

    Args:
        payload: the bytes to store (a msgpack document, but framing does not care).

    Returns:
        The frame: header followed by the payload.

    Raises:
        ValueError: the payload is longer than a 32-bit length can express.
    """
    if len(payload) > MAX_PAYLOAD_BYTES:
        raise ValueError(
            f"frame payload of {len(payload)} bytes exceeds the limit of {MAX_PAYLOAD_BYTES}"
        )
    prefix = _PREFIX.pack(FRAME_MAGIC, len(payload), zlib.crc32(payload))
    return prefix + _HEADER_CRC.pack(zlib.crc32(prefix)) + payload


def decode_frame(buf: bytes | memoryview, offset: int = 0) -> tuple[bytes, int]:
    """Read the frame that starts at ``offset`` in ``buf``.

    Args:
        buf: bytes holding zero or more frames.
        offset: where the frame starts.

    Returns:
        ``(payload, end)``: the payload and the offset just after the frame.

    Raises:
        FrameError: with ``incomplete=True`` when ``buf`` ends before the frame does (a header
            or payload cut short), ``incomplete=False`` when the magic or a checksum is wrong.
    """
    available = len(buf) - offset
    if available < FRAME_HEADER_SIZE:
        raise FrameError(
            offset,
            f"only {available} of the {FRAME_HEADER_SIZE} header bytes are present",
            incomplete=True,
        )
    magic, length, payload_crc, header_crc = _HEADER.unpack_from(buf, offset)
    if magic != FRAME_MAGIC:
        raise FrameError(
            offset, f"magic is {bytes(magic)!r}, not {FRAME_MAGIC!r}", incomplete=False
        )
    actual_header_crc = zlib.crc32(buf[offset : offset + _CHECKED_PREFIX])
    if actual_header_crc != header_crc:
        raise FrameError(
            offset,
            f"header checksum mismatch (stored {header_crc:#010x}, "
            f"computed {actual_header_crc:#010x})",
            incomplete=False,
        )
    start = offset + FRAME_HEADER_SIZE
    end = start + length
    if end > len(buf):
        raise FrameError(
            offset,
            f"payload of {length} bytes announced, only {len(buf) - start} present",
            incomplete=True,
        )
    payload = bytes(buf[start:end])
    actual_crc = zlib.crc32(payload)
    if actual_crc != payload_crc:
        raise FrameError(
            offset,
            f"payload checksum mismatch (stored {payload_crc:#010x}, computed {actual_crc:#010x})",
            incomplete=False,
        )
    return payload, end


def intact_frame_end(buf: bytes, view: memoryview, offset: int) -> int | None:
    """Where the frame at ``offset`` ends if it is intact, else None: the checks of
    ``decode_frame`` (magic, header checksum, length, payload checksum), without copying the
    payload out.

    A reader walking a whole segment checks every frame this way and reads each payload where
    it lies (``view[offset + FRAME_HEADER_SIZE : end]``); the copy, and the exception machinery
    of ``decode_frame``, were most of what checking a frame cost. On None the reader calls
    ``decode_frame``, whose ``FrameError`` says what is wrong: the two agree on which frames are
    intact (a property in ``tests/journal/test_framing.py``).

    Args:
        buf: bytes holding zero or more frames.
        view: ``memoryview(buf)``, made once by the caller for all its frames.
        offset: where the frame starts.
    """
    if len(buf) - offset < FRAME_HEADER_SIZE:
        return None
    magic, length, payload_crc, header_crc = _HEADER.unpack_from(buf, offset)
    start = offset + FRAME_HEADER_SIZE
    end: int = start + length
    if (
        magic != FRAME_MAGIC
        or end > len(buf)
        or zlib.crc32(view[offset : offset + _CHECKED_PREFIX]) != header_crc
        or zlib.crc32(view[start:end]) != payload_crc
    ):
        return None
    return end


def intact_frames(buf: bytes, view: memoryview, offset: int) -> Iterator[tuple[int, int]]:
    """``(payload start, frame end)`` of each frame from ``offset`` on, in order, up to the
    first that is not intact (``intact_frame_end``'s checks, made in one loop).

    Recovery passes over the thousands of records a checkpoint covers this way: checking them
    frame after frame without a call per frame (``journal.segments.SegmentReader``). Where it
    stops, the caller reads on frame by frame, which names the damage.
    """
    size = len(buf)
    unpack, crc32 = _HEADER.unpack_from, zlib.crc32
    while size - offset >= FRAME_HEADER_SIZE:
        magic, length, payload_crc, header_crc = unpack(buf, offset)
        start = offset + FRAME_HEADER_SIZE
        end = start + length
        if (
            magic != FRAME_MAGIC
            or end > size
            or crc32(view[offset : offset + _CHECKED_PREFIX]) != header_crc
            or crc32(view[start:end]) != payload_crc
        ):
            return
        yield start, end
        offset = end


def find_next_frame(buf: bytes, start: int) -> int | None:
    """Offset of the first intact frame at or after ``start``, or None.

    Used to tell a damaged tail (nothing valid follows) from damage in the middle of a segment
    (intact frames follow). The search jumps between occurrences of the magic, so it costs one
    C-level scan of the bytes plus a checksum per candidate.

    Args:
        buf: the segment's bytes.
        start: where to begin looking.

    Returns:
        The offset of an intact frame, or None when there is none.
    """
    pos = buf.find(FRAME_MAGIC, start)
    while pos != -1:
        try:
            decode_frame(buf, pos)
        except FrameError:
            pos = buf.find(FRAME_MAGIC, pos + 1)
        else:
            return pos
    return None
