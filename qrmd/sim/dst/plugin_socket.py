"""The kubelet plugin socket of the simulated process: group commit at the socket, on one thread.

``qrmd run`` groups kubelet's calls at the socket (``wire.call_groups.CallGrouper``): a call
that finds no group in flight is asked alone; calls that arrive while a group is with the
Allocator wait, and go together as one ``CommandGroup`` once it is answered, so one fsync
covers all their records (the Allocator's ``_serve_group`` and the store's group commit,
``InTurnCommitter.group``). The real grouper waits on threads; this one keeps its rules with
futures the scheduler resolves:

* a grouped call (``GROUPED_CALLS``) is answered through a future of its own, resolved from
  its group's answer (its ``GroupOutcome``), after the group's sync;
* a call that waited past its deadline before its group was sent is withdrawn, never decided;
* a group not answered within the leader's deadline is given up (its callers have timed out,
  as a timed-out ask does; the group may still land), and the next group is sent;
* any other call goes to the Allocator as itself.

The conversion of each call is kubelet's side (``wire.loopback``); this is only the grouping.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from actors.allocator_messages import GROUPED_CALLS, CommandGroup, GroupOutcome
from qrmd.sim.dst.runtime import Scheduler, SimFuture
from wire.call_groups import MAX_GROUP

__all__ = ["SimPluginSocket"]


@dataclass(slots=True)
class _Waiting:
    call: Any
    future: SimFuture
    deadline: float


@dataclass(slots=True)
class _Group:
    answer: SimFuture
    members: list[_Waiting]
    deadline: float
    message: Any = None

    @property
    def grouped(self) -> bool:
        """Whether it was sent as a ``CommandGroup`` (answered with one outcome per call)."""
        return len(self.members) > 1


class SimPluginSocket:
    """The Allocator as kubelet's calls reach it through the plugin socket (module docstring).

    Args:
        allocator: the supervised Allocator's ref.
        scheduler: resolves the futures.
        timeout_s: each call's deadline (kubelet's).
        witnesses: the state each command of a served group was answered from, by the
            group's ``id`` (the simulated node's record): a caller's future gets its own.
        befores: the state the Allocator held as it began each call, by the message's ``id``
            (a group's: one per call): a caller's future gets its own as ``before``.
    """

    def __init__(
        self,
        allocator: Any,
        scheduler: Scheduler,
        timeout_s: float,
        witnesses: dict[int, tuple[Any, list[tuple[int, Any]]]],
        befores: dict[int, tuple[Any, list[Any]]] | None = None,
    ) -> None:
        self._allocator = allocator
        self._witnesses = witnesses
        self._befores: dict[int, tuple[Any, list[Any]]] = {} if befores is None else befores
        self._scheduler = scheduler
        self._timeout_s = timeout_s
        self._waiting: list[_Waiting] = []
        self._in_flight: _Group | None = None
        #: Groups of more than one call sent, and the calls they held (for the trace's figures).
        self.groups = 0
        self.grouped_calls = 0

    def ask(self, message: Any, *, block: bool = False, timeout: float | None = None) -> Any:
        """What the server does with a converted call: group it, or ask it as itself."""
        if not isinstance(message, GROUPED_CALLS):
            return self._allocator.ask(message, block=block, timeout=timeout)
        now = self._scheduler.clock.monotonic()
        if self._in_flight is None and not self._waiting:
            # Alone: asked as itself at once (an Allocator being restarted answers at once).
            answer = self._allocator.ask(message, block=False)
            mine = SimFuture(self._scheduler)
            waiting = _Waiting(message, mine, now + self._timeout_s)
            self._send(_Group(answer, [waiting], waiting.deadline, message))
            return mine
        mine = SimFuture(self._scheduler)
        self._waiting.append(_Waiting(message, mine, now + self._timeout_s))
        return mine

    def pump(self) -> None:
        """Time passed: give up a group whose leader's deadline passed, and send the next."""
        group = self._in_flight
        if group is not None and self._scheduler.clock.monotonic() >= group.deadline:
            self._in_flight = None
            self._lead()

    def _send(self, group: _Group) -> None:
        self._in_flight = group
        group.answer.callbacks.append(lambda answer: self._answered(group, answer))

    def _answered(self, group: _Group, answer: SimFuture) -> None:
        if self._in_flight is not group:
            return  # given up: its callers timed out
        self._in_flight = None
        exception = answer.exception
        if exception is not None:
            outcomes = [GroupOutcome(error=exception) for _ in group.members]
        elif group.grouped:
            outcomes = list(answer.value)
        else:
            outcomes = [GroupOutcome(reply=answer.value)]
        message, witnesses = self._witnesses.pop(id(group.message), (None, []))
        if message is not group.message:
            witnesses = []
        message, befores = self._befores.pop(id(group.message), (None, []))
        if message is not group.message:
            befores = []
        for waiting, outcome in zip(group.members, outcomes, strict=True):
            if befores:
                waiting.future.before = befores.pop(0)
            _resolve(waiting.future, outcome)
            if witnesses:
                waiting.future.witness = witnesses.pop(0)
        self._lead()

    def _lead(self) -> None:
        """Send the calls still waiting (up to ``MAX_GROUP``) as the next group."""
        now = self._scheduler.clock.monotonic()
        # Past its deadline before its group was sent: withdrawn, never decided.
        self._waiting = [w for w in self._waiting if w.deadline > now]
        while self._waiting and self._in_flight is None:
            members, self._waiting = self._waiting[:MAX_GROUP], self._waiting[MAX_GROUP:]
            message = (
                members[0].call
                if len(members) == 1
                else CommandGroup(tuple(w.call for w in members))
            )
            try:
                answer = self._allocator.ask(message, block=False)
            except Exception as err:  # the Allocator is restarting: every caller gets it
                for waiting in members:
                    _resolve(waiting.future, GroupOutcome(error=err))
                continue
            if len(members) > 1:
                self.groups += 1
                self.grouped_calls += len(members)
            self._send(_Group(answer, members, members[0].deadline, message))


def _resolve(future: SimFuture, outcome: GroupOutcome) -> None:
    if outcome.error is not None:
        error = outcome.error
        future.set_exception((type(error), error, error.__traceback__))
    else:
        future.set(outcome.reply)
