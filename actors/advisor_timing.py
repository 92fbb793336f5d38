"""The advisor link's clocks as pure values: the back-off and the receive-stuck monitor
(cpu-policy §11.2 steps 5 and 7, §14). Time is always an argument, so both are tested with
timelines and no sleeps.

Back-off (§11.2 step 5; the reference's ``NewExponentialBackoffManager(0.8 s, 30 s, 2 min,
2.0, 0)``): each ended attempt waits, the wait starting when the attempt returned
("sliding"): 0.8 s, 1.6 s, 3.2 s, 6.4 s, 12.8 s, 25.6 s, then 30 s for good; when more than
2 minutes passed since the previous wait started, the sequence starts again at 0.8 s. No
jitter. The reset test is the machine's guard ``backoff_reset_due``.

Receive-stuck monitor (§11.2 step 7): every 30 s, when no ListAndWatch receive (a result or an
error) happened yet, or the last one is older than 30 s, the link logs a warning and sets
``lw_recv_stuck``. Purely observational. The reference checks at once at start, so every start
reports "stuck" before a stream exists; qrmd follows the spec's recommendation: the first check
is one period after the stream opens, and no check runs while no stream is open.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Final

__all__ = [
    "BACKOFF_CAP_S",
    "BACKOFF_FACTOR",
    "BACKOFF_INITIAL_S",
    "BACKOFF_RESET_AFTER_S",
    "RECV_STUCK_INTERVAL_S",
    "RECV_STUCK_THRESHOLD_S",
    "Backoff",
    "ReceiveMonitor",
]

BACKOFF_INITIAL_S: Final = 0.8
BACKOFF_FACTOR: Final = 2.0
BACKOFF_CAP_S: Final = 30.0
BACKOFF_RESET_AFTER_S: Final = 120.0
RECV_STUCK_INTERVAL_S: Final = 30.0
RECV_STUCK_THRESHOLD_S: Final = 30.0


@dataclass(frozen=True, slots=True)
class Backoff:
    """The next wait of the sliding exponential back-off.

    Attributes:
        delay_s: the wait the next back-off takes unless it is reset.
        last_start: when the previous wait started (None: never).
    """

    delay_s: float = BACKOFF_INITIAL_S
    last_start: float | None = None

    def reset_due(self, now: float) -> bool:
        """The guard ``backoff_reset_due``: more than 2 minutes since the previous wait
        started, or no wait yet (the reference's zero time is long ago)."""
        return self.last_start is None or now - self.last_start > BACKOFF_RESET_AFTER_S

    def start(self, now: float, reset: bool) -> tuple[float, Backoff]:
        """Start a wait at ``now``.

        Args:
            now: when the ended attempt returned.
            reset: the machine's taken action was ``reset_backoff`` (else ``double_backoff``).

        Returns:
            How long to wait, and the back-off for the wait after.
        """
        delay = BACKOFF_INITIAL_S if reset else self.delay_s
        following = min(delay * BACKOFF_FACTOR, BACKOFF_CAP_S)
        return delay, Backoff(following, now)


@dataclass(frozen=True, slots=True)
class ReceiveMonitor:
    """When the stream opened, its last receive, and the next check.

    Attributes:
        next_check: when the next check is due (None: no stream open, nothing to check).
        last_receive: the last receive of the current stream (None: none yet).
    """

    next_check: float | None = None
    last_receive: float | None = None

    def stream_opened(self, now: float) -> ReceiveMonitor:
        """A stream opened at ``now``: the first check is one period later."""
        return ReceiveMonitor(now + RECV_STUCK_INTERVAL_S, None)

    def received(self, now: float) -> ReceiveMonitor:
        """A receive (a result or the stream's error) happened at ``now``."""
        return replace(self, last_receive=now)

    def stream_closed(self) -> ReceiveMonitor:
        """No stream: no checks until the next one opens."""
        return ReceiveMonitor()

    def check(self, now: float) -> tuple[bool | None, ReceiveMonitor]:
        """Run the checks due by ``now``.

        Returns:
            ``(stuck, monitor)``: ``stuck`` is None when no check was due, else whether the
            last due check found the stream stuck; the monitor has its next check scheduled a
            period after the last one due (a late tick runs one check, not a burst).
        """
        if self.next_check is None or now < self.next_check:
            return None, self
        periods = int((now - self.next_check) // RECV_STUCK_INTERVAL_S) + 1
        next_check = self.next_check + periods * RECV_STUCK_INTERVAL_S
        stuck = self.last_receive is None or now - self.last_receive > RECV_STUCK_THRESHOLD_S
        return stuck, replace(self, next_check=next_check)
