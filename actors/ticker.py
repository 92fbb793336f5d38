"""The Ticker: tells an actor ``Tick(now)`` once per period, from its own thread (DESIGN.md
"Actors and messages": the **Ticker** sends ``Tick``s; memory-balancer §1.1: the advisor loop
runs every ``qos-aware-sync-period``).

Rules:

* The tick is *told*, never asked: a slow round must not stall the ticker, and a round that
  takes longer than a period simply finds the next tick queued behind it (one mailbox keeps
  the order), as the reference's loop starts its next update after the last.
* ``now`` comes from the injected clock, so the actor's rounds, cool-down and ping-pong window
  run on the same time as everything else; tests call ``tick()`` themselves with a fake clock
  and never wait for a period.
* A target that cannot be told (stopped, or restarting under the supervisor) costs that tick
  only: it is counted and logged, and the next period tries again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["Tellable", "Ticker"]

_log = logging.getLogger(__name__)


class Tellable(Protocol):
    """What the ticker needs of its target: pykka's ``tell`` (an ``ActorRef``, a
    ``SupervisedRef``)."""

    def tell(self, message: Any) -> None:
        """Send ``message`` without waiting."""
        ...


class Ticker:
    """Tells ``make_tick(now())`` to ``target`` every ``period_s`` seconds once started.

    Args:
        target: the actor to tick.
        period_s: seconds between ticks; the first tick is one period after ``start``.
        now: the clock the ticks carry (Unix seconds).
        make_tick: builds the message from the time (e.g. ``balancer_messages.Tick``).
        name: the thread's name, for logs.
        wait: waits up to the given seconds and returns True when the ticker should stop;
            default: the ticker's own stop event (tests inject one that returns at once).

    Raises:
        ValueError: ``period_s`` is not positive.
    """

    def __init__(
        self,
        target: Tellable,
        period_s: float,
        now: Callable[[], float],
        make_tick: Callable[[float], Any],
        *,
        name: str = "ticker",
        wait: Callable[[float], bool] | None = None,
    ) -> None:
        if not period_s > 0:
            raise ValueError(f"ticker {name!r}: the period must be positive, got {period_s} s")
        self.period_s = period_s
        self.name = name
        self.ticks_sent = 0
        self.ticks_missed = 0
        self._target = target
        self._now = now
        self._make_tick = make_tick
        self._stop = threading.Event()
        self._wait = wait or self._stop.wait
        self._thread: threading.Thread | None = None

    def tick(self) -> bool:
        """Tell one tick at the clock's time now.

        Returns:
            Whether the target took it (False: it could not be told, see the module rules).
        """
        message = self._make_tick(self._now())
        try:
            self._target.tell(message)
        except Exception as err:
            self.ticks_missed += 1
            _log.info("%s: %r not delivered: %s", self.name, message, err)
            return False
        self.ticks_sent += 1
        return True

    def start(self) -> None:
        """Start ticking on a daemon thread.

        Raises:
            RuntimeError: started before.
        """
        if self._thread is not None:
            raise RuntimeError(f"ticker {self.name!r} was started before")
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop ticking and wait for the thread; safe to call twice or before ``start``."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)
            if thread.is_alive():
                _log.error("bug: ticker %s still running %s s after stop", self.name, timeout_s)

    @property
    def running(self) -> bool:
        """Whether the thread is ticking."""
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        while not self._wait(self.period_s) and not self._stop.is_set():
            self.tick()
