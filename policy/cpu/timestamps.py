"""The QRM time format of ``init_timestamp`` (spec cpu-policy §5.7, wire.md §12.9).

The reference writes Go's layout ``2006-01-02 15:04:05.999999999 -0700 MST``:
``YYYY-MM-DD HH:MM:SS``, a fraction of 1–9 digits with trailing zeros trimmed (no dot when it
is zero), a numeric offset ``±hhmm`` and a zone abbreviation. The reference writes local time;
qrmd always writes UTC (``+0000 UTC``). Formatting takes the instant as an argument; nothing
here reads a clock.

Parsing accepts what Go's ``time.Parse`` accepts for this layout, so a timestamp kubelet or
Katalyst wrote reads the same here: a one- or two-digit hour, any number of fraction digits
after ``.`` or ``,`` (digits past the ninth are dropped), an offset whose hours and minutes may
reach 24 and 60, and a zone that is ``UTC``, ``GMT`` with an optional offset (``GMT+8``), a
signed offset (``+08``, ``-0330``), ``ChST``, ``MeST``, ``WITA``, or three upper-case letters,
or four or five ending in ``T``. The numeric offset decides the instant; the abbreviation is
ignored. (Go itself lets a literal ``UTC`` override the offset, a difference no writer of this
layout can expose: Go only writes ``UTC`` with ``+0000``.) An empty or unparsable string is a
"bad timestamp": the parsers return ``None`` and the caller re-ramps (§10.1).
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timedelta
from functools import lru_cache

__all__ = [
    "format_qrm_datetime",
    "format_qrm_time",
    "format_qrm_time_ns",
    "parse_qrm_time",
    "parse_qrm_time_ns",
]

_NS_PER_S = 1_000_000_000
_S_PER_DAY = 86_400
_MIN_YEAR, _MAX_YEAR = 0, 9999

_ZONE = (
    r"UTC|ChST|MeST|WITA|GMT(?:[+-][0-9]{1,2})?|[+-](?:[0-9]{1,2}|[0-9]{4})"
    r"|[A-Z]{3}|[A-Z]{3}T|[A-Z]{4}T"
)
# Matched through ``re``'s cache, so compiled at the first timestamp parsed, not at qrmd
# run's start, which parses none (bench/bench_startup.py).
_LAYOUT = (
    r"(?P<year>[0-9]{4})-(?P<month>[0-9]{2})-(?P<day>[0-9]{2}) "
    r"(?P<hour>[0-9]{1,2}):(?P<minute>[0-9]{2}):(?P<second>[0-9]{2})"
    r"(?:[.,](?P<fraction>[0-9]+))? "
    r"(?P<sign>[+-])(?P<off_hours>[0-9]{2})(?P<off_minutes>[0-9]{2}) "
    rf"(?:{_ZONE})"
)


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 to a proleptic Gregorian date (any year, including 0)."""
    # Shift the year to start in March so the leap day is the year's last.
    year -= month <= 2
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146_097 + day_of_era - 719_468


def _civil_from_days(days: int) -> tuple[int, int, int]:
    """The (year, month, day) ``days`` after 1970-01-01; inverse of ``_days_from_civil``."""
    days += 719_468
    era = days // 146_097
    day_of_era = days - era * 146_097
    year_of_era = (
        day_of_era - day_of_era // 1460 + day_of_era // 36_524 - day_of_era // 146_096
    ) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    shifted_month = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * shifted_month + 2) // 5 + 1
    month = shifted_month + (3 if shifted_month < 10 else -9)
    return year_of_era + era * 400 + (month <= 2), month, day


def _days_in_month(year: int, month: int) -> int:
    following = (year + 1, 1) if month == 12 else (year, month + 1)
    return _days_from_civil(*following, 1) - _days_from_civil(year, month, 1)


def format_qrm_time_ns(epoch_ns: int) -> str:
    """Format an instant, in nanoseconds since the Unix epoch, in UTC.

    Args:
        epoch_ns: the instant; years 0 to 9999 are representable.

    Returns:
        e.g. ``2024-05-08 01:59:26.1234 +0000 UTC``.

    Raises:
        ValueError: the instant is outside years 0–9999.
    """
    seconds, nanos = divmod(epoch_ns, _NS_PER_S)
    whole = _whole_second(seconds)
    if whole is None:
        year = _civil_from_days(seconds // _S_PER_DAY)[0]
        raise ValueError(f"instant {epoch_ns} ns is in year {year}, outside 0-9999")
    fraction = f".{nanos:09d}".rstrip("0") if nanos else ""
    return f"{whole}{fraction} +0000 UTC"


@lru_cache(maxsize=64)
def _whole_second(seconds: int) -> str | None:
    """``YYYY-MM-DD HH:MM:SS`` of a second since the epoch, or None outside years 0–9999.

    Remembered per second: every new container's ``init_timestamp`` is formatted, and the
    calls of one second share their calendar arithmetic.
    """
    days, second_of_day = divmod(seconds, _S_PER_DAY)
    year, month, day = _civil_from_days(days)
    if not _MIN_YEAR <= year <= _MAX_YEAR:
        return None
    hour, rest = divmod(second_of_day, 3600)
    minute, second = divmod(rest, 60)
    return f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}"


def format_qrm_time(epoch_s: float) -> str:
    """Format an instant, in seconds since the Unix epoch, in UTC to the microsecond.

    A float holds about microseconds at today's epoch; rounding there keeps ``.5`` from
    printing as ``.499999762``.

    Args:
        epoch_s: the instant, e.g. a clock's ``time()``.

    Returns:
        e.g. ``2024-05-08 01:59:26.5 +0000 UTC``.

    Raises:
        ValueError: the instant is not finite or is outside years 0–9999.
    """
    if not math.isfinite(epoch_s):
        raise ValueError(f"instant {epoch_s} s is not a finite time")
    return format_qrm_time_ns(round(epoch_s * 1_000_000) * 1000)


def format_qrm_datetime(when: datetime) -> str:
    """Format a zone-aware datetime in UTC.

    Args:
        when: the instant; it must carry a zone.

    Returns:
        e.g. ``2024-05-08 01:59:26 +0000 UTC``.

    Raises:
        ValueError: ``when`` is naive (its instant is unknown).
    """
    offset = when.utcoffset()
    if offset is None:
        raise ValueError(f"datetime {when.isoformat()} has no zone; its instant is unknown")
    local_s = (
        _days_from_civil(when.year, when.month, when.day) * _S_PER_DAY
        + when.hour * 3600
        + when.minute * 60
        + when.second
    )
    # Python allows offsets with microseconds; count in microseconds to stay exact.
    utc_us = local_s * 1_000_000 + when.microsecond - offset // timedelta(microseconds=1)
    return format_qrm_time_ns(utc_us * 1000)


def parse_qrm_time_ns(text: str) -> int | None:
    """Parse the QRM layout into nanoseconds since the Unix epoch.

    Args:
        text: e.g. ``2024-05-08 09:59:26.123456789 +0800 CST``.

    Returns:
        The instant, or ``None`` for an empty or unparsable string (a bad timestamp),
        including impossible dates such as February 30.
    """
    match = re.fullmatch(_LAYOUT, text, re.ASCII)
    if match is None:
        return None
    year, month, day = (int(match[name]) for name in ("year", "month", "day"))
    hour, minute, second = (int(match[name]) for name in ("hour", "minute", "second"))
    off_hours, off_minutes = int(match["off_hours"]), int(match["off_minutes"])
    if not (1 <= month <= 12 and 1 <= day <= _days_in_month(year, month)):
        return None
    if hour >= 24 or minute >= 60 or second >= 60:
        return None
    # Go allows offsets of 24 hours or 60 minutes: "some people do write" them.
    if off_hours > 24 or off_minutes > 60:
        return None
    offset_s = (off_hours * 60 + off_minutes) * 60 * (-1 if match["sign"] == "-" else 1)
    nanos = int((match["fraction"] or "0")[:9].ljust(9, "0"))
    local_s = _days_from_civil(year, month, day) * _S_PER_DAY + hour * 3600 + minute * 60 + second
    return (local_s - offset_s) * _NS_PER_S + nanos


def parse_qrm_time(text: str) -> float | None:
    """Parse the QRM layout into seconds since the Unix epoch (see :func:`parse_qrm_time_ns`).

    Args:
        text: the timestamp.

    Returns:
        The instant in seconds, or ``None`` for a bad timestamp.
    """
    epoch_ns = parse_qrm_time_ns(text)
    return None if epoch_ns is None else epoch_ns / _NS_PER_S
