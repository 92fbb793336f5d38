"""The clock seam: the journal reads time only through a ``Clock`` it is given.

Records carry wall time (for people reading a timeline) and monotonic time (for durations);
checkpoint scheduling and fsync latency use the monotonic reading. Tests pass a fake clock they
advance by hand, so no test sleeps (STYLE.md, Tests). The ``time`` module itself satisfies the
protocol; ``SYSTEM_CLOCK`` is the explicit default.
"""

from __future__ import annotations

import time
from typing import Protocol

__all__ = ["SYSTEM_CLOCK", "Clock", "SystemClock"]


class Clock(Protocol):
    """Where the journal gets the time."""

    def time(self) -> float:
        """Wall-clock seconds since the epoch."""
        ...

    def monotonic(self) -> float:
        """Seconds from an arbitrary origin, never going backwards."""
        ...


class SystemClock:
    """The process's real clocks."""

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()


SYSTEM_CLOCK = SystemClock()
