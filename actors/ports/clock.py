"""The clock port: actors read time only through a ``Clock`` they are given (DESIGN.md, Time).

Wall time stamps what people read (journal records, logs); monotonic time measures durations
(recovery time, checkpoint intervals, timeouts). Tests inject a fake clock they advance by hand,
so no test sleeps to wait for a period. The protocol has the same shape as the journal's clock
seam (``journal.Clock``), so one clock serves an actor and the journal it owns.
"""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["SYSTEM_CLOCK", "Clock", "SystemClock"]


class Clock(Protocol):
    """Where an actor gets the time."""

    def time(self) -> float:
        """Wall-clock seconds since the epoch."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin, never going backwards."""
        ...


class SystemClock:
    """The process's real clocks."""

    def time(self) -> float:
        """Wall-clock seconds since the epoch (``time.time``)."""
        return time.time()

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin (``time.monotonic``)."""
        return time.monotonic()


SYSTEM_CLOCK = SystemClock()
