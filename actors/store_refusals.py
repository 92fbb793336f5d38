"""While the journal refuses commits, the state store says so (DESIGN.md, the commit protocol
step 3; spec cpu-policy §12.3: an unhealthy check carries its reason).

A commit the journal could not write is cut back and refused, and the next one may succeed:
the store stays usable, but a node whose every commit is refused is not healthy. The rules:

1. A commit refused because the journal could not write it (a full disk, an I/O error; the
   record was cut back) makes the store unhealthy with the reason, the count and since when.
   The first refusal of an episode is logged at WARNING, the later ones at DEBUG: kubelet
   retries, and the gRPC layer already logs each refused call at WARNING.
2. The next successful write — a commit, a checkpoint, or the probe of rule 3 — makes the
   store healthy again, logged at INFO with the number of refusals it ends.
3. An idle node writes nothing, so while unhealthy by rule 1 every checkpoint tick makes a
   probe write: ``PROBE_BYTES`` in a temporary file of the state directory, fsynced and
   removed, through the journal's ``FileOps``. A leftover probe (a crash mid-probe) ends in
   ``.tmp`` and is removed when the journal is next opened, like any temporary file.

A journal that could not even cut a failed record back refuses every commit until the next
start; that is the store's own failure, not an episode of these rules, and no probe ends it.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass

from actors.store_status import StoreHealth
from journal.fileops import TEMP_SUFFIX, FileOps, remove_quietly, write_all

__all__ = ["PROBE_BYTES", "PROBE_FILE", "CommitRefusals", "probe_write"]

_log = logging.getLogger("actors.state_store")

#: One page: larger than a typical record (about 1 kB), so a probe that fits says a record fits.
PROBE_BYTES = 4096
#: The probe's file in the state directory; the ``.tmp`` suffix makes recovery remove it.
PROBE_FILE = "write-probe" + TEMP_SUFFIX


@dataclass(frozen=True, slots=True)
class _Episode:
    count: int
    since_wall: float
    last_reason: str


class CommitRefusals:
    """The current episode of refused commits (rules 1–2), if any. Not thread-safe: the store's
    thread owns it."""

    def __init__(self) -> None:
        self._episode: _Episode | None = None

    @property
    def refusing(self) -> bool:
        """True between a refused commit and the next successful write."""
        return self._episode is not None

    def refused(self, reason: str, now_wall: float) -> StoreHealth:
        """Count one refused commit (rule 1) and return the health it leaves.

        Args:
            reason: why the journal could not write it (the error's message).
            now_wall: the wall time of the refusal, seconds since the epoch.

        Returns:
            Unhealthy, with the reason.
        """
        episode = self._episode
        if episode is None:
            episode = _Episode(1, now_wall, reason)
            _log.warning("state store unhealthy, the journal refused a commit: %s", reason)
        else:
            episode = _Episode(episode.count + 1, episode.since_wall, reason)
            _log.debug("state store: commit %d refused in a row: %s", episode.count, reason)
        self._episode = episode
        return self.health()

    def written(self, what: str) -> bool:
        """A write succeeded (rule 2): end the episode.

        Args:
            what: the write, for the log line ("record 42", "the probe write").

        Returns:
            True when this ended an episode (the store is healthy again).
        """
        episode = self._episode
        if episode is None:
            return False
        self._episode = None
        _log.info(
            "state store healthy again: %s written after %d refused commit%s",
            what,
            episode.count,
            "" if episode.count == 1 else "s",
        )
        return True

    def health(self) -> StoreHealth:
        """Unhealthy with the reason while refusing, else healthy."""
        episode = self._episode
        if episode is None:
            return StoreHealth()
        plural = "" if episode.count == 1 else "s"
        return StoreHealth(
            f"state store refuses commits: {episode.count} commit{plural} refused in a row "
            f"since {_utc(episode.since_wall)}, the last: {episode.last_reason}"
        )


def probe_write(fs: FileOps, directory: str, size: int = PROBE_BYTES) -> None:
    """Write ``size`` bytes to the probe file of ``directory``, fsync them, remove it (rule 3).

    Raises:
        OSError: the write or the fsync failed (the disk is still full or failing); the
            probe file is removed as far as possible.
    """
    path = os.path.join(directory, PROBE_FILE)
    fd = fs.open_append(path, create=True)
    try:
        write_all(fs, fd, b"\0" * size)
        fs.fsync(fd)
    finally:
        fs.close(fd)
        remove_quietly(fs, path)


def _utc(wall: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(wall))
