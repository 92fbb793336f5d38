"""Whether kubelet's calls are being served: a watch of the call path itself, for ``/healthz``
and ``/livez`` (DESIGN.md "Supervisor": health; spec cpu-policy §12.3 is the handlers' rule,
this is qrmd's own).

Every actor can be alive while kubelet's calls go unanswered: a lead of the call grouper that
never hands on (``wire.call_groups``), an Allocator that never ends its turn, an fsync that
takes longer than kubelet waits. So each ``CallGrouper`` says since when its calls have gone
without an answer from the Allocator (``unanswered_since``): the stretch starts when a call
arrives while none runs; a group the Allocator answered (a reply, or an error it raised)
restarts it at that moment while calls still wait, and ends it when none do; a group that got
no answer in time (pykka's ``Timeout``) leaves it running, so a path that fails every call
keeps counting past any one call's deadline, however the calls come. It ends then when a
later group is answered, or, with no call waiting, when the Allocator answers the read the
grouper queued behind the unanswered group: once the Allocator got past it. So an idle
grouper whose calls were answered has no stretch (nothing is refused by a path nobody asks),
and an Allocator that is still stuck keeps failing the checks with no call arriving.

The rules, on the oldest stretch of any socket's grouper (its age; 0 when there is none):

* ``/healthz`` fails when the age exceeds half the calls' timeout (``HEALTH_LIMIT_S``, 5 s
  for kubelet's 10 s): a call that waits longer no longer has room for its own group's turn
  before kubelet gives up, so from there the path can no longer be trusted to answer in time.
  Bounding it below the timeout also lets one call that waits out its whole deadline show.
* ``/livez`` fails when it exceeds six timeouts (``LIVENESS_LIMIT_S``, 60 s): six deadlines
  in a row without one answer is no slow disk a healthy node has, but a wedge inside the
  process (a lead that never hands on, an actor that never ends its turn), which a restart
  cures and nothing else does; a restart loses nothing acknowledged. An fsync stuck for a
  minute fails it too: qrmd cannot serve kubelet then anyway.

The watch logs a warning when the path becomes stuck (the ``/healthz`` rule) and a line when
it is answered again; it notices at each check, and the grouper asks it to look when a caller
gives up and when a group is answered while it is stuck, so the log shows both without probes.

Time is an argument (a monotonic clock), so the rules are tested without sleeping.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Protocol

__all__ = [
    "CALL_TIMEOUT_S",
    "HEALTH_LIMIT_S",
    "LIVENESS_LIMIT_S",
    "KubeletCallWatch",
    "Stretch",
    "WatchedPath",
]

_log = logging.getLogger("qrmd.kubelet_calls")

#: kubelet's deadline for Allocate, GetTopologyHints and RemovePod, the grouped calls' ask
#: timeout (wire.md §9.6; ``wire.resource_plugin.DEFAULT_TIMEOUT_S``).
CALL_TIMEOUT_S: Final = 10.0
#: ``/healthz`` fails past half a call's timeout without an answer (module docstring).
HEALTH_LIMIT_S: Final = CALL_TIMEOUT_S / 2
#: ``/livez`` fails past six calls' timeouts without an answer (module docstring).
LIVENESS_LIMIT_S: Final = 6 * CALL_TIMEOUT_S


class WatchedPath(Protocol):
    """One socket's call grouper, as the watch reads it (``wire.call_groups.CallGrouper``)."""

    def unanswered_since(self) -> float | None:
        """When the current stretch without an answer began (monotonic), or None: none."""
        ...

    def queued(self) -> int:
        """Calls waiting to be sent to the Allocator now."""
        ...


@dataclass(frozen=True, slots=True)
class Stretch:
    """The oldest stretch without an answer across the sockets.

    Attributes:
        age_s: how long it has lasted (0: the path is answered, or idle).
        queued: calls waiting to be sent to the Allocator now, over every socket.
    """

    age_s: float
    queued: int


class KubeletCallWatch:
    """Watches the groupers of every kubelet socket; see the module docstring. Thread-safe.

    Args:
        monotonic: the clock; the groupers take their timestamps on it.
        health_limit_s: ``/healthz`` fails past this age.
        liveness_limit_s: ``/livez`` fails past this age.
    """

    def __init__(
        self,
        monotonic: Callable[[], float],
        *,
        health_limit_s: float = HEALTH_LIMIT_S,
        liveness_limit_s: float = LIVENESS_LIMIT_S,
    ) -> None:
        if not 0 < health_limit_s <= liveness_limit_s:
            raise ValueError(
                f"the health limit ({health_limit_s} s) must be positive and at most the "
                f"liveness limit ({liveness_limit_s} s)"
            )
        self.monotonic = monotonic
        self.health_limit_s = health_limit_s
        self.liveness_limit_s = liveness_limit_s
        self._lock = threading.Lock()
        self._paths: list[WatchedPath] = []
        #: Whether the last check found the path stuck (read by the grouper without the lock:
        #: a stale read only delays a log line to the next check).
        self.stuck = False
        self._worst_s = 0.0

    def add(self, path: WatchedPath) -> None:
        """Watch ``path`` too (each socket's grouper adds itself as it is built)."""
        with self._lock:
            self._paths.append(path)

    def stretch(self) -> Stretch:
        """The oldest stretch without an answer now (the gauge's value); logs nothing."""
        now = self.monotonic()
        with self._lock:
            paths = list(self._paths)
        oldest: float | None = None
        queued = 0
        for path in paths:
            since = path.unanswered_since()
            if since is not None and (oldest is None or since < oldest):
                oldest = since
            queued += path.queued()
        return Stretch(0.0 if oldest is None else max(now - oldest, 0.0), queued)

    def check(self) -> Stretch:
        """The stretch now, logging when the path becomes stuck or is answered again."""
        stretch = self.stretch()
        stuck = stretch.age_s > self.health_limit_s
        with self._lock:
            was, self.stuck = self.stuck, stuck
            if stuck:
                self._worst_s = max(self._worst_s, stretch.age_s)
            worst, self._worst_s = self._worst_s, self._worst_s if stuck else 0.0
        if stuck and not was:
            reason = self._reason(stretch, self.health_limit_s)
            _log.warning("%s; see docs/running.md, Health answers", reason)
        elif was and not stuck:
            _log.info(
                "kubelet calls are answered again, after at least %.0f s without an answer from "
                "the allocator",
                worst,
            )
        return stretch

    def health_problems(self) -> list[str]:
        """Why ``/healthz`` fails: the path went without an answer past the health limit."""
        stretch = self.check()
        if stretch.age_s > self.health_limit_s:
            return [self._reason(stretch, self.health_limit_s)]
        return []

    def liveness_problems(self) -> list[str]:
        """Why ``/livez`` fails: the path went without an answer past the liveness limit."""
        stretch = self.check()
        if stretch.age_s > self.liveness_limit_s:
            return [
                self._reason(stretch, self.liveness_limit_s)
                + ": the call path is wedged, a restart is due"
            ]
        return []

    @staticmethod
    def _reason(stretch: Stretch, limit_s: float) -> str:
        return (
            f"kubelet calls: none answered by the allocator for {stretch.age_s:.0f} s "
            f"(limit {limit_s:.0f} s), {stretch.queued} queued now"
        )
