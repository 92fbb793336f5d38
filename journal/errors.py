"""The journal's error hierarchy: each kind of damage or failure is its own class.

STYLE.md (Errors, Journal): the journal tells apart a clean end, a torn tail (truncated on
open, the cut bytes kept in a ``.broken`` file) and a corrupt record before the tail (refused,
naming the segment, the offset and the sequence number). Messages carry the numbers and, where
an operator has to act, say what to do next.
"""

from __future__ import annotations

# The damage classes are named for what they are (STYLE.md, Journal: TornTail, CorruptRecord),
# not suffixed with "Error"; hence the N818 exemptions below.

__all__ = [
    "CorruptCheckpoint",
    "CorruptRecord",
    "FrameError",
    "JournalError",
    "JournalFailed",
    "JournalMismatch",
    "JournalWriteError",
    "PayloadError",
    "TornTail",
    "UnencodableRecord",
    "WriteOutcomeUnknown",
]


class JournalError(Exception):
    """Root of every error the journal raises."""


class FrameError(JournalError):
    """Bytes that are not one complete, intact frame (raised by ``decode_frame``).

    Attributes:
        offset: where the frame starts in the buffer.
        incomplete: True when the buffer ends before the frame does (a torn write looks like
            this); False when the bytes are all there but the magic or a checksum is wrong.
        reason: what is wrong, in words.
    """

    def __init__(self, offset: int, reason: str, *, incomplete: bool) -> None:
        super().__init__(f"bad frame at offset {offset}: {reason}")
        self.offset = offset
        self.reason = reason
        self.incomplete = incomplete


class TornTail(JournalError):  # noqa: N818 (STYLE.md's names)
    """The end of the newest segment holds a frame cut short or damaged, with nothing valid after.

    This is what a crash in the middle of a write leaves. Opening the journal truncates it and
    keeps the cut bytes in ``broken_path``; the error class exists for reporting (``verify``) and
    is raised only where truncating is not allowed.

    Attributes:
        path: the segment file.
        offset: where the damaged frame starts (the journal is truncated to this length).
        cut_bytes: how many bytes lie from ``offset`` to the end of the file.
        seq: the sequence number the damaged frame would have carried.
        reason: what is wrong with the frame.
    """

    def __init__(self, path: str, offset: int, cut_bytes: int, seq: int, reason: str) -> None:
        super().__init__(
            f"torn tail in {path} at offset {offset}: {cut_bytes} bytes of an unfinished record "
            f"(seq {seq}, never acknowledged): {reason}"
        )
        self.path = path
        self.offset = offset
        self.cut_bytes = cut_bytes
        self.seq = seq
        self.reason = reason


class CorruptRecord(JournalError):  # noqa: N818 (STYLE.md's names)
    """Damage before the tail of the log: the journal refuses to skip acknowledged records.

    Attributes:
        path: the segment file.
        offset: where the damaged frame (or the out-of-sequence record) starts.
        seq: the sequence number expected at that offset.
        reason: what is wrong.
    """

    def __init__(self, path: str, offset: int, seq: int, reason: str, *, directory: str) -> None:
        super().__init__(
            f"corrupt journal record in {path} at offset {offset} (record seq {seq}): {reason}. "
            f"Records from seq {seq} on cannot be replayed and are never skipped silently: run "
            f"`qrmd journal verify {directory}` to see what follows the damage, then "
            f"`qrmd journal repair {directory} --force` to drop records from seq {seq} on"
        )
        self.path = path
        self.offset = offset
        self.seq = seq
        self.reason = reason
        self.directory = directory


class CorruptCheckpoint(JournalError):  # noqa: N818 (STYLE.md's names)
    """A checkpoint file that fails its checks, or no checkpoint usable for recovery.

    Attributes:
        path: the checkpoint file (or the journal directory when no checkpoint is usable).
        reason: what is wrong.
    """

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"checkpoint {path} is unusable: {reason}")
        self.path = path
        self.reason = reason


class JournalMismatch(JournalError):  # noqa: N818 (STYLE.md's names)
    """The journal was written on another machine (node name or topology fingerprint differ)."""

    def __init__(
        self,
        directory: str,
        *,
        found_node: str,
        found_topology: str,
        expected_node: str,
        expected_topology: str,
    ) -> None:
        super().__init__(
            f"journal {directory} belongs to node {found_node!r} with topology fingerprint "
            f"{found_topology!r}, but this is node {expected_node!r} with topology fingerprint "
            f"{expected_topology!r}; refusing to replay another machine's state. Move the "
            f"directory away (it can still be inspected: `qrmd journal verify {directory}` "
            f"opens it read-only) and start with an empty journal directory"
        )
        self.directory = directory
        self.found_node = found_node
        self.found_topology = found_topology
        self.expected_node = expected_node
        self.expected_topology = expected_topology


class JournalWriteError(JournalError):
    """An append or checkpoint could not be made durable; nothing of it was kept.

    After this error the journal holds exactly the records acknowledged before, and the next
    append may succeed once the fault (disk full, I/O error) clears.
    """


class JournalFailed(JournalError):  # noqa: N818 (STYLE.md's names)
    """The journal could not undo a failed write, so it refuses every later append.

    The on-disk log may end with bytes of an unacknowledged record; the next start decides from
    what the disk holds (a torn tail is truncated, a complete record is replayed).
    """


class WriteOutcomeUnknown(JournalFailed):
    """A failed write or fsync could not be cut back: the journal no longer knows its own tail.

    The records from ``first_seq`` to ``last_seq`` (the failed one, and an unsynced group's
    before it) were never acknowledged, yet they may be on disk, whole or in part: the next
    start replays each one that is complete and truncates a torn one. So whoever wrote them
    must not be told they failed without effect; their outcome is unknown until that start.
    The journal refuses every later append (``JournalFailed``).

    Attributes:
        first_seq: the oldest record whose outcome is unknown.
        last_seq: the newest (the one whose write or fsync failed).
    """

    def __init__(self, message: str, *, first_seq: int, last_seq: int) -> None:
        super().__init__(message)
        self.first_seq = first_seq
        self.last_seq = last_seq


class UnencodableRecord(JournalError):  # noqa: N818 (STYLE.md's names)
    """A cause, event or checkpoint payload that msgpack cannot encode; nothing was written."""


class PayloadError(JournalError):
    """A frame's payload is intact (its checksum passes) but is not what the journal wrote there.

    Readers turn it into ``CorruptRecord`` or ``CorruptCheckpoint`` with the file and offset.
    """
