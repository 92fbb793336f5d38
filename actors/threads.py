"""The actors' runtime on threads, as ``qrmd run`` runs them: a pykka thread per actor, a daemon
thread per ``Ticker`` and per piece of one-off background work (``qrmd.subsystem.Runtime``;
the deterministic simulation gives its own, ``qrmd.sim.dst.node.SimRuntime``).

``MailboxActor`` is pykka's ``ThreadingActor`` with a lighter mailbox and reply channel, for
the actors every kubelet call asks (the Allocator, the StateStore) and the MemoryBalancer, which a
tick asks every balance interval. pykka builds both through
two hooks its runtimes override (``_create_actor_inbox``, ``_create_future``; the simulation
replaces them the same way), so the actor, its thread and its loop stay pykka's:

* the mailbox is a ``queue.SimpleQueue`` (C, one lock) instead of a ``queue.Queue`` (three
  conditions over one lock, in Python): an unbounded FIFO either way, which is all pykka's
  loop asks of it (``put``, ``get``, ``empty``);
* the reply channel is a ``ReplyFuture``, one lock held until the answer is set, instead of
  ``ThreadingFuture``'s ``Condition`` (a waiter lock allocated, queued and notified per wait).

Measured on the Allocate path (``bench/profile_allocate.py``), the hop's CPU per call went
from 21 to 17 µs in isolation; the figures are in the commit that introduced them.
"""

from __future__ import annotations

import _thread
import queue
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import pykka

from actors.ticker import Tellable, Ticker

if TYPE_CHECKING:
    from pykka._types import OptExcInfo

__all__ = ["THREADS", "MailboxActor", "ReplyFuture", "Threads"]


class ReplyFuture(pykka.Future[Any]):
    """A pykka future answered once, by another thread: the value, or the exception.

    It keeps ``ThreadingFuture``'s contract: ``get`` blocks until the answer is set (or
    raises ``pykka.Timeout`` after ``timeout`` seconds), returns it as often as asked, and
    raises an exception answered with its traceback; a second ``set`` or ``set_exception``,
    or one after ``set_get_hook``, raises ``queue.Full``; a get hook (``ActorRef.stop``,
    ``map``, ``join``) is pykka's own.
    """

    __slots__ = ("_answered", "_exc_info", "_unanswered", "_value")

    def __init__(self) -> None:
        super().__init__()
        # Held until the answer is set: ``get`` waits by acquiring it (in C, the GIL released),
        # then releases it so that every later ``get`` passes at once.
        self._unanswered = _thread.allocate_lock()
        self._unanswered.acquire()
        self._answered = False
        self._value: Any = None
        self._exc_info: OptExcInfo | None = None

    def get(self, *, timeout: float | None = None) -> Any:
        if self._get_hook is not None:
            return super().get(timeout=timeout)
        if not self._answered:
            wait = -1 if timeout is None else max(timeout, 0.0)
            if not self._unanswered.acquire(True, wait):
                raise pykka.Timeout(f"{timeout} seconds")
            self._unanswered.release()
        if self._exc_info is None:
            return self._value
        exc_type, exc_value, exc_traceback = self._exc_info
        assert exc_type is not None
        if exc_value is None:
            exc_value = exc_type()
        if exc_value.__traceback__ is not exc_traceback:
            raise exc_value.with_traceback(exc_traceback)
        raise exc_value

    def set(self, value: Any | None = None) -> None:
        self._answer(value, None)

    def set_exception(self, exc_info: OptExcInfo | None = None) -> None:
        assert exc_info is None or len(exc_info) == 3
        self._answer(None, exc_info if exc_info is not None else sys.exc_info())

    def set_get_hook(self, func: Any) -> None:
        if self._answered:
            raise queue.Full
        super().set_get_hook(func)

    def _answer(self, value: Any, exc_info: OptExcInfo | None) -> None:
        if self._answered or self._get_hook is not None:
            raise queue.Full
        self._value = value
        self._exc_info = exc_info
        self._answered = True
        self._unanswered.release()


class MailboxActor(pykka.ThreadingActor):
    """pykka's ``ThreadingActor`` with a ``SimpleQueue`` mailbox and ``ReplyFuture`` answers
    (module docstring): the base of the actors kubelet's calls ask, and of the MemoryBalancer."""

    _create_actor_inbox: ClassVar[Callable[[], Any]] = staticmethod(queue.SimpleQueue)
    _create_future: ClassVar[Callable[[], pykka.Future[Any]]] = staticmethod(ReplyFuture)


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
