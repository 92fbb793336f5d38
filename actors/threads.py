"""The actors' runtime on threads, as ``qrmd run`` runs them: a pykka thread per actor, a daemon
thread per ``Ticker`` and per piece of one-off background work (``qrmd.subsystem.Runtime``;
the deterministic simulation gives its own, ``qrmd.sim.dst.node.SimRuntime``)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pykka

from actors.ticker import Tellable, Ticker

__all__ = ["THREADS", "Threads"]


class Threads:
    """The ``Runtime`` on threads."""

    def spawn(self, actor_class: type[pykka.Actor], /, *args: Any) -> pykka.ActorRef[Any]:
        """``actor_class.start(*args)``: the actor on its own thread."""
        return actor_class.start(*args)

    def ticker(
        self,
        target: Tellable,
        period_s: float,
        now: Callable[[], float],
        make_tick: Callable[[float], Any],
        *,
        name: str,
    ) -> Ticker:
        """A ``Ticker`` on its own daemon thread once started."""
        return Ticker(target, period_s, now, make_tick, name=name)

    def run(self, work: Callable[[], None], *, name: str) -> threading.Thread:
        """``work`` on a daemon thread of that name, started."""
        thread = threading.Thread(target=work, name=name, daemon=True)
        thread.start()
        return thread


#: The runtime of ``qrmd run``.
THREADS = Threads()
