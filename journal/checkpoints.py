"""Checkpoint files: a full-state snapshot covering every record up to a sequence number.

``checkpoint-<seq, 16 digits>.ckpt`` holds two frames: a header (node, topology fingerprint, the
seq it covers, wall time, state size) and the state itself as one msgpack document (package
docstring). Each frame has its own checksums, so a checkpoint is valid only if both frames are
intact and nothing follows them.

Writing is atomic (DESIGN.md, Journal): temporary file, fsync, rename, fsync of the directory.
A crash at any step leaves either the previous set of checkpoints or the new one, never a
half-written file under a checkpoint's name.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from journal.errors import CorruptCheckpoint, FrameError, PayloadError
from journal.fileops import TEMP_SUFFIX, FileOps, remove_quietly, write_all
from journal.framing import decode_frame, encode_frame
from journal.records import (
    CheckpointHeader,
    decode_checkpoint_header,
    encode_checkpoint_header,
    unpack,
)
from journal.syncer import Syncer

__all__ = [
    "Checkpoint",
    "checkpoint_name",
    "list_checkpoints",
    "load_checkpoint",
    "parse_checkpoint_name",
    "write_checkpoint_file",
]

_CHECKPOINT_NAME = re.compile(r"^checkpoint-(\d{16})\.ckpt$")


def checkpoint_name(seq: int) -> str:
    """File name of the checkpoint covering records up to ``seq``.

    500 → ``checkpoint-0000000000000500.ckpt``.
    """
    return f"checkpoint-{seq:016d}.ckpt"


def parse_checkpoint_name(name: str) -> int | None:
    """The sequence number a checkpoint file name announces, or None if it is not one."""
    match = _CHECKPOINT_NAME.match(name)
    return int(match.group(1)) if match else None


def list_checkpoints(fs: FileOps, directory: str) -> list[tuple[int, str]]:
    """``(seq, path)`` of every checkpoint file in ``directory``, oldest first."""
    found = []
    for name in fs.listdir(directory):
        seq = parse_checkpoint_name(name)
        if seq is not None:
            found.append((seq, os.path.join(directory, name)))
    return sorted(found)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A loaded checkpoint.

    Attributes:
        path: its file.
        header: node, topology fingerprint, seq and wall time it was written with.
        state: the state payload, as msgpack decoded it.
    """

    path: str
    header: CheckpointHeader
    state: Any

    @property
    def seq(self) -> int:
        """The last record whose effect the state includes."""
        return self.header.seq


def load_checkpoint(fs: FileOps, path: str) -> Checkpoint:
    """Read and check one checkpoint file.

    Args:
        fs: the file-system seam.
        path: the checkpoint file.

    Returns:
        The checkpoint.

    Raises:
        CorruptCheckpoint: unreadable, a frame damaged, trailing bytes, a header that does not
            match the file name, or a state that is not msgpack.
    """
    try:
        data = fs.read_file(path)
    except OSError as exc:
        raise CorruptCheckpoint(path, f"cannot be read: {exc}") from exc
    try:
        header_payload, header_end = decode_frame(data, 0)
        header = decode_checkpoint_header(header_payload)
        state_payload, end = decode_frame(data, header_end)
        state = unpack(state_payload)
    except (FrameError, PayloadError) as exc:
        raise CorruptCheckpoint(path, str(exc)) from exc
    if end != len(data):
        raise CorruptCheckpoint(path, f"{len(data) - end} unexpected bytes after the state")
    named = parse_checkpoint_name(os.path.basename(path))
    if named is not None and named != header.seq:
        raise CorruptCheckpoint(path, f"header says seq {header.seq}, file name says {named}")
    if header.state_bytes != len(state_payload):
        raise CorruptCheckpoint(
            path,
            f"header announces {header.state_bytes} state bytes, the file holds "
            f"{len(state_payload)}",
        )
    return Checkpoint(path=path, header=header, state=state)


def write_checkpoint_file(
    fs: FileOps, syncer: Syncer, directory: str, header: CheckpointHeader, state_payload: bytes
) -> str:
    """Write a checkpoint atomically.

    Args:
        fs: the file-system seam.
        syncer: fsyncs per the durability setting.
        directory: the journal directory.
        header: the checkpoint's header (its ``state_bytes`` must be ``len(state_payload)``).
        state_payload: the state, already msgpack-encoded.

    Returns:
        The checkpoint's path.

    Raises:
        OSError: a step failed; the temporary file is removed and the checkpoints already on
            disk are untouched.
    """
    path = os.path.join(directory, checkpoint_name(header.seq))
    temp = path + TEMP_SUFFIX
    if fs.exists(temp):
        remove_quietly(fs, temp)  # left by a crash during an earlier attempt at this seq
    data = encode_frame(encode_checkpoint_header(header)) + encode_frame(state_payload)
    fd = fs.open_append(temp, create=True)
    try:
        try:
            write_all(fs, fd, data)
            # fsync before the rename: otherwise a power loss can leave the new name pointing
            # at an empty or partial file, replacing nothing but promising a checkpoint.
            syncer.sync_file(fd, temp)
        finally:
            fs.close(fd)
        fs.rename(temp, path)
    except OSError:
        remove_quietly(fs, temp)
        raise
    # fsync the directory: the rename is not durable until the directory entry is.
    syncer.sync_dir(directory)
    return path
