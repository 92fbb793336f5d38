"""One writer per journal directory: an exclusive ``flock`` on the directory itself.

Two processes appending to the same segments would interleave frames and break the sequence.
The lock is a ``flock`` on a descriptor of the journal *directory* (not of a file in it), held
as long as the journal is open for writing (and while ``repair --force`` runs). Locking the
directory's own inode means the exclusion cannot be lost by deleting or replacing a file in
it: an earlier version locked a ``journal.lock`` file, and deleting that file let a second
``qrmd run`` take a fresh lock on a new file of the same name and write the same segments.
A leftover ``journal.lock`` from that version is harmless and left alone. The kernel drops
the lock when the process dies, so a writer restarted after a crash is never blocked by its
dead predecessor. Read-only opens, ``verify`` and a dry-run ``repair`` take no lock.
"""

from __future__ import annotations

import logging

from journal.errors import JournalError
from journal.fileops import DIRECTORY_MODE, FileOps, close_quietly

_log = logging.getLogger("journal")

__all__ = ["hold_lock", "lock_directory"]


def lock_directory(fs: FileOps, directory: str) -> int:
    """Take the journal's writer lock, creating the directory (0700) if missing.

    A directory that exists and belongs to this user is made 0700 too (logged).

    Args:
        fs: the file-system seam.
        directory: the journal directory.

    Returns:
        The lock's descriptor (of the directory); close it to release the lock.

    Raises:
        JournalError: another process holds the lock; the message names the directory.
        OSError: the directory cannot be created or opened.
    """
    fs.makedirs(directory)
    fd = hold_lock(fs, directory)
    try:
        _tighten(fs, directory)
    except BaseException:
        close_quietly(fs, fd)  # a failed open keeps no lock: the retry would find it taken
        raise
    return fd


def hold_lock(fs: FileOps, directory: str) -> int:
    """Take the writer lock on an existing directory, changing nothing on disk.

    The descriptor is read-only, so this works on a read-only file system (``repair`` of a
    copy).

    Args:
        fs: the file-system seam.
        directory: the journal directory.

    Returns:
        The lock's descriptor; close it to release the lock.

    Raises:
        JournalError: another process holds the lock; the message names the directory.
        OSError: the directory cannot be opened.
    """
    try:
        return fs.lock(directory)
    except BlockingIOError as exc:
        raise JournalError(
            f"journal {directory} is in use by another process (it holds an exclusive lock "
            f"on the directory); stop it, or open the journal read-only to inspect it"
        ) from exc


def _tighten(fs: FileOps, directory: str) -> None:
    """Make a journal directory this user owns 0700 (a DaemonSet's hostPath may be 0755).

    The journal holds every pod's name and placement; only the owner may read it. Through the
    file-system seam, so a simulated disk (``qrmd sim``) needs no real directory.
    """
    previous = fs.restrict_to_owner(directory)
    if previous is not None:
        _log.warning(
            "journal directory %s was mode %o; made it %o (owner only)",
            directory,
            previous,
            DIRECTORY_MODE,
        )
