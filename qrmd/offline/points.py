"""Where in a journal a forensic question points: a seq, an absolute time, or a relative one.

On-call copies a node's journal to a laptop hours later, so "the last hour" must mean the
journal's last hour, not the laptop's (DESIGN.md, "Who uses it"): a relative time (``1h``,
``90m``, ``30s``, ``2d``, optionally written ``-1h``) is counted back from the wall time of the
journal's newest record. Absolute times are Unix seconds (``1732924800.5``) or ISO 8601 (no
zone means UTC) — the one time format of every qrmd command
(``qrmd.offline.journal_view.parse_time``).
A *point* (``diff --from/--to``) is ``seq:N`` or any time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from qrmd.offline.journal_view import parse_time

__all__ = ["TIME_FORMS", "Point", "is_relative", "parse_point", "resolve_time"]

TIME_FORMS = (
    "Unix seconds (1732924800), ISO 8601 (2024-11-30T03:12:00Z; no zone means UTC), or a "
    "duration back from the journal's newest record (90s, 15m, 1h, 2d)"
)

_RELATIVE = re.compile(r"^-?(\d+(?:\.\d+)?)\s*(s|m|h|d)$")
_UNIT_S = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def is_relative(text: str) -> bool:
    """True when ``text`` is a duration counted back from the journal's newest record."""
    return _RELATIVE.match(text.strip()) is not None


def resolve_time(text: str, last_wall_time: float | None) -> float:
    """Seconds since the epoch that ``text`` names.

    Args:
        text: an absolute or relative time (module docstring).
        last_wall_time: the wall time of the journal's newest record; None when it has none.

    Returns:
        The instant.

    Raises:
        ValueError: not a time in any of the forms, or a relative time on an empty journal.
    """
    match = _RELATIVE.match(text.strip())
    if match is None:
        try:
            return parse_time(text)
        except ValueError as err:
            raise ValueError(
                f"{err} nor a duration back from the journal's newest record (90s, 15m, 1h, 2d)"
            ) from None
    if last_wall_time is None:
        raise ValueError(
            f"time {text!r} counts back from the journal's newest record, but it has none"
        )
    return last_wall_time - float(match.group(1)) * _UNIT_S[match.group(2)]


@dataclass(frozen=True, slots=True)
class Point:
    """A point in a journal: after record ``seq``, or the last record at or before ``time``."""

    seq: int | None = None
    time: str | None = None

    def describe(self) -> str:
        """The point as the user wrote it."""
        return f"seq:{self.seq}" if self.seq is not None else str(self.time)


def parse_point(text: str) -> Point:
    """Read ``seq:N`` or a time (not yet resolved: relative times need the journal).

    Raises:
        ValueError: ``seq:`` followed by something other than a non-negative integer, or a
            time in none of the forms.
    """
    if text.startswith("seq:"):
        number = text[len("seq:") :]
        if not number.isdigit():
            raise ValueError(f"point {text!r}: after 'seq:' comes a record number (seq:42)")
        return Point(seq=int(number))
    resolve_time(text, 0.0)  # refuse a malformed time now, before reading anything
    return Point(time=text)
