"""Retention: which old segments and checkpoints may be deleted, and which never.

Recovery needs the newest checkpoint and every record after it; if that checkpoint turns out
corrupt it falls back to the one before, so it needs that one too and every record after *it*.
Hence the rule (DESIGN.md, Journal):

1. The two newest checkpoints are always kept, with every segment that holds a record newer than
   the older of the two. With fewer than two checkpoints nothing is deleted: a fallback would
   replay from the first record.
2. Everything older is kept for forensics while it fits: the oldest files go first while the
   forensic files together exceed ``max_bytes``, or while the oldest is older than
   ``max_age_s``. Deletion always takes the oldest, so the kept segments stay contiguous.
3. ``.broken`` files (cut tails) and anything the journal did not name are never touched.

``plan_retention`` is pure; ``apply_retention`` lists the directory, plans and deletes, and the
writer calls it on open and after each checkpoint.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Final

from journal.checkpoints import list_checkpoints
from journal.fileops import FileOps
from journal.segments import list_segments

__all__ = [
    "DEFAULT_RETENTION_MAX_AGE_S",
    "DEFAULT_RETENTION_MAX_BYTES",
    "Retention",
    "StoredFile",
    "apply_retention",
    "plan_retention",
]

_log = logging.getLogger("journal")

#: Forensic history kept beyond what recovery needs, at most this many bytes together...
DEFAULT_RETENTION_MAX_BYTES: Final = 256 * 1024 * 1024
#: ...and none of it older than this (a week: long enough to copy a node's journal off it).
DEFAULT_RETENTION_MAX_AGE_S: Final = 7 * 24 * 3600.0


@dataclass(frozen=True, slots=True)
class Retention:
    """Limits on the forensic history kept beyond what recovery needs.

    Attributes:
        max_bytes: total size of old segments and checkpoints kept for forensics; None for no
            size limit.
        max_age_s: files last modified longer ago than this are deleted; None for no age limit.
    """

    max_bytes: int | None = DEFAULT_RETENTION_MAX_BYTES
    max_age_s: float | None = DEFAULT_RETENTION_MAX_AGE_S

    def __post_init__(self) -> None:
        if self.max_bytes is not None and self.max_bytes < 0:
            raise ValueError(f"retention max_bytes must be >= 0, got {self.max_bytes}")
        if self.max_age_s is not None and self.max_age_s < 0:
            raise ValueError(f"retention max_age_s must be >= 0, got {self.max_age_s}")


@dataclass(frozen=True, slots=True)
class StoredFile:
    """A segment or checkpoint file as retention sees it.

    Attributes:
        path: the file.
        seq: a segment's first seq, or the seq a checkpoint covers.
        size: bytes.
        mtime: last modification, seconds since the epoch.
    """

    path: str
    seq: int
    size: int
    mtime: float


def plan_retention(
    segments: list[StoredFile],
    checkpoints: list[StoredFile],
    policy: Retention,
    now: float,
) -> list[str]:
    """Which files to delete, oldest first.

    Args:
        segments: every segment, any order.
        checkpoints: every checkpoint, any order.
        policy: the limits.
        now: current wall time, seconds since the epoch.

    Returns:
        Paths to delete; never a file recovery needs (module docstring, rule 1).
    """
    by_seq = sorted(checkpoints, key=lambda f: f.seq)
    if len(by_seq) < 2:
        return []
    oldest_needed_seq = by_seq[-2].seq + 1
    ordered = sorted(segments, key=lambda f: f.seq)
    forensic: list[tuple[int, int, StoredFile]] = []
    for index, segment in enumerate(ordered):
        following = ordered[index + 1] if index + 1 < len(ordered) else None
        # A segment holds seqs [its first, next segment's first - 1]; the newest one is open.
        if following is not None and following.seq <= oldest_needed_seq:
            forensic.append((segment.seq, 1, segment))
    forensic.extend((ckpt.seq, 0, ckpt) for ckpt in by_seq[:-2])
    forensic.sort(key=lambda item: (item[0], item[1]))
    total = sum(item[2].size for item in forensic)
    doomed = []
    for _, _, stored in forensic:
        too_big = policy.max_bytes is not None and total > policy.max_bytes
        too_old = policy.max_age_s is not None and now - stored.mtime > policy.max_age_s
        if not (too_big or too_old):
            break
        doomed.append(stored.path)
        total -= stored.size
    return doomed


def apply_retention(fs: FileOps, directory: str, policy: Retention, now: float) -> list[str]:
    """Delete what ``plan_retention`` allows in ``directory``.

    Args:
        fs: the file-system seam.
        directory: the journal directory.
        policy: the limits.
        now: current wall time, seconds since the epoch.

    Returns:
        The paths deleted. A file that cannot be deleted is logged and kept.
    """

    def stored(seq: int, path: str) -> StoredFile:
        return StoredFile(path, seq, fs.size(path), fs.mtime(path))

    segments = [stored(seq, path) for seq, path in list_segments(fs, directory)]
    checkpoints = [stored(seq, path) for seq, path in list_checkpoints(fs, directory)]
    deleted = []
    for path in plan_retention(segments, checkpoints, policy, now):
        try:
            fs.unlink(path)
        except OSError as exc:
            _log.warning("retention could not delete %s: %s", path, exc)
            continue
        deleted.append(path)
    # No directory fsync: a deletion that a power loss forgets only leaves an old file behind,
    # which the next pass removes.
    return deleted
