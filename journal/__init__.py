"""The durable write-ahead journal: checksummed msgpack records in segment files, plus checkpoints.

This docstring is the format specification (STYLE.md, Journal). The journal is generic: it
stores msgpack-able causes, events and checkpoint states and knows nothing of the state model,
whose codec (in ``policy/``) turns states and events into plain maps. Integers are
little-endian. Format version: 1.

Frame
=====
Every stored payload — record, segment header, checkpoint header, checkpoint state — is a frame::

    offset  size  field
    0       4     magic  b"QRJF"
    4       4     n      payload length (u32)
    8       4     crc    CRC-32 of the payload (u32)
    12      4     hcrc   CRC-32 of bytes 0-11 (u32)
    16      n     payload (one msgpack document)

The checksum is CRC-32 (IEEE 802.3, ``zlib.crc32``), not CRC-32C: zlib's is in the standard
library and runs in C at several GB/s, while a pure-Python CRC-32C would cost more than the
fsync it protects and no CRC-32C package is a dependency. Both detect every error burst of up
to 32 bits; CRC-32 detects every error of up to three bits in frames of up to about 11 KB
(records are far smaller), and misses a random corruption of a longer payload (a checkpoint)
with probability 2^-32 — CRC-32C's edge is hardware speed and larger frames, which a Python
journal fsyncing every record gains nothing from. The header has its own checksum so a
damaged length is never trusted: a flipped bit in a length in the middle of the log must not
make the rest of the file look like one unfinished record at the tail. The magic lets readers
find the next intact frame after damage (``find_next_frame``), which is how a torn tail (nothing
intact follows) is told apart from corruption in the middle (intact frames follow).

Segment files
=============
Named by the seq of their first record, 16 decimal digits: ``0000000000000001.seg`` holds
records 1, 2, …; ``0000000000004097.seg`` starts at record 4097. A segment is a header frame
followed by one frame per record, with consecutive seqs from ``first_seq``. The header payload
is a msgpack map::

    {"kind": "qrmd-journal-segment", "format": 1, "node": <node name>,
     "topology": <topology fingerprint>, "first_seq": <int>, "created_wall_time": <float>}

A new segment is written to ``<name>.tmp``, fsynced, renamed into place and the directory
fsynced, so a segment file always has a complete header; leftover ``.tmp`` files are removed on
open. Opening for writing refuses a journal whose newest header (or checkpoint) names another
node or topology fingerprint (``JournalMismatch``); read-only opening accepts it (forensics).

Record
======
The payload of a record frame is a msgpack map::

    {"schema": 1, "seq": <int>, "wall_time": <float, epoch s>,
     "monotonic_time": <float, s>, "cause": <map>, "events": [<msgpack value>, ...]}

``cause`` is the whole input of the decision; ``events`` the events it commits, atomically:
a record is one frame, so it is either entirely there or it is a damaged frame.

Appending and durability
========================
``append`` writes one record frame at the end of the newest segment. With durability
``always`` (the default) it fsyncs before returning the seq: an acknowledged record survives a
power loss. With ``none`` nothing is ever fsynced (records, segments, checkpoints): a killed
process loses nothing, a power loss may lose the newest records. A failed write or fsync is cut
back to the end of the last acknowledged record (the cut fsynced too), so it is never replayed;
if the cut fails, the failed records may or may not be on disk (``WriteOutcomeUnknown``: the
next start replays whatever of them is complete), so the journal no longer knows its own tail:
it refuses all further appends and reports itself unhealthy until it is opened again.

Rotation
========
Before appending a record, if the newest segment already holds at least one record and the
record's frame would take it past ``segment_max_bytes``, a new segment named by that record's
seq is started (so a record larger than the limit gets a segment of its own).

Checkpoint files
================
``checkpoint-<seq, 16 digits>.ckpt`` (``checkpoint-0000000000010000.ckpt``) covers records up
to ``seq``: two frames, a header map::

    {"kind": "qrmd-journal-checkpoint", "format": 1, "node": ..., "topology": ...,
     "seq": <int>, "wall_time": <float>, "state_bytes": <length of the state payload>}

then the state payload (one msgpack document, opaque to the journal; ``policy.state.codec``
describes it), and nothing after. Written
to ``<name>.tmp``, fsynced, renamed, directory fsynced. Recovery uses the newest valid checkpoint
and falls back to an older one (replaying more records) when it is damaged.

Opening and damage
==================
Recovery loads the newest valid checkpoint and reads every record after it. A damaged *tail* —
the newest segment's last frame cut short or failing a checksum, with no intact frame after it,
what a crash mid-write leaves — is truncated, its bytes kept in ``<segment>.broken`` (then
``<segment>.2.broken`` …) and reported in ``Recovery``. Damage in *history the checkpoint
covers* (records up to its seq, which recovery does not need) does not refuse start, even when
it shares a segment with the records after the checkpoint: recovery reads on from the next
intact frame, requires every record after the checkpoint to be there in sequence, reports the
unreadable seq range (``Recovery.damaged_history``, a warning in the log) and proceeds. Damage
anywhere else — after the newest valid checkpoint, or where it cannot be shown to lie before
it — raises ``CorruptRecord`` naming the file, offset and seq; ``verify`` reports every
problem without changing anything and ``repair`` cuts the journal back, describing what is
lost first, and never drops an intact record recovery can use.

Retention
=========
The two newest checkpoints and every segment holding a record after the older of them are
always kept; older segments and checkpoints are kept for forensics up to a size and an age
limit (``Retention``).

Exclusion and permissions
=========================
A directory holds one writer at a time: the writer holds an exclusive ``flock`` on the
directory's own descriptor (``journal.lock``), so deleting or replacing a file in it cannot
let a second writer in. Directories the journal creates are 0700 and its files 0600, whatever
the umask.
"""

import importlib
from typing import TYPE_CHECKING, Any

from journal.checkpoints import Checkpoint, load_checkpoint
from journal.clock import SYSTEM_CLOCK, Clock, SystemClock
from journal.errors import (
    CorruptCheckpoint,
    CorruptRecord,
    FrameError,
    JournalError,
    JournalFailed,
    JournalMismatch,
    JournalWriteError,
    PayloadError,
    TornTail,
    UnencodableRecord,
    WriteOutcomeUnknown,
)
from journal.fileops import FileOps, OsFileOps
from journal.framing import decode_frame, encode_frame
from journal.records import Record
from journal.recovery import Recovery, SkippedCheckpoint
from journal.retention import DEFAULT_RETENTION_MAX_AGE_S, DEFAULT_RETENTION_MAX_BYTES, Retention
from journal.settings import (
    DEFAULT_CHECKPOINT_EVERY_RECORDS,
    DEFAULT_CHECKPOINT_EVERY_S,
    DEFAULT_DURABILITY,
    DEFAULT_SEGMENT_MAX_BYTES,
    DURABILITIES,
    Durability,
)
from journal.syncer import FsyncStats
from journal.writer import Journal, JournalStats

if TYPE_CHECKING:
    from journal.forensics import (
        Finding,
        Gap,
        JournalIdentity,
        VerifyReport,
        journal_identity,
        read_records,
        verify,
    )
    from journal.repair import RepairReport, repair

#: The offline tools (read, verify, repair) load on first use: ``qrmd run`` writes and recovers
#: with neither, and a node's restart pays for every module it imports.
_ON_FIRST_USE = {
    **dict.fromkeys(
        (
            "Finding",
            "Gap",
            "JournalIdentity",
            "VerifyReport",
            "journal_identity",
            "read_records",
            "verify",
        ),
        "journal.forensics",
    ),
    **dict.fromkeys(("RepairReport", "repair"), "journal.repair"),
}


def __getattr__(name: str) -> Any:
    module = _ON_FIRST_USE.get(name)
    if module is None:
        raise AttributeError(f"module 'journal' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups are plain module attributes
    return value


__all__ = [
    "DEFAULT_CHECKPOINT_EVERY_RECORDS",
    "DEFAULT_CHECKPOINT_EVERY_S",
    "DEFAULT_DURABILITY",
    "DEFAULT_RETENTION_MAX_AGE_S",
    "DEFAULT_RETENTION_MAX_BYTES",
    "DEFAULT_SEGMENT_MAX_BYTES",
    "DURABILITIES",
    "SYSTEM_CLOCK",
    "Checkpoint",
    "Clock",
    "CorruptCheckpoint",
    "CorruptRecord",
    "Durability",
    "FileOps",
    "Finding",
    "FrameError",
    "FsyncStats",
    "Gap",
    "Journal",
    "JournalError",
    "JournalFailed",
    "JournalIdentity",
    "JournalMismatch",
    "JournalStats",
    "JournalWriteError",
    "OsFileOps",
    "PayloadError",
    "Record",
    "Recovery",
    "RepairReport",
    "Retention",
    "SkippedCheckpoint",
    "SystemClock",
    "TornTail",
    "UnencodableRecord",
    "VerifyReport",
    "WriteOutcomeUnknown",
    "decode_frame",
    "encode_frame",
    "journal_identity",
    "load_checkpoint",
    "read_records",
    "repair",
    "verify",
]
