"""One thread, many actors: pykka's actor, inbox and future hooks driven by a seeded scheduler.

The production actor classes run unmodified. ``Scheduler.actor_class(StateStoreActor)`` is a
subclass that overrides only pykka's three runtime hooks (``_create_actor_inbox``,
``_create_future``, ``_start_actor_loop``), the way pykka's own threading and gevent runtimes
do:

* an inbox is a plain queue the scheduler drains, one message at a time, choosing the actor
  whose message goes next from the seed;
* ``start`` runs ``on_start`` at once (as the actor's thread would before its first message);
* a future resolves when the receiving actor's handler returns. ``get`` on an unresolved
  future runs the scheduler until it resolves (an actor's blocking ``ask`` of the StateStore
  delivers the store's messages meanwhile), so nothing ever waits on a thread. A future that
  resolves after its timeout, on the virtual clock, raises pykka's ``Timeout``, as a late
  answer does on a real node; one that cannot resolve (no message left to deliver) times out
  at its deadline.

Handling a message follows pykka's loop (``pykka._actor.Actor._actor_loop_running``): the
reply or the exception goes to the asker; an exception in a told message stops the actor and
calls ``on_failure``. A ``SimCrash`` raised anywhere (a crash fault fired inside a disk
operation) is not an exception of the actor's: it unwinds the whole simulated process, and
the simulation crashes the node.
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

import pykka
from pykka import ActorRegistry

from qrmd.sim.dst.clock import VirtualClock

__all__ = ["Scheduler", "SimCrash", "SimDeadlockError", "SimFuture"]

A = TypeVar("A", bound=pykka.Actor)
ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]


class SimCrash(BaseException):
    """The simulated process dies here (a crash fault fired); unwinds every actor at once."""


class SimDeadlockError(RuntimeError):
    """A blocking ``ask`` without a timeout whose answer can never come: no message is left
    to deliver. On a real node that thread would hang for ever; here it is a failure."""


class SimInbox:
    """An actor's inbox: pykka's ``ActorInbox`` as a plain queue the scheduler drains."""

    __slots__ = ("_queue",)

    def __init__(self) -> None:
        self._queue: deque[Any] = deque()

    def put(self, envelope: Any, /) -> None:
        self._queue.append(envelope)

    def get(self) -> Any:
        return self._queue.popleft()

    def empty(self) -> bool:
        return not self._queue

    def clear(self) -> None:
        self._queue.clear()


class SimFuture(pykka.Future[Any]):
    """A future resolved by the scheduler; ``get`` runs the scheduler until it resolves."""

    def __init__(self, scheduler: Scheduler | None = None) -> None:
        super().__init__()
        # pykka builds a hook-only future with no arguments (``ActorRef.stop``'s converter).
        self._scheduler = scheduler
        self.created_at = 0.0 if scheduler is None else scheduler.clock.monotonic()
        self.resolved_at: float | None = None
        self._value: Any = None
        self._exc_info: ExcInfo | None = None
        #: What the simulation saw when it resolved: (store seq, durable state).
        self.witness: Any = None
        #: For a kubelet call: the durable state the Allocator held when it began serving it.
        self.before: Any = None
        #: Called with the future once it resolves (after the simulation's witness).
        self.callbacks: list[Callable[[SimFuture], None]] = []

    @property
    def done(self) -> bool:
        """Whether the answer (or the exception) is in."""
        return self.resolved_at is not None

    @property
    def exception(self) -> BaseException | None:
        """The exception answered, if any (only once ``done``)."""
        return None if self._exc_info is None else self._exc_info[1]

    @property
    def value(self) -> Any:
        """The value answered (only once ``done`` without an exception)."""
        return self._value

    def get(self, *, timeout: float | None = None) -> Any:
        if self._get_hook is not None or self._scheduler is None:
            return super().get(timeout=timeout)
        if self.done:
            # pykka's rule: a future that holds its answer gives it, whatever the timeout
            # (the checkers poll a residual round's answer with ``timeout=0`` a round later).
            late = False
        else:
            deadline = None if timeout is None else self.created_at + timeout
            self._scheduler.run_until(self, deadline)
            assert self.resolved_at is not None
            late = deadline is not None and self.resolved_at > deadline
        if late:
            raise pykka.Timeout(f"{timeout} seconds (the answer came late)")
        if self._exc_info is not None:
            raise self._exc_info[1]
        return self._value

    def set(self, value: Any | None = None) -> None:
        if self.done:
            raise RuntimeError("a simulated future was set twice")
        assert self._scheduler is not None
        self._value = value
        self.resolved_at = self._scheduler.clock.monotonic()
        self._scheduler.resolved(self)
        for callback in self.callbacks:
            callback(self)

    def set_exception(self, exc_info: Any = None) -> None:
        if self.done:
            raise RuntimeError("a simulated future was set twice")
        info = exc_info if exc_info is not None else sys.exc_info()
        assert info[0] is not None and info[1] is not None and self._scheduler is not None
        self._exc_info = (info[0], info[1], info[2])
        self.resolved_at = self._scheduler.clock.monotonic()
        self._scheduler.resolved(self)
        for callback in self.callbacks:
            callback(self)


class Scheduler:
    """Delivers actors' messages one at a time, in an order ``rng`` picks.

    Args:
        rng: the seed's generator (its only source of choices).
        clock: the virtual clock; each delivered message costs ``message_cost_s``.
        message_cost_s: virtual seconds one message takes to handle.
    """

    def __init__(self, rng: Any, clock: VirtualClock, *, message_cost_s: float = 0.0002) -> None:
        self.rng = rng
        self.clock = clock
        self.message_cost_s = message_cost_s
        self.delivered = 0
        self._actors: list[pykka.Actor] = []
        self._busy: list[pykka.Actor] = []
        self._classes: dict[type, type] = {}
        #: Told each resolved future (the simulation's witnesses read the state there).
        self.on_resolved: Callable[[SimFuture], None] | None = None
        #: Told each message an actor answered with an exception (refused commits).
        self.on_error_reply: Callable[[Any, BaseException], None] | None = None
        #: Told each asked message an actor answered, with its answer (acknowledged commits).
        self.on_reply: Callable[[Any, Any], None] | None = None

    # -- the runtime hooks ----------------------------------------------------------------------

    def actor_class(self, base: type[A]) -> type[A]:
        """``base`` with pykka's runtime hooks replaced by this scheduler's (module docstring)."""
        cls = self._classes.get(base)
        if cls is None:
            scheduler = self

            def start_loop(actor: pykka.Actor) -> None:
                scheduler._started(actor)

            cls = type(
                f"Sim{base.__name__}",
                (base,),
                {
                    "_create_actor_inbox": staticmethod(SimInbox),
                    "_create_future": staticmethod(lambda: SimFuture(scheduler)),
                    "_start_actor_loop": start_loop,
                },
            )
            self._classes[base] = cls
        return cls

    def _started(self, actor: pykka.Actor) -> None:
        self._actors.append(actor)
        actor._actor_loop_setup()  # on_start, as the thread would run it first
        if actor.actor_stopped.is_set():
            self._retire(actor)

    # -- driving --------------------------------------------------------------------------------

    @property
    def actors(self) -> tuple[pykka.Actor, ...]:
        """The actors alive, in start order."""
        return tuple(self._actors)

    def runnable(self) -> list[pykka.Actor]:
        """Actors with a message waiting and not inside a handler already."""
        return [a for a in self._actors if not a.actor_inbox.empty() and a not in self._busy]

    def step(self) -> bool:
        """Deliver one message to an actor the seed picks; False when none is waiting."""
        ready = self.runnable()
        if not ready:
            return False
        actor = ready[0] if len(ready) == 1 else ready[self.rng.randrange(len(ready))]
        self._deliver(actor)
        return True

    def run_until(self, future: SimFuture, deadline: float | None) -> None:
        """Deliver messages until ``future`` resolves or ``deadline`` passes.

        Raises:
            pykka.Timeout: the deadline passed first (the clock is moved to it when nothing
                was left to deliver).
            SimDeadlockError: no deadline and nothing left to deliver.
        """
        while not future.done:
            if deadline is not None and self.clock.monotonic() >= deadline:
                raise pykka.Timeout("the deadline passed")
            if not self.step():
                if deadline is None:
                    raise SimDeadlockError("a blocking ask without a timeout can never be answered")
                self.clock.advance(max(0.0, deadline - self.clock.monotonic()))
                raise pykka.Timeout("no answer before the deadline")

    def resolved(self, future: SimFuture) -> None:
        if self.on_resolved is not None:
            self.on_resolved(future)

    def kill_all(self) -> None:
        """The process died: every actor stops at once, its inbox lost, nothing answered."""
        for actor in self._actors:
            actor.actor_stopped.set()
            actor.actor_inbox.clear()  # type: ignore[attr-defined]
            ActorRegistry.unregister(actor.actor_ref)
        self._actors.clear()
        self._busy.clear()

    def _deliver(self, actor: pykka.Actor) -> None:
        envelope = actor.actor_inbox.get()
        self.delivered += 1
        self.clock.advance(self.message_cost_s)
        self._busy.append(actor)
        try:
            # pykka's loop body (``Actor._actor_loop_running``), one envelope.
            try:
                response = actor._handle_receive(envelope.message)
                if envelope.reply_to is not None:
                    if self.on_reply is not None:
                        self.on_reply(envelope.message, response)
                    envelope.reply_to.set(response)
            except Exception as err:
                if envelope.reply_to is not None:
                    if self.on_error_reply is not None:
                        self.on_error_reply(envelope.message, err)
                    envelope.reply_to.set_exception()
                else:
                    actor._handle_failure(*sys.exc_info())
                    try:
                        actor.on_failure(*sys.exc_info())
                    except Exception:
                        actor._handle_failure(*sys.exc_info())
        finally:
            self._busy.remove(actor)
        if actor.actor_stopped.is_set():
            self._retire(actor)

    def _retire(self, actor: pykka.Actor) -> None:
        """A stopped actor: fail what is left in its inbox (pykka's teardown) and drop it."""
        actor._actor_loop_teardown()
        if actor in self._actors:
            self._actors.remove(actor)
