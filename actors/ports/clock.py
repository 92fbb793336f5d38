"""The clock port: actors read time only through a ``Clock`` they are given (DESIGN.md, Time).

Wall time stamps what people read (journal records, logs); monotonic time measures durations
(recovery time, checkpoint intervals, timeouts). Tests inject a fake clock they advance by hand,
so no test sleeps to wait for a period.

The port is the journal's clock seam itself (``journal.clock``), re-exported here so actors and
the composition root name it as a port: one clock serves an actor and the journal it owns, and
there is one definition of what a clock is.
"""

from __future__ import annotations

from journal.clock import SYSTEM_CLOCK, Clock, SystemClock

__all__ = ["SYSTEM_CLOCK", "Clock", "SystemClock"]
