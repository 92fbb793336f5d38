"""The file-system seam: every call the journal makes on files goes through ``FileOps``.

The real implementation, ``OsFileOps``, is a thin layer over ``os``. Tests substitute a subclass
that fails a write, an fsync or a truncation on demand, so that the write-ahead rules (DESIGN.md,
the commit protocol, step 3) are exercised without a broken disk.

Descriptors are plain ints; writes append (``O_APPEND``), so after a truncation the next write
lands at the new end without a seek.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from typing import Protocol

__all__ = ["TEMP_SUFFIX", "FileOps", "OsFileOps", "remove_quietly", "write_all"]

#: Suffix of a segment or checkpoint being written atomically (written, fsynced, then renamed).
#: One constant, because opening the journal removes exactly the files the writers leave.
TEMP_SUFFIX = ".tmp"


class FileOps(Protocol):
    """The file operations the journal needs. Every method raises ``OSError`` on failure."""

    def listdir(self, directory: str) -> list[str]:
        """Names of the entries in ``directory``."""
        ...

    def makedirs(self, directory: str) -> None:
        """Create ``directory`` and its parents if missing."""
        ...

    def exists(self, path: str) -> bool:
        """Whether ``path`` exists."""
        ...

    def size(self, path: str) -> int:
        """Length of the file in bytes."""
        ...

    def mtime(self, path: str) -> float:
        """Modification time, seconds since the epoch."""
        ...

    def read_file(self, path: str) -> bytes:
        """The whole content of a file."""
        ...

    def open_append(self, path: str, *, create: bool) -> int:
        """Open for appending (``O_WRONLY|O_APPEND``), creating it exclusively if ``create``."""
        ...

    def write(self, fd: int, data: bytes) -> int:
        """Write some of ``data``; returns how many bytes were written (may be short)."""
        ...

    def fsync(self, fd: int) -> None:
        """Make the file's data and length durable."""
        ...

    def truncate(self, fd: int, length: int) -> None:
        """Cut the file to ``length`` bytes."""
        ...

    def close(self, fd: int) -> None:
        """Close a descriptor."""
        ...

    def rename(self, src: str, dst: str) -> None:
        """Atomically replace ``dst`` by ``src`` (same directory)."""
        ...

    def unlink(self, path: str) -> None:
        """Remove a file."""
        ...

    def fsync_dir(self, directory: str) -> None:
        """Make the directory's entries (creations, renames, removals) durable."""
        ...

    def lock(self, path: str) -> int:
        """Take an exclusive, non-blocking lock on ``path`` (created if missing).

        Returns:
            A descriptor; the lock lasts until it is closed or the process dies.

        Raises:
            BlockingIOError: another process holds the lock.
        """
        ...


class OsFileOps:
    """``FileOps`` on the real file system."""

    def listdir(self, directory: str) -> list[str]:
        return os.listdir(directory)

    def makedirs(self, directory: str) -> None:
        os.makedirs(directory, exist_ok=True)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def size(self, path: str) -> int:
        return os.stat(path).st_size

    def mtime(self, path: str) -> float:
        return os.stat(path).st_mtime

    def read_file(self, path: str) -> bytes:
        with open(path, "rb") as handle:
            return handle.read()

    def open_append(self, path: str, *, create: bool) -> int:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC
        if create:
            flags |= os.O_CREAT | os.O_EXCL
        return os.open(path, flags, 0o600)

    def write(self, fd: int, data: bytes) -> int:
        return os.write(fd, data)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def truncate(self, fd: int, length: int) -> None:
        os.ftruncate(fd, length)

    def close(self, fd: int) -> None:
        os.close(fd)

    def rename(self, src: str, dst: str) -> None:
        os.rename(src, dst)

    def unlink(self, path: str) -> None:
        os.unlink(path)

    def fsync_dir(self, directory: str) -> None:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def lock(self, path: str) -> int:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise
        return fd


def write_all(fs: FileOps, fd: int, data: bytes) -> None:
    """Write all of ``data``, continuing after short writes.

    Raises:
        OSError: a write failed or made no progress; some of ``data`` may have been written.
    """
    written = fs.write(fd, data)
    while written < len(data):
        step = fs.write(fd, data[written:])
        if step <= 0:
            raise OSError(f"write made no progress after {written} of {len(data)} bytes")
        written += step


def remove_quietly(fs: FileOps, path: str) -> None:
    """Remove ``path`` if possible; used on error paths where another error is being reported."""
    # Best effort: the caller is already reporting the real failure, and a stale temporary
    # file is removed at the next open.
    with contextlib.suppress(OSError):
        fs.unlink(path)
