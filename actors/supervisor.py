"""The Supervisor: starts the actors in order, restarts one that dies, stops them in reverse.

Rules (DESIGN.md "Actors and messages", the commit protocol step 5; STYLE.md "Actors"):

* ``start`` starts each child in the order given and waits until it is ready (its ``ready``
  call returns) before starting the next, so a child may use the ones before it: the
  StateStore first (it recovers from disk), then the Allocator, built from the store's
  recovered snapshot. If one fails, the ones already started are stopped in reverse and
  ``SupervisorError`` names the child and the cause.
* A monitor thread checks the children's liveness every ``poll_interval_s``. When a child has
  died it is restarted together with every child after it (rest-for-one): those depend on it,
  and an Allocator must never keep a state that a restarted StateStore did not recover. While
  that happens ``available()`` is False and every ``ask`` through a ``SupervisedRef`` fails
  with the child's unavailability error (the wire answers UNAVAILABLE), never with stale data.
  A restart that fails is retried with a doubling back-off, and so is a child that dies again
  soon after its restart (a crash loop): ``actors.restart_backoff`` computes each wait from
  the readings of the monotonic clock the Supervisor is given, so tests drive it with a fake.
* ``stop`` stops the children in reverse and returns (and logs, as a bug) any still alive.

Callers hold ``SupervisedRef``s, never a child's own ref, so a restart is invisible to them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pykka

from actors.errors import ActorError
from actors.ports.clock import SYSTEM_CLOCK, Clock
from actors.restart_backoff import RestartBackoff, plan_restart
from policy.errors import ErrorKind

__all__ = [
    "ActorUnavailable",
    "ChildSpec",
    "ChildStatus",
    "SupervisedRef",
    "Supervisor",
    "SupervisorError",
    "SupervisorStatus",
]

_log = logging.getLogger("actors.supervisor")


class ActorUnavailable(ActorError):  # noqa: N818 (a state, like AllocatorUnavailable)
    """A supervised actor cannot be asked now: it is starting, restarting or stopped."""

    kind = ErrorKind.UNAVAILABLE


class SupervisorError(ActorError):
    """A child could not be started; the message names it and the cause."""

    kind = ErrorKind.INTERNAL


def _no_wait(_ref: pykka.ActorRef[Any]) -> None:
    return None


@dataclass(frozen=True, slots=True)
class ChildSpec:
    """How to start one supervised actor.

    Attributes:
        name: the child's name in logs, status and ``Supervisor.ref``.
        start: starts the actor, given the refs of the children before it (by name).
        ready: waits until the started actor is ready to serve (e.g. an ``ask`` with a
            timeout); raises if it never will.
        unavailable: builds the error an ``ask`` through its ``SupervisedRef`` raises while
            it cannot be asked.
        stop_timeout_s: how long ``stop`` waits for it.
    """

    name: str
    start: Callable[[Mapping[str, pykka.ActorRef[Any]]], pykka.ActorRef[Any]]
    ready: Callable[[pykka.ActorRef[Any]], None] = _no_wait
    unavailable: Callable[[str], Exception] = ActorUnavailable
    stop_timeout_s: float = 5.0


@dataclass(frozen=True, slots=True)
class ChildStatus:
    """One child's liveness for health and metrics."""

    name: str
    alive: bool
    restarts: int
    last_failure: str | None


@dataclass(frozen=True, slots=True)
class SupervisorStatus:
    """The children's liveness; ``available`` is False while any is down or restarting."""

    available: bool
    children: tuple[ChildStatus, ...] = field(default_factory=tuple)

    def problems(self) -> list[str]:
        """Why the actors are not available, one phrase per down child."""
        out = []
        for child in self.children:
            if not child.alive:
                why = f": {child.last_failure}" if child.last_failure else ""
                out.append(f"actor {child.name} is down{why}")
        if not self.available and not out:
            out.append("actors are restarting")
        return out


@dataclass(slots=True)
class _Child:
    spec: ChildSpec
    ref: pykka.ActorRef[Any] | None = None
    restarts: int = 0
    last_failure: str | None = None
    restarted_at: float | None = None
    quick_deaths: int = 0

    def is_alive(self) -> bool:
        return self.ref is not None and self.ref.is_alive()


class Supervisor:
    """Starts, watches and stops the daemon's actors (see the module docstring).

    Args:
        children: in dependency order.
        poll_interval_s: how often the monitor checks liveness.
        backoff_s: first and longest wait between failed restarts, and before restarting a
            child that died again within ``stable_s`` of its last restart.
        stable_s: a child alive this long after a restart is restarted at once if it dies.
        clock: whose monotonic reading times restarts (``stable_s``); the daemon's clock.
        wait: waits up to the given seconds between restart attempts and returns True when
            the Supervisor is stopping; default: its own stop event. The deterministic
            simulation (``qrmd sim``) passes one that moves its virtual clock.
        monitor: watch the children from a thread of its own (the daemon); False leaves the
            watching to the owner, which calls ``check`` (the simulation, on one thread).

    Raises:
        ValueError: two children share a name, or a back-off setting is out of range.
    """

    def __init__(
        self,
        children: Sequence[ChildSpec],
        *,
        poll_interval_s: float = 0.1,
        backoff_s: tuple[float, float] = (0.5, 30.0),
        stable_s: float = 10.0,
        clock: Clock = SYSTEM_CLOCK,
        wait: Callable[[float], bool] | None = None,
        monitor: bool = True,
    ) -> None:
        names = [c.name for c in children]
        if len(set(names)) != len(names):
            raise ValueError(f"supervised children need distinct names, got {names}")
        self._children = [_Child(spec) for spec in children]
        self._poll_interval_s = poll_interval_s
        self._backoff = RestartBackoff(*backoff_s, stable_s=stable_s)
        self._clock = clock
        self._lock = threading.RLock()
        self._restarting = False
        self._running = False
        self._stopping = threading.Event()
        self._wait = wait or self._stopping.wait
        self._watching = monitor
        self._monitor: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Start every child in order, each ready before the next, then watch them.

        Raises:
            SupervisorError: a child failed to start or to become ready; the children already
                started were stopped in reverse.
        """
        try:
            self._start_from(0)
        except SupervisorError:
            self._stop_from(0)
            raise
        self._running = True
        if self._watching:
            self._monitor = threading.Thread(target=self._watch, name="supervisor", daemon=True)
            self._monitor.start()

    def stop(self) -> list[str]:
        """Stop watching, then stop the children in reverse order.

        Returns:
            The names of children still alive afterwards (each logged as a bug).
        """
        self._stopping.set()
        if self._monitor is not None:
            self._monitor.join()
        with self._lock:
            self._running = False
            self._stop_from(0)
            alive = [c.spec.name for c in self._children if c.is_alive()]
        for name in alive:
            _log.error("bug: actor %s is still alive after shutdown", name)
        return alive

    # -- queries ------------------------------------------------------------------------------

    def available(self) -> bool:
        """True when every child is running and none is restarting."""
        with self._lock:
            return (
                self._running and not self._restarting and all(c.is_alive() for c in self._children)
            )

    def status(self) -> SupervisorStatus:
        """Each child's liveness, restart count and last failure."""
        with self._lock:
            return SupervisorStatus(
                available=self.available(),
                children=tuple(
                    ChildStatus(c.spec.name, c.is_alive(), c.restarts, c.last_failure)
                    for c in self._children
                ),
            )

    def ref(self, name: str) -> SupervisedRef:
        """A ref to the child ``name`` that follows it across restarts.

        Raises:
            KeyError: no child has that name.
        """
        self._child(name)
        return SupervisedRef(self, name)

    def current(self, name: str) -> pykka.ActorRef[Any]:
        """The running actor of child ``name``.

        Raises:
            Exception: the child's ``unavailable`` error while the actors are not available.
        """
        child = self._child(name)
        with self._lock:
            ref = child.ref
            if ref is None or not self.available():
                raise child.spec.unavailable(self._why_unavailable(name))
            return ref

    # -- internals ----------------------------------------------------------------------------

    def _child(self, name: str) -> _Child:
        for child in self._children:
            if child.spec.name == name:
                return child
        raise KeyError(f"no supervised actor named {name!r}")

    def _why_unavailable(self, name: str) -> str:
        if self._stopping.is_set():
            return f"{name} is unavailable: the daemon is stopping"
        if not self._running:
            return f"{name} is unavailable: the daemon is starting"
        problems = self.status().problems()
        return f"{name} is unavailable: " + "; ".join(problems or ["actors are restarting"])

    def _start_from(self, index: int) -> None:
        refs = {c.spec.name: c.ref for c in self._children[:index] if c.ref is not None}
        for child in self._children[index:]:
            spec = child.spec
            try:
                child.ref = spec.start(refs)
                spec.ready(child.ref)
            except Exception as err:
                child.last_failure = f"start failed: {err}"
                raise SupervisorError(f"actor {spec.name} failed to start: {err}") from err
            if not child.ref.is_alive():
                child.last_failure = "stopped while starting"
                raise SupervisorError(f"actor {spec.name} stopped while starting")
            refs[spec.name] = child.ref
            _log.debug("actor %s started", spec.name)

    def _stop_from(self, index: int) -> None:
        for child in reversed(self._children[index:]):
            ref = child.ref
            if ref is None:
                continue
            try:
                ref.stop(block=True, timeout=child.spec.stop_timeout_s)
            except pykka.Timeout:
                _log.error(
                    "actor %s did not stop within %.1f s",
                    child.spec.name,
                    child.spec.stop_timeout_s,
                )

    def check(self) -> bool:
        """One round of watching: restart the first dead child and the ones after it.

        The monitor thread calls it every ``poll_interval_s``; without one (``monitor=False``)
        the owner does.

        Returns:
            Whether a child was found dead (and a restart attempted).
        """
        dead = next((i for i, c in enumerate(self._children) if not c.is_alive()), None)
        if dead is None:
            return False
        self._restart_from(dead)
        return True

    def _watch(self) -> None:
        while not self._stopping.wait(self._poll_interval_s):
            self.check()

    def _restart_from(self, index: int) -> None:
        """Rest-for-one: restart child ``index`` and every child after it."""
        with self._lock:
            self._restarting = True
        failed = self._children[index]
        failed.last_failure = "died"
        after = [c.spec.name for c in self._children[index + 1 :]]
        # A child that keeps dying soon after each restart is restarted ever more slowly,
        # so a crash loop does not spin the CPU or flood the log.
        plan = plan_restart(
            self._backoff,
            quick_deaths=failed.quick_deaths,
            restarted_at=failed.restarted_at,
            now=self._clock.monotonic(),
        )
        failed.quick_deaths, wait = plan.quick_deaths, plan.wait_s
        _log.error(
            "actor %s died; restarting it%s%s; the daemon answers UNAVAILABLE meanwhile",
            failed.spec.name,
            f" and the actors after it ({', '.join(after)})" if after else "",
            f" in {wait:.1f} s (it died {failed.quick_deaths} times soon after a restart)"
            if wait
            else "",
        )
        attempt = 0
        if wait and self._wait(wait):
            return  # stopping: ``stop`` takes the children down
        while not self._stopping.is_set():
            # A child before ``index`` may have died meanwhile (the store, while the Allocator
            # restarts): restart from it, or every attempt would start on a dead dependency
            # and fail for ever.
            earlier = next(
                (i for i, c in enumerate(self._children[:index]) if not c.is_alive()), None
            )
            if earlier is not None:
                self._children[earlier].last_failure = "died"
                index = earlier
            self._stop_from(index)
            for child in self._children[index:]:
                child.restarts += 1
            try:
                self._start_from(index)
            except SupervisorError as err:
                delay = self._backoff.retry_delay(attempt)
                _log.error("restart failed, retrying in %.1f s: %s", delay, err)
                if self._wait(delay):
                    break
                attempt += 1
                continue
            failed.last_failure = None
            failed.restarted_at = self._clock.monotonic()
            _log.warning("actor %s restarted", failed.spec.name)
            break
        with self._lock:
            self._restarting = False


class SupervisedRef:
    """Asks a supervised child, whichever actor currently runs it.

    Quacks like the part of ``pykka.ActorRef`` callers use (``ask``, ``tell``): it is an
    ``actors.ports.actor_ref.ActorRef``, so it can be handed to the gRPC servers and to
    committers in place of a real ref, and a ticker's target.
    """

    def __init__(self, supervisor: Supervisor, name: str) -> None:
        self._supervisor = supervisor
        self._name = name

    def ask(self, message: Any, *, block: bool = True, timeout: float | None = None) -> Any:
        """``ask`` the running child.

        Raises:
            Exception: the child's unavailability error while it cannot be asked, or when it
                stops before answering; whatever the child raises for this message.
        """
        ref = self._supervisor.current(self._name)
        try:
            return ref.ask(message, block=block, timeout=timeout)
        except pykka.ActorDeadError as err:
            raise self._unavailable(f"{self._name} stopped before answering: {err}") from err

    def tell(self, message: Any) -> None:
        """``tell`` the running child (fire and forget).

        Raises:
            Exception: the child's unavailability error while it cannot be told.
        """
        ref = self._supervisor.current(self._name)
        try:
            ref.tell(message)
        except pykka.ActorDeadError as err:
            raise self._unavailable(f"{self._name} stopped: {err}") from err

    def _unavailable(self, reason: str) -> Exception:
        return self._supervisor._child(self._name).spec.unavailable(reason)
