"""Every fsync the journal makes, timed: latency statistics and a warning when one is slow.

An fsync is where a commit waits on the disk, so its latency is the commit latency. The
statistics are kept simple (count, total, maximum) for the metrics endpoint to export later;
a slow fsync (more than ``slow_fsync_s``, 1 s by default) is logged as a warning because it
means kubelet's calls are waiting on a struggling disk.

Durability ``none`` turns every fsync into a no-op here, in one place (DESIGN.md, Journal).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from journal.clock import Clock
from journal.fileops import FileOps

__all__ = ["FsyncStats", "Syncer"]

_log = logging.getLogger("journal")


@dataclass(slots=True)
class FsyncStats:
    """Latency of the fsyncs made so far (files and directories together).

    Attributes:
        count: fsyncs made.
        total_s: seconds spent in them.
        max_s: the longest one.
        slow: how many took longer than the slow threshold.
    """

    count: int = 0
    total_s: float = 0.0
    max_s: float = 0.0
    slow: int = 0

    @property
    def mean_s(self) -> float:
        """Average seconds per fsync (0 before the first)."""
        return self.total_s / self.count if self.count else 0.0


class Syncer:
    """Makes files and directories durable when the durability setting asks for it."""

    def __init__(
        self, fs: FileOps, clock: Clock, *, enabled: bool, slow_fsync_s: float = 1.0
    ) -> None:
        """Create a syncer.

        Args:
            fs: the file-system seam.
            clock: whose monotonic reading times each fsync.
            enabled: False for durability ``none``: every call returns at once.
            slow_fsync_s: an fsync longer than this is logged as a warning.
        """
        self._fs = fs
        self._clock = clock
        self.enabled = enabled
        self.slow_fsync_s = slow_fsync_s
        self.stats = FsyncStats()

    def sync_file(self, fd: int, what: str) -> None:
        """fsync a descriptor.

        Args:
            fd: the open file.
            what: the file's name, for the slow-fsync warning.

        Raises:
            OSError: the fsync failed (the data may not be on disk).
        """
        if self.enabled:
            self._timed(lambda: self._fs.fsync(fd), what)

    def sync_dir(self, directory: str) -> None:
        """fsync a directory, so that the entries created or renamed in it survive a power loss.

        Raises:
            OSError: the fsync failed.
        """
        if self.enabled:
            self._timed(lambda: self._fs.fsync_dir(directory), directory)

    def _timed(self, call: Callable[[], None], what: str) -> None:
        start = self._clock.monotonic()
        try:
            call()
        finally:
            elapsed = self._clock.monotonic() - start
            stats = self.stats
            stats.count += 1
            stats.total_s += elapsed
            stats.max_s = max(stats.max_s, elapsed)
            if elapsed > self.slow_fsync_s:
                stats.slow += 1
                _log.warning(
                    "slow fsync of %s: %.3f s (threshold %.3f s); commits wait on the disk",
                    what,
                    elapsed,
                    self.slow_fsync_s,
                )
