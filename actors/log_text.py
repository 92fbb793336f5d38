"""How actors write a time in a log line: for the person reading it, not for Python.

A wall time in a log line is ISO-8601 UTC to the millisecond (``2026-12-07T07:58:01.123Z``),
never a raw epoch float: an operator reading the daemon's log at 3 a.m. compares it with
kubelet's and the journal's times, which read the same way.
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["utc"]


def utc(wall: float) -> str:
    """A wall-clock time (seconds since the epoch) as ISO-8601 UTC to the millisecond."""
    return (
        datetime.fromtimestamp(wall, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )
