"""The file-system seam: every call the journal makes on files goes through ``FileOps``.

The real implementation, ``OsFileOps``, is a thin layer over ``os``. Tests substitute a subclass
that fails a write, an fsync or a truncation on demand, so that the write-ahead rules (DESIGN.md,
the commit protocol, step 3) are exercised without a broken disk.

Descriptors are plain ints; writes append (``O_APPEND``), so after a truncation the next write
lands at the new end without a seek.

Permissions do not depend on the umask (DESIGN.md, owner-only): every directory ``makedirs``
creates is 0700 and every file ``open_append`` creates is 0600, set explicitly after creation,
since a umask can only take bits away from the mode ``mkdir``/``open`` are given and an
operator's ``umask 000`` must not publish the journal. Directories that already exist keep
their mode: qrmd does not own them.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
from typing import Protocol

__all__ = [
    "DIRECTORY_MODE",
    "FILE_MODE",
    "TEMP_SUFFIX",
    "FileOps",
    "OsFileOps",
    "close_quietly",
    "make_private_dirs",
    "remove_quietly",
    "write_all",
]

#: Suffix of a segment or checkpoint being written atomically (written, fsynced, then renamed).
#: One constant, because opening the journal removes exactly the files the writers leave.
TEMP_SUFFIX = ".tmp"
#: Mode of every directory the journal creates (the state directory and its parents).
DIRECTORY_MODE = 0o700
#: Mode of every file the journal creates (segments, checkpoints, ``.broken`` copies).
FILE_MODE = 0o600


class FileOps(Protocol):
    """The file operations the journal needs. Every method raises ``OSError`` on failure."""

    def listdir(self, directory: str) -> list[str]:
        """Names of the entries in ``directory``."""
        ...

    def makedirs(self, directory: str) -> None:
        """Create ``directory`` and its missing parents, each 0700 whatever the umask."""
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

    def read_from(self, path: str, offset: int) -> bytes:
        """The content of a file from ``offset`` to its end (empty past the end)."""
        ...

    def open_append(self, path: str, *, create: bool) -> int:
        """Open for appending (``O_WRONLY|O_APPEND``); ``create`` makes it, exclusively, 0600."""
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

    def restrict_to_owner(self, directory: str) -> int | None:
        """Make a directory this user owns 0700 (a DaemonSet's hostPath may be 0755).

        A directory owned by someone else is left alone (it is not ours to change).

        Returns:
            The mode it had when it was changed, else None.
        """
        ...

    def lock(self, path: str) -> int:
        """Take an exclusive, non-blocking ``flock`` on an existing directory (or file).

        Returns:
            A read-only descriptor of ``path``; the lock lasts until it is closed or the
            process dies.

        Raises:
            BlockingIOError: another process holds the lock.
        """
        ...


class OsFileOps:
    """``FileOps`` on the real file system."""

    def listdir(self, directory: str) -> list[str]:
        return os.listdir(directory)

    def makedirs(self, directory: str) -> None:
        make_private_dirs(directory)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def size(self, path: str) -> int:
        return os.stat(path).st_size

    def mtime(self, path: str) -> float:
        return os.stat(path).st_mtime

    def read_file(self, path: str) -> bytes:
        with open(path, "rb") as handle:
            return handle.read()

    def read_from(self, path: str, offset: int) -> bytes:
        with open(path, "rb") as handle:
            handle.seek(offset)
            return handle.read()

    def open_append(self, path: str, *, create: bool) -> int:
        flags = os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC
        if create:
            flags |= os.O_CREAT | os.O_EXCL
        fd = os.open(path, flags, FILE_MODE)
        if create:
            try:
                os.fchmod(fd, FILE_MODE)  # the umask may have taken the owner's bits
            except OSError:
                os.close(fd)
                raise
        return fd

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

    def restrict_to_owner(self, directory: str) -> int | None:
        info = os.stat(directory)
        current = stat.S_IMODE(info.st_mode)
        if info.st_uid != os.geteuid() or current == DIRECTORY_MODE:
            return None
        os.chmod(directory, DIRECTORY_MODE)
        return current

    def lock(self, path: str) -> int:
        # Read-only: a directory cannot be opened for writing, and flock needs no write access.
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise
        return fd


def make_private_dirs(directory: str) -> None:
    """Create ``directory`` and its missing parents, each 0700 whatever the umask.

    ``os.makedirs`` gives the leaf the mode it is told but the parents the umask's default
    (0777 under ``umask 000``), so each missing component is made here, outermost first, and
    ``chmod``-ed after creation. Components that exist are left as they are.

    Raises:
        OSError: a component cannot be created (the message names it), or a non-directory
            is in the way.
    """
    missing = []
    path = os.path.abspath(directory)
    while not os.path.isdir(path):
        missing.append(path)
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    for component in reversed(missing):
        try:
            os.mkdir(component, DIRECTORY_MODE)
        except FileExistsError:
            if not os.path.isdir(component):
                raise
            continue  # made concurrently by someone else: theirs, leave its mode alone
        os.chmod(component, DIRECTORY_MODE)


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


def close_quietly(fs: FileOps, fd: int) -> None:
    """Close ``fd`` if possible; used on error paths where another error is being reported."""
    # A descriptor whose close fails is released by the kernel all the same (close(2) frees it
    # even when it reports an error); the caller's own failure is the one worth raising.
    with contextlib.suppress(OSError):
        fs.close(fd)
