"""Group commit at the socket: kubelet calls that arrive together reach the Allocator as one
``CommandGroup``, so one fsync covers all their records (DESIGN.md, the commit protocol).

The gRPC handler threads of one server share a ``CallGrouper``. A call that finds no group
in flight leads: it asks the Allocator with the calls waiting at that moment (itself first),
hands each caller its outcome, then hands the lead to the oldest call that arrived meanwhile.
The others wait for their outcome. Alone, a call is asked as itself, exactly as without
grouping; under load, the calls that queued behind a group's fsync share the next one.

What a caller is answered is its own outcome, given only after the group's fsync (the
Allocator returns the outcomes after it), so no answer depends on a record not on disk; a
failed fsync fails every call of its group with ``AllocatorUnavailable`` and kubelet retries.
That answer promises nothing about the records: if the journal could not cut the group back,
they may be replayed at the next start (the store refuses every commit until then), and the
retried calls are answered from what it recovers (every kubelet call is idempotent).
A call whose deadline passes before its group was sent is withdrawn and never decided; one
whose group was sent answers UNAVAILABLE as any timed-out ask does (the group may still land,
and every kubelet call is idempotent).
"""

from __future__ import annotations

import _thread
import threading
from typing import Any

import pykka

from actors.allocator_messages import CommandGroup, GroupOutcome
from policy.cpu.commands import Allocate, GetTopologyHints, PluginCall, RemovePod
from wire.rpc import ActorRef

__all__ = ["MAX_GROUP", "CallGrouper"]

#: The most calls in one group: kubelet's own concurrency is far below it; a bound keeps one
#: group's turn (and its callers' wait) short.
MAX_GROUP = 16

Grouped = Allocate | RemovePod | GetTopologyHints


class _Waiting:
    """One caller's call, its outcome once served, and whether it was handed the lead.

    A caller that does not lead waits on ``woken``, a lock held until it is woken (its
    outcome set, or the lead handed to it), which happens once: one lock, acquired in C with
    the GIL released, where an ``Event`` would build a ``Condition`` and a waiter lock.
    """

    __slots__ = ("call", "lead", "outcome", "woken")

    def __init__(self, call: Grouped) -> None:
        self.call = call
        self.outcome: GroupOutcome | None = None
        self.lead = False
        self.woken = _thread.allocate_lock()
        self.woken.acquire()

    def wait(self, timeout: float | None) -> bool:
        """Wait to be woken, at most ``timeout`` seconds (None: for ever); whether it was."""
        return self.woken.acquire(True, -1 if timeout is None else max(timeout, 0.0))

    def wake(self) -> None:
        """Wake the caller: its outcome, or the lead, is set. Each happens once per caller
        (a caller handed the lead took its wake-up in ``wait``, or just after a ``wait`` that
        gave up: ``CallGrouper.ask``), so the lock is never released twice; the leader's own
        wake-up is simply never waited for."""
        self.woken.release()


class CallGrouper:
    """Asks the Allocator for the calls of many handler threads, a group at a time.

    Args:
        allocator: the Allocator actor's ref.
        max_group: the most calls in one group.
    """

    def __init__(self, allocator: ActorRef, max_group: int = MAX_GROUP) -> None:
        if max_group < 1:
            raise ValueError(f"a group holds at least one call, got {max_group}")
        self._allocator = allocator
        self._max = max_group
        self._lock = threading.Lock()
        self._waiting: list[_Waiting] = []
        self._leading = False

    def ask(self, call: PluginCall[Any], timeout: float | None) -> Any:
        """Serve ``call`` in a group and return its reply (what an ask would).

        Raises:
            What serving it raised (``AllocatorUnavailable``, a ``PolicyError``), or pykka's
            ``Timeout`` (or ``ActorDeadError``) when the Allocator did not answer in time.
        """
        assert isinstance(call, Allocate | RemovePod | GetTopologyHints)
        me = _Waiting(call)
        with self._lock:
            self._waiting.append(me)
            lead = not self._leading
            self._leading = True
        if not lead and not me.wait(timeout):
            with self._lock:
                if me.outcome is None and not me.lead:
                    if me in self._waiting:
                        self._waiting.remove(me)  # never sent: withdrawn, never decided
                    # Else its group is in flight: answered as a timed-out ask is.
                    raise pykka.Timeout(f"{type(call).__name__}: no answer within {timeout} s")
                if me.lead:
                    # Handed the lead (under this lock) just as its wait gave up: take the
                    # wake-up it missed, so that its own group's wake-up of it releases a
                    # held lock. Left released, that second release raised in ``_lead``
                    # before the lead was handed on, and every later call waited for a
                    # leader that never came (a SIGSTOP expires every deadline at once).
                    me.woken.acquire()
        if me.outcome is None:  # handed the lead (or led from the start)
            self._lead(timeout)
        assert me.outcome is not None
        if me.outcome.error is not None:
            raise me.outcome.error
        return me.outcome.reply

    def _lead(self, timeout: float | None) -> None:
        """Send the waiting calls (the leader's among them) as one group, answer each caller,
        then hand the lead to the oldest call still waiting."""
        with self._lock:
            group, self._waiting = self._waiting[: self._max], self._waiting[self._max :]
        try:
            if len(group) == 1:
                outcomes: tuple[GroupOutcome, ...] = (self._ask_one(group[0].call, timeout),)
            else:
                commands = tuple(waiting.call for waiting in group)
                answer = self._allocator.ask(CommandGroup(commands), timeout=timeout)
                outcomes = tuple(answer)
        except Exception as err:  # no answer for the whole group: each caller gets the error
            outcomes = tuple(GroupOutcome(error=err) for _ in group)
        for waiting, outcome in zip(group, outcomes, strict=True):
            waiting.outcome = outcome
            waiting.wake()
        with self._lock:
            if self._waiting:
                successor = self._waiting[0]
                successor.lead = True
                successor.wake()
            else:
                self._leading = False

    def _ask_one(self, call: Grouped, timeout: float | None) -> GroupOutcome:
        try:
            return GroupOutcome(reply=self._allocator.ask(call, timeout=timeout))
        except Exception as err:
            return GroupOutcome(error=err)
