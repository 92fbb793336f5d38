"""One writer per journal directory: an exclusive lock on ``journal.lock``.

Two processes appending to the same segments would interleave frames and break the sequence.
The lock is a ``flock`` held as long as the journal is open for writing (and while ``repair``
runs); the kernel drops it when the process dies, so a writer restarted after a crash is never
blocked by its dead predecessor. Read-only opens and ``verify`` take no lock.
"""

from __future__ import annotations

import os

from journal.errors import JournalError
from journal.fileops import FileOps

__all__ = ["LOCK_NAME", "lock_directory"]

LOCK_NAME = "journal.lock"


def lock_directory(fs: FileOps, directory: str) -> int:
    """Take the journal's writer lock, creating the directory if missing.

    Returns:
        The lock's descriptor; close it to release the lock.

    Raises:
        JournalError: another process holds the lock.
        OSError: the directory or lock file cannot be created.
    """
    fs.makedirs(directory)
    path = os.path.join(directory, LOCK_NAME)
    try:
        return fs.lock(path)
    except BlockingIOError as exc:
        raise JournalError(
            f"journal {directory} is in use by another process (it holds {path}); stop it, "
            f"or open the journal read-only to inspect it"
        ) from exc
