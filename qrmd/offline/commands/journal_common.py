"""What every ``qrmd journal`` action shares: its error type and exit status, and the checks
that a directory is a journal before anything is read."""

from __future__ import annotations

import os

__all__ = [
    "DIR_HELP",
    "EXIT_PROBLEMS",
    "JournalCommandError",
    "need_directory",
    "need_segments",
    "refuse",
]

#: Every action's DIR.
DIR_HELP = "the journal directory: the daemon's --state-dir, or a copy of it (cp -a)"

#: Exit status when an action found problems (verify, repair needing --force, an empty
#: selection, damage read past); 2 is an error (``qrmd.cli``).
EXIT_PROBLEMS = 1


class JournalCommandError(ValueError):
    """A failure reported as one line (``qrmd.cli`` prints every ``ValueError`` so)."""


def refuse(message: str) -> Exception:
    """The error for ``message``, to raise."""
    return JournalCommandError(message)


def need_directory(directory: str) -> None:
    """Refuse a path that is not a directory.

    Raises:
        JournalCommandError: names the path.
    """
    if not os.path.isdir(directory):
        raise refuse(f"no journal at {directory}: not a directory")


def need_segments(directory: str) -> None:
    """Refuse a directory with no journal segment in it (an empty or wrong directory).

    Raises:
        JournalCommandError: names the directory and what was expected.
    """
    need_directory(directory)
    if not any(name.endswith(".seg") for name in os.listdir(directory)):
        raise refuse(
            f"no journal at {directory}: the directory holds no segment (*.seg); is it the "
            f"daemon's --state-dir journal directory?"
        )
