"""Health: what ``/healthz`` answers (spec cpu-policy §12.3; DESIGN.md "Supervisor").

The daemon is healthy when all of these hold, and otherwise unhealthy with one reason each:

* every supervised actor is alive and none is restarting (``Supervisor.status``);
* the state store's latest published status is healthy (today: its journal did not fail
  beyond repair); its reason is the store's own words (``actors.store_status.StoreHealth``);
* no periodic handler is *failing*. A handler reports after each run, "update by error": no
  error → Ready, an error → NotReady with the error as its message. With §12.3's heartbeat
  semantics a check is failing when (a) its last update is older than its timeout, or (b) it
  is not Ready and has been so for longer than its tolerance, measured from its last
  Ready→NotReady transition; a check never Ready fails as soon as it is NotReady. The
  reference registers each handler with timeout = tolerance = 3 × its period, NotReady at
  first; ``HandlerHealth.for_period`` does the same.

Beside them, the registry holds liveness sources: what fails ``/livez`` as well (the
supervisor's status is given to the endpoint directly). Only a fault inside the process
belongs there, as a restart must cure it: the kubelet call path wedged for a minute
(``wire.call_watch``). It also holds the gauges behind its checks (``HealthGauge``), which the
metrics collector reads at each scrape, so that a check's figure reaches ``/metrics`` without
its subsystem loading prometheus_client.

Time is an argument (a monotonic clock), so the rules are tested without sleeping.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass

__all__ = [
    "HEALTH_TOLERATION_MULTIPLIER",
    "HandlerHealth",
    "HealthGauge",
    "HealthRegistry",
    "HealthReport",
]

#: §14: timeout and tolerance of a periodic handler are this many periods.
HEALTH_TOLERATION_MULTIPLIER = 3


class HandlerHealth:
    """One periodic handler's heartbeat check (§12.3). Thread-safe.

    Args:
        name: the handler's name (e.g. ``qrm_cpu_plugin_dynamic_clear_residual_state``).
        timeout_s: an update older than this fails the check.
        tolerance_s: NotReady for longer than this fails the check.
        now: the monotonic time of registration (the first "update").
    """

    def __init__(self, name: str, timeout_s: float, tolerance_s: float, now: float) -> None:
        self.name = name
        self._timeout_s = timeout_s
        self._tolerance_s = tolerance_s
        self._lock = threading.Lock()
        self._ready = False
        self._message = "not run yet"
        self._last_update = now
        # None: never Ready, so NotReady fails at once (§12.3).
        self._unready_since: float | None = None

    @classmethod
    def for_period(cls, name: str, period_s: float, now: float) -> HandlerHealth:
        """The reference's registration: timeout = tolerance = 3 × ``period_s``."""
        limit = HEALTH_TOLERATION_MULTIPLIER * period_s
        return cls(name, limit, limit, now)

    def update(self, error: str | None, now: float) -> None:
        """Report one run: ``None`` → Ready, an error text → NotReady with that message."""
        with self._lock:
            if error is None:
                self._ready, self._message = True, ""
            else:
                if self._ready:
                    self._unready_since = now
                self._ready, self._message = False, error
            self._last_update = now

    def failing(self, now: float) -> str | None:
        """Why the check fails at ``now``, or None while it passes."""
        with self._lock:
            age = now - self._last_update
            if age > self._timeout_s:
                return (
                    f"handler {self.name} last reported {age:.0f} s ago "
                    f"(timeout {self._timeout_s:.0f} s)"
                )
            if self._ready:
                return None
            if self._unready_since is None or now - self._unready_since > self._tolerance_s:
                return f"handler {self.name} not ready: {self._message}"
            return None


@dataclass(frozen=True, slots=True)
class HealthReport:
    """The answer of ``/healthz``: healthy, or the reasons it is not."""

    reasons: tuple[str, ...]

    @property
    def healthy(self) -> bool:
        """No reason to be unhealthy."""
        return not self.reasons


#: A source of unhealthy reasons (none: healthy), e.g. the supervisor's down actors.
ProblemSource = Callable[[], Iterable[str]]


@dataclass(frozen=True, slots=True)
class HealthGauge:
    """A figure behind a health check, exported as a Prometheus gauge.

    Attributes:
        name: the metric's name (``qrmd_...``).
        doc: its help text.
        read: its value now.
    """

    name: str
    doc: str
    read: Callable[[], float]


class HealthRegistry:
    """Collects problem sources and handler checks into one ``HealthReport``.

    Args:
        monotonic: the clock handler checks are measured on.
    """

    def __init__(self, monotonic: Callable[[], float]) -> None:
        self._monotonic = monotonic
        self._sources: list[ProblemSource] = []
        self._handlers: list[HandlerHealth] = []
        self._liveness: list[ProblemSource] = []
        self._gauges: list[HealthGauge] = []
        self._lock = threading.Lock()

    def add_source(self, source: ProblemSource) -> None:
        """Ask ``source`` for problems at each check."""
        with self._lock:
            self._sources.append(source)

    def add_liveness_source(self, source: ProblemSource) -> None:
        """Ask ``source`` at each ``/livez`` check (a fault inside the process only)."""
        with self._lock:
            self._liveness.append(source)

    def liveness(self) -> tuple[str, ...]:
        """Every reason ``/livez`` fails from the liveness sources (one that raises is a
        reason too)."""
        with self._lock:
            sources = list(self._liveness)
        return tuple(_problems(sources))

    def add_gauge(self, gauge: HealthGauge) -> None:
        """Export ``gauge`` with the daemon's metrics (read at each scrape)."""
        with self._lock:
            self._gauges.append(gauge)

    def gauges(self) -> tuple[HealthGauge, ...]:
        """The gauges added so far."""
        with self._lock:
            return tuple(self._gauges)

    def register_handler(self, name: str, period_s: float) -> HandlerHealth:
        """Register a periodic handler's check (timeout = tolerance = 3 periods).

        Returns:
            The check the handler reports to after each run.
        """
        check = HandlerHealth.for_period(name, period_s, self._monotonic())
        with self._lock:
            self._handlers.append(check)
        return check

    def check(self) -> HealthReport:
        """Every current reason to be unhealthy (a source that raises is itself a reason)."""
        now = self._monotonic()
        with self._lock:
            sources, handlers = list(self._sources), list(self._handlers)
        reasons = _problems(sources)
        for handler in handlers:
            why = handler.failing(now)
            if why is not None:
                reasons.append(why)
        return HealthReport(tuple(reasons))


def _problems(sources: Iterable[ProblemSource]) -> list[str]:
    """What ``sources`` say; a source that raises is itself a reason."""
    reasons: list[str] = []
    for source in sources:
        try:
            reasons.extend(source())
        except Exception as err:
            reasons.append(f"health source failed: {err!r}")
    return reasons
